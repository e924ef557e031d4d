"""The 8-bit floats (float8_e4m3fn, float8_e5m2 and their fnuz variants) and complex32 on tpu,
each against PyTorch on the CPU. The 8-bit floats are stored as their bytes and computed in
float32; complex32 (no PJRT type) is stored as float16 pairs and computed in complex64. The
conversions into an 8-bit float must round exactly as PyTorch's do (once, to nearest even;
e4m3fn saturating, the fnuz types without a negative zero), to the bit."""

import warnings

import pytest
import torch

import torch_tpu

TPU = "tpu"
FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]
SOURCES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")


def wide_range_values() -> torch.Tensor:
    """Values at every scale an 8-bit float meets: subnormals, ties, the largest finite
    numbers and past them, signed zeros, infinities and NaN."""
    g = torch.Generator().manual_seed(0)
    scales = [1e-7, 1e-5, 1e-3, 0.1, 1.0, 30.0, 300.0, 3e4, 1e6]
    random = torch.cat([torch.randn(500, generator=g, dtype=torch.float64) * s for s in scales])
    # Exact midpoints between neighbours of each format (ties go to even).
    ties = torch.tensor([5.25, 0.5625, 2.5, 3.5, 0.01171875, 448.0 + 16, 240.0 + 8, 57344.0 + 4096])
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 448.0, 449.0,
                            480.0, 240.0, 57344.0, 61440.0, 2**-9, 2**-10, 2**-16, 2**-17, 2**-18])  # fmt: skip
    return torch.cat([random, ties.double(), special.double(), -special.double()])


def same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype
    a, e = actual.cpu().view(torch.uint8), expected.view(torch.uint8)
    bad = (a != e).nonzero().flatten()
    assert bad.numel() == 0, f"{bad.numel()} bytes differ, first at {bad[:5].tolist()}"


@pytest.mark.parametrize("source", SOURCES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_conversion_into_float8_rounds_as_the_cpu(dtype, source):
    x = wide_range_values().to(source)
    same_bits(x.to(TPU).to(dtype), x.to(dtype))
    # A strided source and a strided destination take the same path.
    same_bits(x.to(TPU)[::3].to(dtype), x[::3].to(dtype))
    out = torch.zeros(x.numel(), 2, dtype=dtype, device=TPU)
    out[:, 1] = x.to(TPU)
    expected = torch.zeros(x.numel(), 2, dtype=dtype)
    expected[:, 1] = x
    same_bits(out, expected)


def every_value(dtype: torch.dtype) -> torch.Tensor:
    """Every byte as `dtype`, less e5m2's NaNs with other payloads than 0x7F/0xFF: values
    are computed in float32, so a NaN comes back as its type's NaN with its sign."""
    every_byte = torch.arange(256, dtype=torch.uint8)
    if dtype == torch.float8_e5m2:
        every_byte = every_byte[~torch.isin(every_byte, torch.tensor([0x7D, 0x7E, 0xFD, 0xFE]))]
    return every_byte.view(dtype)


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_widens_and_moves_exactly(dtype):
    every_byte = every_value(dtype)
    t = every_byte.to(TPU)
    same_bits(t, every_byte)
    for wide in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        torch.testing.assert_close(t.to(wide).cpu(), every_byte.to(wide), equal_nan=True,
                                   rtol=0, atol=0)  # fmt: skip
    for other in FLOAT8:
        same_bits(t.to(other), every_byte.to(other))
    finite = every_byte[every_byte.float().isfinite()]
    assert torch.equal(finite.to(TPU).to(torch.int32).cpu(), finite.to(torch.int32))
    m = every_byte[:240].reshape(16, 15)
    same_bits(m.to(TPU).t().contiguous(), m.t().contiguous())
    same_bits(torch.cat([m.to(TPU), m.to(TPU)[:3]]), torch.cat([m, m[:3]]))
    index = torch.tensor([3, 0, 14, 3])
    same_bits(m.to(TPU)[index.to(TPU)], m[index])
    same_bits(m.to(TPU).index_select(1, index.to(TPU)), m.index_select(1, index))
    assert torch.equal((t == t).cpu(), every_byte == every_byte)
    assert torch.equal(t.isnan().cpu(), every_byte.isnan())
    # By value: the CPU's float8 abs keeps the sign of -0 and of NaN (x < 0 ? -x : x).
    torch.testing.assert_close(t.abs().cpu().float(), every_byte.abs().float(), equal_nan=True,
                               rtol=0, atol=0)  # fmt: skip
    same_bits(t.view(torch.uint8), every_byte.view(torch.uint8))


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_factories_and_fill(dtype):
    for value in (0, 1, 1.5, -3.3, 1000.0, 1e-6, float("inf")):
        try:
            expected = torch.full((3, 2), value, dtype=dtype)
        except RuntimeError as error:  # a value the dtype cannot hold: the same error
            with pytest.raises(RuntimeError, match=str(error)):
                torch.full((3, 2), value, dtype=dtype, device=TPU)
            continue
        same_bits(torch.full((3, 2), value, dtype=dtype, device=TPU), expected)
        t = torch.empty(4, dtype=dtype, device=TPU).fill_(value)
        same_bits(t, torch.empty(4, dtype=dtype).fill_(value))
    same_bits(torch.zeros(5, dtype=dtype, device=TPU), torch.zeros(5, dtype=dtype))
    same_bits(torch.ones(2, 3, dtype=dtype, device=TPU), torch.ones(2, 3, dtype=dtype))
    same_bits(torch.eye(3, dtype=dtype, device=TPU), torch.eye(3, dtype=dtype))
    x = torch.tensor([[1, 2], [3, 4]], dtype=dtype)
    same_bits(torch.tensor([[1, 2], [3, 4]], dtype=dtype, device=TPU), x)
    same_bits(torch.stack([x.to(TPU), x.to(TPU)]), torch.stack([x, x]))


def test_float8_in_a_scaled_cast_round_trip():
    """What float8 training does: scale, cast to e4m3fn, cast back, unscale."""
    g = torch.Generator().manual_seed(1)
    w = torch.randn(64, 64, generator=g)

    def round_trip(w):
        scale = 448.0 / w.abs().max()
        return (w * scale).to(torch.float8_e4m3fn).to(torch.float32) / scale

    torch.testing.assert_close(round_trip(w.to(TPU)).cpu(), round_trip(w), rtol=0, atol=0)


def complex32_values() -> torch.Tensor:
    g = torch.Generator().manual_seed(2)
    return torch.complex(torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g) * 100).to(
        torch.chalf
    )


def same_complex(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    a, e = actual.cpu(), expected
    if e.dtype == torch.chalf:  # the CPU compares complex32 through complex64
        a, e = torch.view_as_real(a).float(), torch.view_as_real(e).float()
    torch.testing.assert_close(a, e, equal_nan=True, rtol=0, atol=0)


COMPLEX32_OPS = {
    "copy": lambda x: x.clone(),
    "transpose_contiguous": lambda x: x.t().contiguous(),
    "column": lambda x: x[:, 1].clone(),
    "flip": lambda x: x.flip(0),
    "cat": lambda x: torch.cat([x, x[:2]]),
    "index": lambda x: x[torch.tensor([4, 0, 4], device=x.device)],
    "masked_fill": lambda x: x.masked_fill(x.real > 0, 2 - 1j),
    "where": lambda x: torch.where(x.real > 0, x, torch.zeros_like(x)),
    "mul": lambda x: x * x,
    "add": lambda x: x + x,
    "neg": lambda x: -x,
    "conj": lambda x: x.conj().resolve_conj(),
    "abs": lambda x: x.abs(),
    "isfinite": lambda x: x.isfinite(),
    "eq": lambda x: x == x[0],
    "nonzero": lambda x: x.nonzero(),
    "real_imag": lambda x: torch.stack([x.real, x.imag]),
    "view_as_real": lambda x: torch.view_as_real(x).clone(),
    "view_float16": lambda x: x.view(torch.float16).clone(),
    "to_complex64": lambda x: x.to(torch.complex64),
    "from_int": lambda x: torch.arange(6, device=x.device, dtype=torch.int32).chalf(),
    "fill_": lambda x: x.clone().fill_(3.5 + 1j),
    "zero_": lambda x: x.clone().zero_(),
    "full": lambda x: torch.full((2, 3), 2.5 - 1j, dtype=torch.chalf, device=x.device),
    "ones": lambda x: torch.ones(2, 3, dtype=torch.chalf, device=x.device),
}


@pytest.mark.parametrize("name", list(COMPLEX32_OPS))
def test_complex32_op_matches_the_cpu(name):
    op = COMPLEX32_OPS[name]
    x = complex32_values()
    same_complex(op(x.to(TPU)), op(x))


@pytest.mark.parametrize("mode", ["defer_and_fuse", "debug"])
def test_narrow_dtypes_in_the_other_eager_modes(mode):
    x = complex32_values()
    w = wide_range_values().float()
    with torch_tpu.eager_mode(mode):
        t = x.to(TPU)
        t[1:3] = t[4:6] * 2
        narrowed = (w.to(TPU) * 0.5).to(torch.float8_e4m3fn)
        widened = narrowed.to(torch.bfloat16) + 1
        got = [t.cpu(), narrowed.cpu(), widened.cpu()]
    x[1:3] = x[4:6] * 2
    same_complex(got[0], x)
    same_bits(got[1], (w * 0.5).to(torch.float8_e4m3fn))
    expected = (w * 0.5).to(torch.float8_e4m3fn).to(torch.bfloat16) + 1
    torch.testing.assert_close(got[2], expected, equal_nan=True, rtol=0, atol=0)


def test_complex32_writes_through_views():
    x = complex32_values()
    t = x.to(TPU)
    t[1:4, 2] = 7 + 1j
    t[0] = t[5]
    x[1:4, 2] = 7 + 1j
    x[0] = x[5]
    same_complex(t, x)
    # A float16 view of the same storage sees the written pairs.
    same_complex(t.view(torch.float16), x.view(torch.float16))
    # Widening from complex64 rounds each part to float16 once.
    wide = torch.complex(torch.tensor([1 / 3, 70000.0]), torch.tensor([1e-8, -2.0 / 3]))
    same_complex(wide.to(TPU).to(torch.chalf), wide.to(torch.chalf))


def test_unsupported_dtype_still_raises_naming_it():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match="does not support dtype Float8_e8m0fnu"):
            torch.zeros(2, dtype=torch.float8_e8m0fnu, device=TPU).cpu()
