"""nn.MultiMarginLoss and nn.MultiLabelMarginLoss on tpu against PyTorch's CPU kernels:
losses and gradients for every reduction, p, margin and weight, 1-d inputs, and bad targets."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401

TPU = "tpu"


def compare(fn, x, *args):
    out = {}
    for device in ("cpu", TPU):
        t = x.detach().to(device).requires_grad_()
        moved = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
        loss = fn(t, *moved)
        upstream = torch.linspace(0.5, 1.5, loss.numel()).reshape(loss.shape)
        loss.backward(upstream.to(device))
        out[device] = (loss.detach().cpu(), t.grad.cpu())
    torch.testing.assert_close(out[TPU][0], out["cpu"][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out[TPU][1], out["cpu"][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("p, margin, weighted", [(1, 1.0, False), (2, 0.5, True), (1, 2.0, True)])
def test_multi_margin(native, reduction, p, margin, weighted):
    g = torch.Generator().manual_seed(p)
    x = torch.randn(6, 5, generator=g)
    y = torch.randint(0, 5, (6,), generator=g)
    w = torch.rand(5, generator=g) if weighted else None
    compare(lambda t, y: F.multi_margin_loss(t, y, p=p, margin=margin, weight=w if w is None
                                             else w.to(t.device), reduction=reduction), x, y)  # fmt: skip
    compare(lambda t, y: F.multi_margin_loss(t, y, p=p, margin=margin, reduction=reduction),
            x[0], y[:1])  # fmt: skip


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin(native, reduction):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4, 5, generator=g)
    y = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 1, 1, 1], [4, 4, -1, 0, 0]])
    compare(lambda t, y: F.multilabel_margin_loss(t, y, reduction=reduction), x, y)
    compare(lambda t, y: F.multilabel_margin_loss(t, y, reduction=reduction), x[0], y[0])


def test_modules_and_bad_targets(native):
    x = torch.randn(3, 4)
    compare(torch.nn.MultiMarginLoss(), x, torch.tensor([0, 3, 1]))
    compare(torch.nn.MultiLabelMarginLoss(), x, torch.tensor([[0, 1, -1, 0]] * 3))
    with pytest.raises(IndexError, match="target out of range"):
        F.multi_margin_loss(x.to(TPU), torch.tensor([0, 4, 1], device=TPU))
    for device in ("cpu", TPU):  # F.multi_margin_loss checks p itself; the op checks too
        with pytest.raises(RuntimeError, match="only p == 1 and p == 2 supported"):
            torch.ops.aten.multi_margin_loss(x.to(device), torch.tensor([0, 1, 1]).to(device), 3)
