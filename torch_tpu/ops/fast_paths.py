"""The fused ops PyTorch's modules take on their inference fast paths, as tpu kernels.

In eval mode without gradients, ``nn.TransformerEncoderLayer`` calls
``aten::_transformer_encoder_layer_fwd`` and ``nn.MultiheadAttention`` calls
``aten::_native_multi_head_attention``, which calls ``aten::_masked_softmax``. These ops
have CPU and CUDA kernels only, so without these tpu kernels every such call would copy
the layer's weights and activations to the host and back. Here they are made of tpu ops,
following PyTorch's CPU kernels step by step (aten/src/ATen/native/transformers):

- the q, k, v projection is one matmul for self-attention, or split weights otherwise;
- q is scaled by 1/sqrt(head_dim) after its bias is added;
- a mask is boolean, True where attention is masked out (a float mask is read as
  ``mask != 0``); a row that masks every key is NaN, as on the CPU;
- the averaged weights are the mean over heads.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

_library = torch.library.Library("aten", "IMPL")


def _expand_mask(mask: torch.Tensor, scores: torch.Tensor, mask_type: int | None) -> torch.Tensor:
    """`mask` (True: masked out) broadcast to `scores` (batch, heads, queries, keys)."""
    if mask.dtype != torch.bool:
        mask = mask != 0
    batch, _, queries, keys = scores.shape
    if mask_type == 0:  # attention mask: (queries, keys)
        if tuple(mask.shape) != (queries, keys):
            raise RuntimeError("For mask_type == 0 mask shape should be (L, L)")
        mask = mask.view(1, 1, queries, keys)
    elif mask_type == 1:  # key padding mask: (batch, keys)
        if tuple(mask.shape) != (batch, keys):
            raise RuntimeError("For mask_type == 1 mask shape should be (B, L)")
        mask = mask.view(batch, 1, 1, keys)
    return mask.expand(scores.shape)


def _softmax_masked(scores, mask, dim, mask_type):
    if mask is None:
        return torch.softmax(scores, dim)
    if scores.dim() == 4 and mask_type in (0, 1, 2):
        mask = _expand_mask(mask, scores, mask_type)
    else:
        mask = (mask if mask.dtype == torch.bool else mask != 0).expand(scores.shape)
    return torch.softmax(scores.masked_fill(mask, -math.inf), dim)


def masked_softmax(self, mask, dim=None, mask_type=None):
    """aten::_masked_softmax: softmax over `dim` (default: the last) of the unmasked entries."""
    dim = self.dim() - 1 if dim is None else dim
    return _softmax_masked(self, mask, dim, mask_type)


def native_multi_head_attention(
    query,
    key,
    value,
    embed_dim,
    num_head,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    mask=None,
    need_weights=True,
    average_attn_weights=True,
    mask_type=None,
):
    if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
        raise RuntimeError(
            f"expected 3-D `query`, `key`, `value`, got {query.dim()}-D, {key.dim()}-D, "
            f"{value.dim()}-D tensors"
        )
    if query.shape[2] != embed_dim:
        raise RuntimeError(
            f"passed-in embed_dim {embed_dim} didn't match last dim of query {query.shape[2]}"
        )
    if not query.shape == key.shape == value.shape:
        raise RuntimeError("expected `query`/`key`/`value` shapes to match")
    if embed_dim % num_head != 0:
        raise RuntimeError("`embed_dim` must divide evenly by `num_heads`")
    batch, length, _ = query.shape
    head_dim = embed_dim // num_head
    if query.numel() == 0:
        return torch.empty_like(query), None
    if key is value and query is key:
        qkv = F.linear(query, qkv_weight)
    elif key is value:
        q_weight, kv_weight = qkv_weight.split([embed_dim, 2 * embed_dim])
        qkv = torch.cat([F.linear(query, q_weight), F.linear(key, kv_weight)], 2)
    else:
        q_weight, k_weight, v_weight = qkv_weight.chunk(3)
        qkv = torch.cat(
            [F.linear(query, q_weight), F.linear(key, k_weight), F.linear(value, v_weight)], 2
        )
    qkv = (qkv + qkv_bias).view(batch, length, 3, num_head, head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0] / math.sqrt(head_dim), qkv[1], qkv[2]
    weights = _softmax_masked(q @ k.transpose(-2, -1), mask, -1, mask_type)
    context = (weights @ v).transpose(1, 2).reshape(batch, length, embed_dim)
    out = F.linear(context, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, weights.mean(1) if average_attn_weights else weights


def transformer_encoder_layer_fwd(
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    ffn_bias_1,
    ffn_weight_2,
    ffn_bias_2,
    mask=None,
    mask_type=None,
):
    if src.numel() == 0:
        return src.clone()

    def norm(x, weight, bias):
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    x, _ = native_multi_head_attention(
        x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
        mask, False, True, mask_type,
    )  # fmt: skip
    x = x + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    residual = x
    if norm_first:
        x = norm(x, norm_weight_2, norm_bias_2)
    hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
    hidden = F.gelu(hidden) if use_gelu else F.relu(hidden)
    x = F.linear(hidden, ffn_weight_2, ffn_bias_2) + residual
    if not norm_first:
        x = norm(x, norm_weight_2, norm_bias_2)
    return x


def install() -> None:
    _library.impl("_masked_softmax", masked_softmax, "PrivateUse1")
    _library.impl("_native_multi_head_attention", native_multi_head_attention, "PrivateUse1")
    _library.impl("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd, "PrivateUse1")
