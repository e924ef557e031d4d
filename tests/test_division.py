"""Rounding division on tpu against the CPU: torch.div(..., rounding_mode="floor"|"trunc")
and floor_divide (`//`), bit for bit, including signed zeros, infinities, division by zero,
negative integers and the half-precision kernels' rounding of each intermediate; integer
floor/trunc division, remainder and fmod by zero raise the CPU's RuntimeError in every mode."""

import pytest
import torch

import torch_tpu

TPU = "tpu"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int64, torch.int32, torch.int8, torch.uint8]
INF, NAN = float("inf"), float("nan")
# numerator, denominator pairs: signs, exact and inexact quotients, zeros and signed zeros,
# infinities and NaN
SPECIAL = [
    (5.0, 2.0), (-5.0, 2.0), (7.5, -2.0), (-7.5, -2.0), (0.0, 3.0), (-0.0, 3.0), (0.0, -3.0),
    (1.0, 0.0), (-1.0, 0.0), (0.0, 0.0), (INF, 2.0), (-INF, 3.0), (NAN, 1.0), (3.0, INF),
    (-2.0, -INF), (-3.0, INF), (1e30, 3.0), (0.3, 0.1), (1.0, 3.0), (-1.0, 3.0),
]  # fmt: skip


# Every test fails if anything falls back to the CPU (the `native` fixture, conftest.py).
pytestmark = pytest.mark.usefixtures("native")


def assert_bitwise_equal(actual, expected):
    """Same dtype and shape; same values, NaN where NaN, and the same sign on zeros."""
    assert actual.device.type == TPU
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape)
    actual = actual.cpu()
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    if expected.is_floating_point():
        numbers = ~expected.isnan()
        assert torch.equal(actual[numbers].signbit(), expected[numbers].signbit())


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_special_values(dtype, mode):
    x = torch.tensor([a for a, _ in SPECIAL], dtype=dtype)
    y = torch.tensor([b for _, b in SPECIAL], dtype=dtype)
    expected = torch.div(x, y, rounding_mode=mode)
    assert_bitwise_equal(torch.div(x.to(TPU), y.to(TPU), rounding_mode=mode), expected)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_random_floats(dtype, mode):
    # large quotients in bfloat16/float16 catch a kernel that rounds only once
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(2000, generator=gen) * 20).to(dtype)
    y = torch.randn(2000, generator=gen).to(dtype)
    expected = torch.div(x, y, rounding_mode=mode)
    assert_bitwise_equal(torch.div(x.to(TPU), y.to(TPU), rounding_mode=mode), expected)
    if mode == "floor":
        assert_bitwise_equal(torch.floor_divide(x.to(TPU), y.to(TPU)), expected)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integers(dtype):
    gen = torch.Generator().manual_seed(1)
    low = 0 if dtype == torch.uint8 else -50
    x = torch.randint(low, 50, (300,), generator=gen, dtype=dtype)
    y = torch.randint(low, 50, (300,), generator=gen, dtype=dtype)
    y[y == 0] = 7  # the CPU raises ZeroDivisionError for integers
    tx, ty = x.to(TPU), y.to(TPU)
    for mode in ("floor", "trunc"):
        assert_bitwise_equal(
            torch.div(tx, ty, rounding_mode=mode), torch.div(x, y, rounding_mode=mode)
        )
    assert_bitwise_equal(tx // ty, x // y)
    assert_bitwise_equal(tx // 3, x // 3)
    assert_bitwise_equal(torch.div(tx, ty), torch.div(x, y))  # rounding_mode=None: true division


def test_scalars_promotion_broadcast_in_place_and_out():
    x = torch.tensor([[7, -7, 8], [-9, 0, 5]])
    y = torch.tensor([2, -2, 3])
    tx, ty = x.to(TPU), y.to(TPU)
    assert_bitwise_equal(
        torch.div(tx, 2.0, rounding_mode="floor"), torch.div(x, 2.0, rounding_mode="floor")
    )
    assert_bitwise_equal(
        torch.div(tx, -2, rounding_mode="trunc"), torch.div(x, -2, rounding_mode="trunc")
    )
    assert_bitwise_equal(
        torch.div(tx, ty.double(), rounding_mode="floor"),
        torch.div(x, y.double(), rounding_mode="floor"),
    )
    assert_bitwise_equal(5 // ty, 5 // y)
    flags = torch.tensor([True, False])  # bool with an int scalar promotes to int64
    assert_bitwise_equal(
        torch.div(flags.to(TPU), 2, rounding_mode="trunc"),
        torch.div(flags, 2, rounding_mode="trunc"),
    )
    in_place = tx.clone()
    in_place.floor_divide_(ty)
    assert_bitwise_equal(in_place, x // y)
    in_place.div_(torch.tensor(2), rounding_mode="trunc")  # a CPU scalar tensor operand
    assert_bitwise_equal(in_place, torch.div(x // y, 2, rounding_mode="trunc"))
    out = torch.empty(0, device=TPU)
    result = torch.div(tx.float(), ty, rounding_mode="floor", out=out)
    assert result is out
    assert_bitwise_equal(out, torch.div(x.float(), y, rounding_mode="floor"))
    out = torch.empty(0, dtype=torch.long, device=TPU)
    torch.floor_divide(tx, ty, out=out)
    assert_bitwise_equal(out, x // y)


@pytest.mark.parametrize(
    "fn",
    [
        lambda d: torch.floor_divide(
            torch.tensor([True], device=d), torch.tensor([True], device=d)
        ),
        lambda d: torch.div(torch.tensor([True], device=d), True, rounding_mode="trunc"),
        lambda d: torch.div(torch.tensor([1.0], device=d), 2, rounding_mode="round"),
        lambda d: torch.tensor([1, 2], device=d).div_(2.5, rounding_mode="floor"),
        lambda d: torch.zeros(3, device=d).floor_divide_(torch.ones(2, 3, device=d)),
    ],
    ids=["bool", "bool-trunc", "bad-mode", "int-in-place-float", "in-place-grows"],
)
def test_errors_match_cpu(fn):
    with pytest.raises(Exception) as cpu_error:
        fn("cpu")
    with pytest.raises(cpu_error.type):
        fn(TPU)


INTEGER_DIVISIONS = {
    "floor_divide": lambda x, y: x // y,
    "div-floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "div-trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "remainder": lambda x, y: x % y,
    "fmod": torch.fmod,
    "floor_divide_": lambda x, y: x.clone().floor_divide_(y),
}


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
@pytest.mark.parametrize("op", INTEGER_DIVISIONS.values(), ids=INTEGER_DIVISIONS.keys())
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_division_by_zero_raises_as_on_cpu(op, dtype, mode):
    x = torch.tensor([7, 8, 9], dtype=dtype)
    divisors = [
        torch.tensor([1, 0, 2], dtype=dtype),  # a tensor with one zero
        torch.tensor(0, dtype=dtype),  # a 0-d tensor, on tpu and on the CPU
        0,  # a Python number
    ]
    for y in divisors:
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op(x, y)
        on_tpu = [y] if not isinstance(y, torch.Tensor) else [y.to(TPU)] + [y] * (y.dim() == 0)
        for y_tpu in on_tpu:
            with torch_tpu.eager_mode(mode):
                with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                    op(x.to(TPU), y_tpu).cpu()  # raised at the op, or when the graph runs
    # nonzero divisors and empty results do not raise; float division by zero is inf/NaN
    with torch_tpu.eager_mode(mode):
        assert_bitwise_equal(
            op(x.to(TPU), torch.tensor([2, 3, 4], dtype=dtype, device=TPU)),
            op(x, torch.tensor([2, 3, 4], dtype=dtype)),
        )
        empty = torch.empty(0, dtype=dtype)
        assert_bitwise_equal(
            op(empty.to(TPU), torch.zeros(0, dtype=dtype, device=TPU)),
            op(empty, torch.zeros(0, dtype=dtype)),
        )
        if dtype != torch.uint8:
            xf = x.float()
            assert_bitwise_equal(op(xf.to(TPU), torch.zeros(3, device=TPU)), op(xf, torch.zeros(3)))
