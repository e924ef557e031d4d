"""Paged attention for vLLM on the tpu device, in PyTorch ops (each one a StableHLO lowering).

The KV cache of a layer is one device tensor, blocks x block size x KV heads x (K | V): a
token's key and value sit side by side in the last dimension. vLLM's scheduler hands out
blocks; ``slot_mapping`` says where each new token's K/V go, ``block_table`` which blocks make
up each request's context.

A step's batch is ragged (requests of different query and context lengths, prefill and
decode mixed). It runs as one attention over the whole batch: the step's tokens (queries, in
token order) against the concatenation of every request's context pages (keys), with a mask
that lets a token see only its own request's keys at positions up to its own. Only two sizes
reach the device, the token count and the total context blocks, and both are padded to
buckets (powers of two), so the programs compiled in warm-up serve every later batch. Each
token scores every key of the batch, which costs more than a ragged kernel when a batch holds
many requests; a Pallas ragged paged attention kernel is the way to a chip's speed.

The metadata builder works out, once per step for all layers, which cache blocks to gather and
the mask; one host-to-device copy carries its integers. Each layer writes its new K/V into the
cache by slot (padding tokens write into block 0, vLLM's null block that no request owns),
gathers the batch's pages and runs SDPA with grouped-query heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from vllm.forward_context import get_forward_context
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionLayer,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
)
from vllm.v1.kv_cache_layout import KVCacheLayout

from torch_tpu.serving.buckets import bucket


class TpuAttentionBackend(AttentionBackend):
    # The cache is written by do_kv_cache_update, a step of its own, before forward reads it.
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [
        torch.float16,
        torch.bfloat16,
        torch.float32,
    ]
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto"]

    @staticmethod
    def get_name() -> str:
        # vLLM's registry has no name of ours; CUSTOM is its slot for out-of-tree backends.
        return "CUSTOM"

    @staticmethod
    def get_impl_cls() -> type[TpuAttentionImpl]:
        return TpuAttentionImpl

    @staticmethod
    def get_builder_cls() -> type[TpuAttentionMetadataBuilder]:
        return TpuAttentionMetadataBuilder

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return [32, 64, 80, 96, 112, 128, 160, 192, 224, 256]

    @classmethod
    def supported_kv_cache_layouts(cls) -> tuple[KVCacheLayout, ...]:
        # [blocks, block size, heads, K|V]: a token's K/V for all heads is one row, so a
        # write by slot is one index_copy_ over the flattened first two dimensions.
        return (KVCacheLayout.LBNHC,)

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return True


@dataclass
class TpuAttentionMetadata:
    num_actual_tokens: int
    # [Tp]: the cache row (block x block size + offset) each token's K/V is written to.
    slots: torch.Tensor
    # [TBp]: the cache blocks whose keys the step's tokens attend to, request by request.
    blocks: torch.Tensor
    # [Tp, TBp x block size] bool: the key is of the token's request, at or before it.
    mask: torch.Tensor
    # Positions of the keys [Kt] and of the tokens [Tp]; a sliding window narrows the mask.
    key_positions: torch.Tensor
    token_positions: torch.Tensor


class TpuAttentionMetadataBuilder(AttentionMetadataBuilder[TpuAttentionMetadata]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device) -> None:
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size
        scheduler = vllm_config.scheduler_config
        self.max_tokens = scheduler.max_num_batched_tokens
        max_blocks = -(-vllm_config.model_config.max_model_len // self.block_size)
        self.max_blocks = scheduler.max_num_seqs * max_blocks

    def build(
        self,
        common_prefix_len: int,
        common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> TpuAttentionMetadata:
        # The runner keeps these on the host (torch_tpu.serving.model_runner).
        meta = common_attn_metadata
        requests = meta.num_reqs
        starts = meta.query_start_loc_cpu.numpy()[: requests + 1].astype(np.int64)
        context = meta.seq_lens.cpu().numpy()[:requests].astype(np.int64)
        block_table = meta.block_table_tensor.cpu().numpy()
        query_lengths = np.diff(starts)
        tokens = int(starts[-1])
        padded_tokens = bucket(meta.num_actual_tokens, self.max_tokens)

        # New tokens' cache rows; padding (slot -1) writes into block 0, vLLM's null block.
        slots = np.zeros(padded_tokens, np.int64)
        given = meta.slot_mapping.cpu().numpy()[:padded_tokens]
        slots[: given.shape[0]] = np.maximum(given, 0)

        # Blocks of request r: row r of the block table, its first ceil(context / bs) entries.
        block_counts = -(-context // self.block_size)
        total_blocks = int(block_counts.sum())
        padded_blocks = bucket(total_blocks, self.max_blocks)
        request_of_block = np.repeat(np.arange(requests), block_counts)
        first_block = np.cumsum(block_counts) - block_counts
        block_in_request = np.arange(total_blocks) - first_block[request_of_block]
        blocks = np.zeros(padded_blocks, np.int64)
        blocks[:total_blocks] = block_table[request_of_block, block_in_request]

        # Each key slot: its request (-1 for padding, which no token matches) and position.
        offsets = np.arange(self.block_size)
        key_requests = np.full((padded_blocks, self.block_size), -1, np.int64)
        key_requests[:total_blocks] = request_of_block[:, None]
        key_positions = np.zeros((padded_blocks, self.block_size), np.int64)
        key_positions[:total_blocks] = block_in_request[:, None] * self.block_size + offsets

        # Each token: its request and absolute position. Padding tokens are request 0 at
        # position 0, so they see one key and their softmax row is not empty (NaN).
        token_requests = np.zeros(padded_tokens, np.int64)
        token_positions = np.zeros(padded_tokens, np.int64)
        request_of_token = np.repeat(np.arange(requests), query_lengths)
        token_requests[:tokens] = request_of_token
        token_positions[:tokens] = (
            np.arange(tokens)
            - starts[request_of_token]
            + (context - query_lengths)[request_of_token]
        )

        parts = [slots, blocks, key_requests.ravel(), key_positions.ravel()]
        parts += [token_requests, token_positions]
        on_device = torch.from_numpy(np.concatenate(parts).astype(np.int32)).to(self.device)
        slots_d, blocks_d, key_requests_d, key_positions_d, token_requests_d, token_positions_d = (
            on_device.split([part.size for part in parts])
        )
        mask = (token_requests_d[:, None] == key_requests_d[None, :]) & (
            key_positions_d[None, :] <= token_positions_d[:, None]
        )
        return TpuAttentionMetadata(
            num_actual_tokens=meta.num_actual_tokens,
            slots=slots_d.long(),
            blocks=blocks_d.long(),
            mask=mask,
            key_positions=key_positions_d,
            token_positions=token_positions_d,
        )


class TpuAttentionImpl(AttentionImpl):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        alibi_slopes: list[float] | None,
        sliding_window: int | None,
        kv_cache_dtype: str,
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        sinks: torch.Tensor | None = None,
    ) -> None:
        unsupported = {
            "ALiBi slopes": alibi_slopes is not None,
            "logits soft-capping": bool(logits_soft_cap),
            "attention sinks": sinks is not None,
            f"a {kv_cache_dtype} KV cache": kv_cache_dtype != "auto",
        }
        for what, asked in unsupported.items():
            if asked:
                raise NotImplementedError(f"torch_tpu's vLLM attention has no {what} yet.")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.sliding_window = sliding_window
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.attn_type = attn_type
        self._pages_of: dict[tuple[int, int], _Pages] = {}

    def _pages(self, kv_cache: torch.Tensor) -> _Pages:
        key = (kv_cache.data_ptr(), kv_cache.numel())
        if key not in self._pages_of:
            self._pages_of[key] = _pages(kv_cache)
        return self._pages_of[key]

    def do_kv_cache_update(
        self,
        layer: torch.nn.Module,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        # The slots as the metadata builder put them on the device (vLLM's own slot_mapping
        # is a host tensor here).
        meta = get_forward_context().attn_metadata
        meta = meta.get(layer.layer_name) if isinstance(meta, dict) else None
        if meta is None:  # vLLM's profiling pass runs without metadata
            return
        pages = self._pages(kv_cache)
        tokens = meta.slots.shape[0]
        new = torch.cat([key[:tokens], value[:tokens]], dim=-1).to(pages.rows.dtype)
        pages.rows.index_copy_(0, meta.slots + pages.first_row, new)

    def forward(
        self,
        layer: AttentionLayer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: TpuAttentionMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError(
                "torch_tpu's vLLM attention has no fused output quantization."
            )
        if attn_metadata is None:  # vLLM's profiling pass runs without metadata
            return output
        meta = attn_metadata
        cache = self._pages(kv_cache)
        pages = cache.blocks[meta.blocks + cache.first_block]  # [TBp, bs, H, K|V]
        pages = pages.reshape(1, -1, self.num_kv_heads, 2 * self.head_size).transpose(1, 2)
        keys = pages[..., : self.head_size]
        values = pages[..., self.head_size :]

        tokens = meta.mask.shape[0]
        queries = query[:tokens].view(1, tokens, self.num_heads, self.head_size).transpose(1, 2)
        mask = meta.mask
        if self.sliding_window is not None:
            window = meta.key_positions[None, :] > (
                meta.token_positions[:, None] - self.sliding_window
            )
            mask = mask & window
        attended = torch.nn.functional.scaled_dot_product_attention(
            queries,
            keys,
            values,
            attn_mask=mask[None, None],
            scale=self.scale,
            enable_gqa=self.num_heads != self.num_kv_heads,
        )
        rows = attended[0].transpose(0, 1).reshape(tokens, self.num_heads * self.head_size)
        output.view(output.shape[0], -1)[:tokens].copy_(rows)
        return output


@dataclass
class _Pages:
    """A layer's KV cache seen through its whole storage. vLLM carves every layer's cache out
    of one buffer; a write into a layer's slice of it would be lowered as slice, scatter and
    update-slice of the whole slice (a copy of the layer's cache every step), where a scatter
    into the whole buffer updates it in place."""

    blocks: torch.Tensor  # the storage as [blocks of every layer, block size, heads, K|V]
    rows: torch.Tensor  # the same as [token rows, heads, K|V]
    first_block: int  # this layer's first block in it
    first_row: int


def _pages(kv_cache: torch.Tensor) -> _Pages:
    # vLLM hands each layer the logical [blocks, heads, block size, K|V] view of the LBNHC
    # layout; permuted back it is the physical [blocks, block size, heads, K|V].
    blocks = kv_cache.permute(0, 2, 1, 3)
    _, block_size, heads, width = blocks.shape
    per_block = block_size * heads * width
    if not blocks.is_contiguous() or blocks.storage_offset() % per_block:
        raise RuntimeError(
            f"torch_tpu's vLLM attention expects the LBNHC KV cache layout; this cache has "
            f"strides {tuple(kv_cache.stride())} for shape {tuple(kv_cache.shape)}."
        )
    storage = kv_cache.untyped_storage()
    total_blocks = storage.nbytes() // kv_cache.element_size() // per_block
    whole = kv_cache.new_empty(0).set_(storage, 0, (total_blocks, block_size, heads, width))
    first_block = blocks.storage_offset() // per_block
    return _Pages(
        blocks=whole,
        rows=whole.view(-1, heads, width),
        first_block=first_block,
        first_row=first_block * block_size,
    )
