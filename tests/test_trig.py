"""sin, cos and tan of large tensors, which on the CPU plugin take torch_tpu's vectorized
polynomial (csrc/hlo/trig.h) instead of XLA:CPU's per-element libm calls: the values,
signed zeros and NaN (polynomial), infinities and inputs beyond the polynomial's range
(libm) match the CPU in every float dtype and eager mode, and so do the gradients."""

import pytest
import torch

import torch_tpu

pytestmark = pytest.mark.usefixtures("native")

MODES = ["strict", "defer_and_fuse"]
LARGE = 4096  # above the polynomial's minimum size


def inputs(dtype, extra=()):
    torch.manual_seed(0)
    x = torch.cat(
        [
            torch.randn(LARGE) * 3,
            torch.linspace(-18000, 18000, LARGE),  # within both polynomials' ranges
            torch.arange(-64, 65) * (torch.pi / 4),  # octant boundaries
            torch.tensor([0.0, -0.0, 1e-30, -1e-30, float("nan")]),
            torch.tensor(list(extra), dtype=torch.float32),
        ]
    )
    return x.to(dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("op", [torch.sin, torch.cos, torch.tan])
def test_large_tensors_match_cpu(op, dtype, mode):
    x = inputs(dtype)
    with torch_tpu.eager_mode(mode):
        got = op(x.to("tpu")).cpu()
    expected = op(x)
    torch.testing.assert_close(got, expected, equal_nan=True)
    zeros = x == 0
    assert torch.equal(got[zeros].signbit(), expected[zeros].signbit()), "signed zeros"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", [torch.sin, torch.cos, torch.tan])
def test_values_beyond_the_polynomial_range_take_the_exact_path(op, mode):
    x = inputs(torch.float32, extra=[float("inf"), -float("inf"), 1e30, -3e5, 123456.78, 2.6e4])
    with torch_tpu.eager_mode(mode):
        got = op(x.to("tpu")).cpu()
    torch.testing.assert_close(got, op(x), equal_nan=True)


@pytest.mark.parametrize("mode", MODES)
def test_in_place_out_and_gradients(mode):
    x = inputs(torch.float32)[:LARGE].clone()
    with torch_tpu.eager_mode(mode):
        t = x.to("tpu").requires_grad_()
        (torch.sin(t) * torch.cos(t)).sum().backward()
        y = x.to("tpu")
        y.sin_()
        out = torch.empty(LARGE, device="tpu")
        torch.cos(x.to("tpu"), out=out)
        grad, y, out = t.grad.cpu(), y.cpu(), out.cpu()
    c = x.clone().requires_grad_()
    (torch.sin(c) * torch.cos(c)).sum().backward()
    torch.testing.assert_close(grad, c.grad)
    torch.testing.assert_close(y, x.sin())
    torch.testing.assert_close(out, x.cos())


# atan, asin, acos and atan2 of large float32 tensors: a polynomial atan2 (csrc/hlo/trig.h)
# instead of libm's atan2f per element (30-40x PyTorch's time).
INVERSE_SPECIALS = [0.0, -0.0, 1.0, -1.0, 1.5, -2.0, float("inf"), -float("inf"), float("nan")]


def inverse_inputs(dtype):
    torch.manual_seed(1)
    x = torch.cat(
        [
            torch.rand(LARGE) * 2 - 1,  # asin's and acos's domain
            torch.randn(LARGE) * 5,
            torch.linspace(-1, 1, 2001),
            torch.tensor([1e-30, -1e-30, 1e30, -1e30, 0.41421356, 2.4142135, 0.99999994]),
            torch.tensor(INVERSE_SPECIALS),
        ]
    )
    return x.to(dtype)


def assert_matches_cpu(got, expected):
    torch.testing.assert_close(got, expected, equal_nan=True)
    exact = ~expected.isnan()
    # Signed zeros and the infinities' limits are exact (pi/2 is pi/2 to the float's rounding).
    zeros = exact & (expected == 0)
    assert torch.equal(got[zeros].signbit(), expected[zeros].signbit()), "signed zeros"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("op", [torch.atan, torch.asin, torch.acos])
def test_inverse_functions_of_large_tensors_match_cpu(op, dtype, mode):
    x = inverse_inputs(dtype)
    with torch_tpu.eager_mode(mode):
        got = op(x.to("tpu")).cpu()
    assert_matches_cpu(got, op(x))


@pytest.mark.parametrize("mode", MODES)
def test_atan2_with_zeros_infinities_and_nan_in_every_quadrant_matches_cpu(mode):
    torch.manual_seed(2)
    specials = torch.tensor(INVERSE_SPECIALS + [1e-30, -1e30])
    y = torch.cat([torch.randn(LARGE) * 3, specials.repeat_interleave(len(specials))])
    x = torch.cat([torch.randn(LARGE) * 3, specials.repeat(len(specials))])
    with torch_tpu.eager_mode(mode):
        got = torch.atan2(y.to("tpu"), x.to("tpu")).cpu()
    assert_matches_cpu(got, torch.atan2(y, x))


def test_the_polynomial_replaces_libm_for_large_float32_only(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    with torch_tpu.eager_mode("strict"):
        torch.atan(torch.rand(LARGE + 7, device="tpu"))  # sizes of this test alone
        torch.atan(torch.rand(37, device="tpu"))
        torch.atan(torch.rand(LARGE + 7, device="tpu", dtype=torch.float64))
    texts = [p.read_text() for p in sorted(tmp_path.glob("*atan*.mlir"))]
    assert [("stablehlo.atan2" in t) for t in texts] == [False, True, True]


@pytest.mark.parametrize("mode", MODES)
def test_inverse_functions_gradients_and_in_place(mode):
    x = (torch.rand(LARGE) * 1.8 - 0.9).requires_grad_()
    (torch.atan(x) + torch.asin(x) * torch.acos(x)).sum().backward()
    with torch_tpu.eager_mode(mode):
        t = x.detach().to("tpu").requires_grad_()
        (torch.atan(t) + torch.asin(t) * torch.acos(t)).sum().backward()
        y = x.detach().to("tpu")
        y.atan_()
        grad, y = t.grad.cpu(), y.cpu()
    torch.testing.assert_close(grad, x.grad)
    torch.testing.assert_close(y, x.detach().atan())
