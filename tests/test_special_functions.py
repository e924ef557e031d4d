"""exp2, erfc, atanh, asinh, acosh, sinc, logaddexp, logaddexp2, fmax, fmin, hypot and
copysign run natively (they used to fall back to PyTorch's CPU kernels): over random values
and a grid of zeros, signed zeros, +-1, large and tiny values, infinities and NaN they match
the CPU in value, NaN-ness, infinities and zero signs, in float32, float64 and bfloat16 and
in both eager modes; integers promote (or raise) as on the CPU."""

import pytest
import torch

import torch_tpu

pytestmark = pytest.mark.usefixtures("native")

SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-30, -1e-30, 1e30, -1e30, 8.0, -9.0]
SPECIALS += [27.0, 130.0, -160.0, float("inf"), -float("inf"), float("nan"), 3e38, 1 + 1e-7]
UNARY = [torch.exp2, torch.erfc, torch.atanh, torch.asinh, torch.acosh, torch.sinc]
BINARY = [torch.logaddexp, torch.logaddexp2, torch.fmax, torch.fmin, torch.hypot, torch.copysign]
TOLERANCE = {
    torch.float32: dict(rtol=2e-6, atol=1e-6),
    torch.float64: dict(rtol=1e-13, atol=1e-14),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5),
}


def values(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    special = torch.tensor(SPECIALS)
    return torch.cat(
        [
            torch.randn(2000, generator=g) * 4,
            torch.rand(1000, generator=g) * 2 - 1,
            torch.rand(500, generator=g) * 100 + 1,
            special[torch.randperm(len(special), generator=g)],
        ]
    ).to(dtype)


def assert_matches_cpu(got, expected):
    # Results below float32's normal range are flushed to zero by XLA:CPU: absolute tolerance.
    torch.testing.assert_close(got, expected, equal_nan=True, **TOLERANCE[expected.dtype])
    assert torch.equal(got.isnan(), expected.isnan())
    infinite = expected.isinf()
    assert torch.equal(got[infinite], expected[infinite])
    zeros = expected == 0
    assert torch.equal(got[zeros].signbit(), expected[zeros].signbit())


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("op", UNARY, ids=lambda op: op.__name__)
def test_unary_functions_match_cpu(op, dtype, mode):
    x = values(dtype)
    with torch_tpu.eager_mode(mode):
        got = op(x.to("tpu")).cpu()
    assert_matches_cpu(got, op(x))


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.__name__)
def test_binary_functions_match_cpu(op, dtype, mode):
    x, y = values(dtype, 0), values(dtype, 1)
    with torch_tpu.eager_mode(mode):
        got = op(x.to("tpu"), y.to("tpu")).cpu()
    assert_matches_cpu(got, op(x, y))


def test_integers_promote_or_raise_as_on_cpu():
    a, b = torch.tensor([3, -1, 0, 7, -4]), torch.tensor([-2, 5, 0, 7, -4])
    for op in (torch.fmax, torch.fmin, torch.copysign):
        expected = op(a, b)
        got = op(a.to("tpu"), b.to("tpu"))
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected)
    for op in (torch.exp2, torch.erfc, torch.asinh):
        assert op(a.to("tpu")).dtype == op(a).dtype == torch.float32
    for op in (torch.hypot, torch.logaddexp, torch.logaddexp2):
        with pytest.raises(NotImplementedError):
            op(a, b)
        with pytest.raises(NotImplementedError):
            op(a.to("tpu"), b.to("tpu"))


def test_in_place_out_and_scalar_overloads():
    x, y = values(torch.float32, 2)[:500], values(torch.float32, 3)[:500]
    t = x.to("tpu")
    t.exp2_()
    torch.testing.assert_close(t.cpu(), x.exp2(), equal_nan=True)
    t = x.to("tpu")
    t.hypot_(y.to("tpu"))
    torch.testing.assert_close(t.cpu(), x.hypot(y), equal_nan=True)
    out = torch.empty(500, device="tpu")
    torch.logaddexp(x.to("tpu"), y.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), torch.logaddexp(x, y), equal_nan=True)
    for sign in (-0.0, 0.0, -2, float("nan")):
        assert torch.equal(
            torch.copysign(x.to("tpu"), sign).cpu().signbit(), torch.copysign(x, sign).signbit()
        )
    t = x.to("tpu")
    t.copysign_(y.to("tpu"))
    assert torch.equal(t.cpu().signbit(), torch.copysign(x, y).signbit())


def test_gradients_match_cpu():
    x = (torch.rand(300) * 0.8 + 1.1).requires_grad_()
    y = torch.randn(300).requires_grad_()

    def f(a, b):
        return (
            torch.exp2(b)
            + torch.erfc(b)
            + torch.atanh(a - 1.5)
            + torch.asinh(b)
            + torch.acosh(a)
            + torch.sinc(b)
            + torch.logaddexp(a, b)
            + torch.logaddexp2(a, b)
            + torch.fmax(a, b)
            + torch.hypot(a, b)
            + torch.copysign(a, b)
        ).sum()

    expected = torch.autograd.grad(f(x, y), (x, y))
    xt, yt = (t.detach().to("tpu").requires_grad_() for t in (x, y))
    got = torch.autograd.grad(f(xt, yt), (xt, yt))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_signbit_frac_logit_and_heaviside_match_cpu(dtype):
    x = values(dtype, 4)
    nan_signs = torch.tensor([float("nan"), -float("nan")], dtype=dtype)
    assert torch.equal(torch.signbit(x.to("tpu")).cpu(), torch.signbit(x))
    assert torch.equal(torch.signbit(nan_signs.to("tpu")).cpu(), torch.signbit(nan_signs))
    torch.testing.assert_close(torch.frac(x.to("tpu")).cpu(), torch.frac(x), equal_nan=True)
    # The CPU rounds logit's intermediates to half precision; tpu computes in float32.
    tol = dict(rtol=2e-2, atol=1e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    for eps in (None, 0.05):
        got = torch.logit(x.to("tpu"), eps=eps).cpu()
        torch.testing.assert_close(got, torch.logit(x, eps=eps), equal_nan=True, **tol)
    v = values(dtype, 5)
    assert torch.equal(torch.heaviside(x.to("tpu"), v.to("tpu")).cpu(), torch.heaviside(x, v))
    # values broadcast; in place and out=
    scalar_like = torch.tensor([0.25], dtype=dtype)
    expected = torch.heaviside(x, scalar_like)
    assert torch.equal(torch.heaviside(x.to("tpu"), scalar_like.to("tpu")).cpu(), expected)
    t = x.to("tpu")
    t.heaviside_(scalar_like.to("tpu"))
    assert torch.equal(t.cpu(), expected)
    t = x.to("tpu")
    t.frac_()
    torch.testing.assert_close(t.cpu(), torch.frac(x), equal_nan=True)


def test_signbit_logit_heaviside_on_integers_and_frac_refusing_them():
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.bool):
        x = torch.tensor([-3, 0, 1, 2]).to(dtype)
        assert torch.equal(torch.signbit(x.to("tpu")).cpu(), torch.signbit(x))
        got = torch.logit(x.to("tpu"))
        assert got.dtype == torch.logit(x).dtype
        torch.testing.assert_close(got.cpu(), torch.logit(x), equal_nan=True)
        assert torch.equal(torch.heaviside(x.to("tpu"), x.to("tpu")).cpu(), torch.heaviside(x, x))
        with pytest.raises(NotImplementedError):
            torch.frac(x)
        with pytest.raises(NotImplementedError):
            torch.frac(x.to("tpu"))
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(torch.ones(2, device="tpu"), torch.ones(2, device="tpu").long())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_nextafter_steps_the_dtypes_own_bits_as_on_cpu(dtype):
    grid = [0.0, -0.0, 1.0, -1.0, 3e38, float("inf"), -float("inf"), float("nan"), -2.5, 1e-3]
    x = torch.tensor([a for a in grid for _ in grid] + [0.5, -7.0], dtype=dtype)
    y = torch.tensor([b for _ in grid for b in grid] + [-1.0, -6.0], dtype=dtype)
    expected = torch.nextafter(x, y)
    got = torch.nextafter(x.to("tpu"), y.to("tpu")).cpu()
    numbers = ~expected.isnan()
    assert torch.equal(got.isnan(), expected.isnan())
    assert torch.equal(got[numbers], expected[numbers])  # to the bit, subnormals from 0 included
    assert torch.equal(got[numbers].signbit(), expected[numbers].signbit())


def test_xlog1py_with_tensors_and_scalars_on_either_side():
    x = torch.tensor([0.0, 0.0, 2.0, 1.0, -3.0, 0.5])
    y = torch.tensor([float("nan"), -1.0, 3.0, -2.0, 0.25, float("inf")])
    tx, ty = x.to("tpu"), y.to("tpu")
    xlog1py = torch.special.xlog1py
    for got, expected in (
        (xlog1py(tx, ty), xlog1py(x, y)),
        (xlog1py(2.0, ty), xlog1py(2.0, y)),
        (xlog1py(tx, 3), xlog1py(x, 3)),
        (xlog1py(tx.long(), ty.long()), xlog1py(x.long(), y.long())),
    ):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected, equal_nan=True)
    out = torch.empty(6, device="tpu")
    xlog1py(tx, ty, out=out)
    torch.testing.assert_close(out.cpu(), xlog1py(x, y), equal_nan=True)
