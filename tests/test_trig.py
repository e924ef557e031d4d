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
