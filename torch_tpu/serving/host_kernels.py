"""vLLM's Triton bookkeeping kernels, as host code.

The tpu runner keeps vLLM's step bookkeeping on the host (torch_tpu.serving.model_runner), so
the Triton kernels vLLM launches on it get these host implementations instead, registered
through vLLM's kernel-override hook (vllm.triton_utils.dispatcher.register_kernels).
"""

from __future__ import annotations

import torch

SLOT_MAPPING_KERNEL = "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel"


def compute_slot_mapping(
    num_tokens: int,
    max_num_tokens: int,
    query_start_loc: torch.Tensor,  # [requests + 1]
    positions: torch.Tensor,  # [num_tokens]
    block_table: torch.Tensor,  # [max requests, blocks per request]
    block_table_stride: int,
    slot_mapping: torch.Tensor,  # [max_num_tokens], written
    KV_CACHE_BLOCK_SIZE: int,
    TOTAL_CP_WORLD_SIZE: int = 1,
    TOTAL_CP_RANK: int = 0,
    CP_KV_CACHE_INTERLEAVE_SIZE: int = 1,
    PAD_ID: int = -1,
    BLOCK_SIZE: int = 1024,
) -> None:
    """Each token's KV cache slot: its request's block for its position, times the block
    size, plus its offset in the block; PAD_ID for the rows past the step's tokens."""
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError("torch_tpu's vLLM platform has no context parallelism.")
    tokens = torch.arange(num_tokens)
    request = torch.searchsorted(query_start_loc[1:].long(), tokens, right=True)
    position = positions[:num_tokens].long()
    block = block_table[request, position // KV_CACHE_BLOCK_SIZE].long()
    slot_mapping[:num_tokens] = block * KV_CACHE_BLOCK_SIZE + position % KV_CACHE_BLOCK_SIZE
    slot_mapping[num_tokens:max_num_tokens] = PAD_ID


def register() -> None:
    from vllm.triton_utils.dispatcher import register_kernels

    register_kernels({SLOT_MAPPING_KERNEL: compute_slot_mapping})
