"""log1p of large float32 tensors on the CPU plugin, and softplus and the binary-cross-entropy
losses built on it: torch_tpu's vectorizable formula (csrc/hlo/log1p.h) instead of XLA:CPU's
per-element libm call. Values (within a few ULP), -1, values below -1, infinities, NaN and
signed zeros match the CPU in every mode, and so do the gradients."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

pytestmark = pytest.mark.usefixtures("native")

MODES = ["strict", "defer_and_fuse"]
LARGE = 4096  # above the formula's minimum size


def inputs():
    torch.manual_seed(0)
    return torch.cat(
        [
            torch.randn(LARGE) * 3,
            torch.rand(LARGE) * 2 - 1,
            (torch.rand(LARGE) - 0.5) * 1e-5,  # where 1 + x rounds: the formula's hard case
            torch.exp(torch.randn(LARGE) * 20),
            torch.tensor([0.0, -0.0, -1.0, -1.5, 1e-30, -1e-30, 3e38, -0.99999994]),
            torch.tensor([float("inf"), -float("inf"), float("nan"), 5.9604645e-08]),
        ]
    )


def ulp_error(got, x):
    exact = torch.log1p(x.double())
    rounded = exact.float()
    spacing = torch.nextafter(rounded.abs(), torch.tensor(float("inf"))) - rounded.abs()
    finite = torch.isfinite(rounded)
    return ((got.double() - exact).abs() / spacing.double())[finite].max().item()


@pytest.mark.parametrize("mode", MODES)
def test_large_float32_tensors_within_three_ulp_with_the_cpus_special_values(mode):
    x = inputs()
    with torch_tpu.eager_mode(mode):
        got = torch.log1p(x.to("tpu")).cpu()
    expected = torch.log1p(x)
    torch.testing.assert_close(got, expected, equal_nan=True)
    assert ulp_error(got, x) <= 3
    special = ~torch.isfinite(expected) | (expected == 0)
    assert torch.equal(got[special].isnan(), expected[special].isnan())
    kept = special & ~expected.isnan()
    assert torch.equal(got[kept], expected[kept])
    assert torch.equal(got[kept].signbit(), expected[kept].signbit())


@pytest.mark.parametrize("mode", MODES)
def test_softplus_and_binary_cross_entropy_match_cpu_with_gradients(mode):
    torch.manual_seed(1)
    x = (torch.randn(64, 96) * 4).requires_grad_()
    target = torch.rand(64, 96)
    weight = torch.rand(96)

    def losses(t, y, w):
        return (
            F.softplus(t).sum()
            + F.softplus(t, beta=2.0, threshold=5.0).mean()
            + F.binary_cross_entropy_with_logits(t, y, weight=w, pos_weight=w * 2)
            + F.binary_cross_entropy(torch.sigmoid(t), y)
        )

    expected = losses(x, target, weight)
    (expected_grad,) = torch.autograd.grad(expected, x)
    with torch_tpu.eager_mode(mode):
        t = x.detach().to("tpu").requires_grad_()
        got = losses(t, target.to("tpu"), weight.to("tpu"))
        (grad,) = torch.autograd.grad(got, t)
        got, grad = got.cpu(), grad.cpu()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(grad, expected_grad)


def test_the_formula_replaces_libm_for_large_float32_only(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    with torch_tpu.eager_mode("strict"):
        torch.log1p(torch.rand(LARGE + 11, device="tpu"))  # sizes of this test alone
        torch.log1p(torch.rand(41, device="tpu"))
        torch.log1p(torch.rand(LARGE + 11, device="tpu", dtype=torch.float64))
    texts = [p.read_text() for p in sorted(tmp_path.glob("*log1p*.mlir"))]
    assert [("stablehlo.log_plus_one" in t) for t in texts] == [False, True, True]
    assert "stablehlo.optimization_barrier" in texts[0]  # 1 + x is not simplified away
