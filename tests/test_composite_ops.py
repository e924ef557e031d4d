"""dot, xlogy, mish and glu (reached by LBFGS, KLDivLoss, nn.Mish, nn.GLU) run as tpu
kernels with no CPU fallback: the modules match the CPU, forward and backward, and bad
input raises the CPU's error. (OpInfo covers the ops' values and gradients.)"""

import copy

import pytest
import torch

import torch_tpu  # noqa: F401


@pytest.mark.parametrize(
    "module",
    [
        torch.nn.Mish(),
        torch.nn.GLU(dim=1),
        torch.nn.KLDivLoss(reduction="batchmean"),
        torch.nn.PReLU(4),
        torch.nn.Hardshrink(0.3),
        torch.nn.Softshrink(0.3),
        torch.nn.Threshold(0.1, -2.0),
    ],
    ids=["Mish", "GLU", "KLDivLoss", "PReLU", "Hardshrink", "Softshrink", "Threshold"],
)
def test_modules_match_cpu(module, native):
    torch.manual_seed(0)
    x = torch.randn(4, 6, requires_grad=True) if not isinstance(module, torch.nn.PReLU) else (
        torch.randn(2, 4, 3, requires_grad=True))  # fmt: skip
    inputs = [x.log_softmax(1).detach().requires_grad_(), torch.rand(4, 6)] if isinstance(
        module, torch.nn.KLDivLoss) else [x]  # fmt: skip
    if isinstance(module, torch.nn.KLDivLoss):
        inputs[1][0, 0] = 0.0  # a zero target: xlogy(0, 0) is 0
    want = module(*inputs)
    on_tpu = [t.detach().to("tpu").requires_grad_(t.requires_grad) for t in inputs]
    module_on_tpu = copy.deepcopy(module).to("tpu")
    got = module_on_tpu(*on_tpu)
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)
    want.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(on_tpu[0].grad.cpu(), inputs[0].grad, rtol=1e-5, atol=1e-6)
    for ours, theirs in zip(module_on_tpu.parameters(), module.parameters()):
        torch.testing.assert_close(ours.grad.cpu(), theirs.grad, rtol=1e-5, atol=1e-6)


def test_xlogy_special_values(native):
    x = torch.tensor([0.0, 0.0, 2.0, 0.0, 3.0])
    y = torch.tensor([0.0, float("nan"), 0.0, 5.0, -1.0])
    torch.testing.assert_close(
        torch.xlogy(x.to("tpu"), y.to("tpu")).cpu(), torch.xlogy(x, y), equal_nan=True
    )
    ints = torch.tensor([0, 1, 2])
    assert torch.xlogy(ints.to("tpu"), ints.to("tpu")).dtype == torch.xlogy(ints, ints).dtype


def test_lbfgs_step_runs_natively(native):
    torch.manual_seed(0)
    start = torch.randn(3)
    weights = {d: start.detach().to(d, copy=True).requires_grad_() for d in ("cpu", "tpu")}
    for device, w in weights.items():
        optimizer = torch.optim.LBFGS([w], lr=0.5, max_iter=5)
        target = torch.tensor([1.0, -2.0, 3.0], device=device)

        def closure():
            optimizer.zero_grad()
            loss = (w - target).square().sum()
            loss.backward()
            return loss

        optimizer.step(closure)
    torch.testing.assert_close(
        weights["tpu"].detach().cpu(), weights["cpu"].detach(), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.dot(torch.ones(3, device=d), torch.ones(4, device=d)),
        lambda d: torch.dot(torch.ones(3, 1, device=d), torch.ones(3, device=d)),
        lambda d: torch.dot(torch.ones(3, device=d), torch.ones(3, device=d, dtype=torch.float64)),
        lambda d: torch.nn.functional.glu(torch.ones(3, 5, device=d)),
    ],
    ids=["sizes", "dims", "dtypes", "glu_odd"],
)
def test_bad_input_raises_like_cpu(call):
    with pytest.raises(RuntimeError) as cpu:
        call("cpu")
    with pytest.raises(type(cpu.value), match=str(cpu.value).split(",")[0][:40]):
        call("tpu")
