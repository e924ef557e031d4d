"""Weight-only int4 matrix products: ``torch._convert_weight_to_int4pack`` and
``torch._weight_int4pack_mm``, the pair that int4 weight-only quantization (gpt-fast,
torchao's int4 layouts) calls on accelerators. ATen has them for CUDA only.

A weight is quantized per group of ``q_group_size`` input features to 4-bit values q in
0..15, with a scale and a zero per group and output feature: w = (q - 8) * scale + zero
(``torch.testing._internal.common_quantization._group_quantize_tensor`` makes them). The
caller hands the values as bytes, ``uint8 [n, k / 2]``, two values a byte, the first in
the high nibble.

The packed tensor has CUDA's shape and dtype, ``int32 [n / 8, k / (inner_k_tiles * 16),
32, inner_k_tiles / 2]``, so code that checks them runs unchanged, but its contents are
those bytes as they are, not CUDA's tile order: a weight packed on a GPU must be packed
again here from its bytes. The product unpacks the nibbles, dequantizes in float32 and
multiplies in the activation's dtype.
"""

from __future__ import annotations

import torch

_library = torch.library.Library("aten", "IMPL")


def convert_weight_to_int4pack(weight: torch.Tensor, inner_k_tiles: int) -> torch.Tensor:
    if weight.dim() != 2:
        raise RuntimeError(
            f"_convert_weight_to_int4pack: expected a 2-D weight, got {weight.dim()}-D"
        )
    if weight.dtype != torch.uint8:
        raise RuntimeError(
            "_convert_weight_to_int4pack: expected the weight as uint8 bytes (two 4-bit "
            f"values each), got {weight.dtype}"
        )
    if inner_k_tiles not in (2, 4, 8):
        raise RuntimeError(
            f"_convert_weight_to_int4pack: innerKTiles must be 2, 4 or 8, got {inner_k_tiles}"
        )
    n, k = weight.size(0), weight.size(1) * 2
    if n % 8 != 0:
        raise RuntimeError(f"_convert_weight_to_int4pack: n ({n}) must be a multiple of 8")
    if k % (inner_k_tiles * 16) != 0:
        raise RuntimeError(
            f"_convert_weight_to_int4pack: k ({k}) must be a multiple of innerKTiles * 16 "
            f"({inner_k_tiles * 16})"
        )
    packed = weight.contiguous().view(torch.int32)
    return packed.reshape(n // 8, k // (inner_k_tiles * 16), 32, inner_k_tiles // 2)


def weight_int4pack_mm(
    x: torch.Tensor, packed: torch.Tensor, q_group_size: int, scales_and_zeros: torch.Tensor
) -> torch.Tensor:
    if x.dim() != 2:
        raise RuntimeError(f"_weight_int4pack_mm: expected a 2-D input, got {x.dim()}-D")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise RuntimeError(f"_weight_int4pack_mm: expected a floating-point input, got {x.dtype}")
    if packed.dtype != torch.int32 or packed.dim() != 4:
        raise RuntimeError(
            "_weight_int4pack_mm: expected the weight from _convert_weight_to_int4pack "
            f"(int32, 4-D), got {packed.dtype}, {packed.dim()}-D"
        )
    n, k = packed.size(0) * 8, x.size(1)
    if packed.numel() * 8 != n * k:
        raise RuntimeError(
            f"_weight_int4pack_mm: the input has k = {k} features, the packed weight holds "
            f"{packed.numel() * 8 // n}"
        )
    if q_group_size not in (32, 64, 128, 256) or k % q_group_size != 0:
        raise RuntimeError(
            f"_weight_int4pack_mm: q_group_size must be 32, 64, 128 or 256 and divide k = "
            f"{k}, got {q_group_size}"
        )
    groups = k // q_group_size
    if tuple(scales_and_zeros.shape) != (groups, n, 2):
        raise RuntimeError(
            f"_weight_int4pack_mm: expected qScaleAndZeros of shape ({groups}, {n}, 2), got "
            f"{tuple(scales_and_zeros.shape)}"
        )
    pairs = packed.reshape(-1).view(torch.uint8).reshape(n, k // 2).to(torch.int32)
    q = torch.stack((pairs >> 4, pairs & 15), dim=-1).reshape(n, groups, q_group_size)
    scales = scales_and_zeros[..., 0].t().float().unsqueeze(-1)  # [n, groups, 1]
    zeros = scales_and_zeros[..., 1].t().float().unsqueeze(-1)
    weight = ((q.float() - 8) * scales + zeros).reshape(n, k)
    return torch.mm(x, weight.t().to(x.dtype))


def install() -> None:
    _library.impl("_convert_weight_to_int4pack", convert_weight_to_int4pack, "PrivateUse1")
    _library.impl("_weight_int4pack_mm", weight_int4pack_mm, "PrivateUse1")
