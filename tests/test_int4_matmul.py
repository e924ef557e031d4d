"""int4 weight-only products on tpu against the CPU's own int4 kernels
(``_convert_weight_to_int4pack_for_cpu`` / ``_weight_int4pack_mm_for_cpu``), which compute
the same dequantization from the same quantized values."""

import pytest
import torch
from torch.testing._internal.common_quantization import _group_quantize_tensor

import torch_tpu  # noqa: F401


def quantized(k, n, group, seed=0):
    torch.manual_seed(seed)
    weight = torch.rand(k, n, dtype=torch.bfloat16)
    values, scales_and_zeros = _group_quantize_tensor(weight, n_bit=4, q_group_size=group)
    return values, scales_and_zeros  # int32 [n, k] 0..15 on the CPU; [k / group, n, 2]


@pytest.mark.parametrize("m,k,n,group,tiles", [(32, 64, 48, 32, 2), (5, 256, 64, 64, 4),
                                               (1, 512, 16, 128, 8)])  # fmt: skip
def test_products_equal_the_cpus_int4_kernel(m, k, n, group, tiles):
    values, scales_and_zeros = quantized(k, n, group)
    x = torch.rand(m, k, dtype=torch.bfloat16)
    on_cpu = torch._weight_int4pack_mm_for_cpu(
        x, torch._convert_weight_to_int4pack_for_cpu(values, tiles), group, scales_and_zeros
    )
    as_bytes = (values[:, ::2] << 4 | values[:, 1::2]).to(torch.uint8)  # what CUDA takes
    packed = torch._convert_weight_to_int4pack(as_bytes.to("tpu"), tiles)
    assert packed.dtype == torch.int32
    assert packed.shape == (n // 8, k // (tiles * 16), 32, tiles // 2)
    got = torch._weight_int4pack_mm(x.to("tpu"), packed, group, scales_and_zeros.to("tpu"))
    assert got.dtype == torch.bfloat16 and got.shape == (m, n)
    torch.testing.assert_close(got.cpu().float(), on_cpu.float(), rtol=2e-2, atol=2e-2)


def test_bad_arguments_are_refused_with_what_is_wrong():
    values, scales_and_zeros = quantized(64, 16, 32)
    as_bytes = (values[:, ::2] << 4 | values[:, 1::2]).to(torch.uint8).to("tpu")
    with pytest.raises(RuntimeError, match="innerKTiles must be 2, 4 or 8, got 3"):
        torch._convert_weight_to_int4pack(as_bytes, 3)
    with pytest.raises(RuntimeError, match="expected the weight as uint8 bytes"):
        torch._convert_weight_to_int4pack(as_bytes.to(torch.int32), 2)
    packed = torch._convert_weight_to_int4pack(as_bytes, 2)
    x = torch.rand(4, 64, dtype=torch.bfloat16, device="tpu")
    with pytest.raises(RuntimeError, match="the input has k = 32 features"):
        torch._weight_int4pack_mm(x[:, :32], packed, 32, scales_and_zeros.to("tpu"))
    with pytest.raises(RuntimeError, match=r"expected qScaleAndZeros of shape \(2, 16, 2\)"):
        torch._weight_int4pack_mm(x, packed, 32, scales_and_zeros[:1].to("tpu"))
