"""``nn.MultiMarginLoss`` and ``nn.MultiLabelMarginLoss`` as tpu kernels made of tpu ops,
with their backward kernels (ATen has CPU and CUDA kernels only). The arithmetic is that of
PyTorch's CPU kernels (aten/src/ATen/native/LossMulti*.cpp):

- multi margin: loss_i = sum_{j != y_i} max(0, margin - x_{i,y_i} + x_{i,j})^p w_{y_i} / C;
- multilabel margin: the targets of row i are its entries before the first -1;
  loss_i = sum over targets j and non-targets k of max(0, 1 - (x_{i,j} - x_{i,k})) / C,
  and ``is_target`` marks the targets (the backward kernel reads it).
"""

from __future__ import annotations

import torch

_library = torch.library.Library("aten", "IMPL")
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduce(loss, reduction: int):
    if reduction == 1:
        return loss.mean()
    if reduction == 2:
        return loss.sum()
    return loss


def _rows(self, target, name: str):
    """(N, C) input and (N,) target, and whether the input was 1-d."""
    if self.dim() > 2 or (self.dim() > 0 and self.size(-1) == 0):
        raise RuntimeError(
            f"{name}: Expected non-empty vector or matrix with optional 0-dim batch size, but "
            f"got: {list(self.shape)}"
        )
    single = self.dim() <= 1
    return (self.reshape(1, -1) if single else self), single


# --- multi margin -------------------------------------------------------------------------


def _multi_margin_parts(self, target, p, margin, weight):
    if p not in (1, 2):
        raise RuntimeError("only p == 1 and p == 2 supported")
    x, single = _rows(self, target, "multi_margin_loss")
    y = target.reshape(-1).to(torch.long)
    n, c = x.shape
    if y.numel() != n:
        raise RuntimeError(f"inconsistent target size, expected {n} but got {list(target.shape)}")
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
    if n and not bool(((y >= 0) & (y < c)).all()):
        raise IndexError("target out of range")
    x_y = x.gather(1, y.view(-1, 1))
    z = margin - x_y + x  # (N, C)
    others = torch.ones_like(z, dtype=torch.bool).scatter(1, y.view(-1, 1), False)
    active = others & (z > 0)
    scale = (
        torch.full_like(x_y, 1.0 / c) if weight is None else weight.to(x.dtype)[y].view(-1, 1) / c
    )
    return x, y, z, active, scale, single


def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1):
    x, y, z, active, scale, single = _multi_margin_parts(self, target, p, margin, weight)
    terms = torch.where(active, z if p == 1 else z * z, torch.zeros_like(z)) * scale
    loss = terms.sum(1)
    if reduction == 0 and target.dim() == 0:  # the CPU kernel: (N,) unless the target is 0-d
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=1):
    x, y, z, active, scale, single = _multi_margin_parts(self, target, p, margin, weight)
    slope = torch.where(active, torch.ones_like(z) if p == 1 else 2 * z, torch.zeros_like(z))
    slope = slope * scale
    slope = slope.scatter(1, y.view(-1, 1), -slope.sum(1, keepdim=True))
    if reduction == 0:
        g = grad_output.reshape(-1, 1)
    else:
        g = grad_output.reshape(1, 1) / (x.size(0) if reduction == 1 else 1)
    return (slope * g).reshape(self.shape)


# --- multilabel margin --------------------------------------------------------------------


def _multilabel_parts(self, target):
    x, single = _rows(self, target, "multilabel_margin_loss")
    t = target.reshape(x.shape).to(torch.long)
    if target.shape != self.shape and not (self.dim() <= 1 and target.numel() == x.numel()):
        raise RuntimeError(
            f"inconsistent target size: {list(target.shape)} for input of size: {list(self.shape)}"
        )
    n, c = x.shape
    if t.numel() and not bool(((t >= -1) & (t < c)).all()):
        raise IndexError("multilabel_margin_loss: target index out of range")
    # a row's targets are its entries before the first -1
    valid = torch.cumprod((t != -1).to(torch.int32), 1).to(torch.bool)
    slots = torch.where(valid, t, torch.zeros_like(t))
    # added, not written: the padding slots point at class 0 too
    is_target = torch.zeros_like(x).scatter_add(1, slots, valid.to(x.dtype))
    is_target = is_target.clamp(max=1)
    x_slot = x.gather(1, slots)  # (N, slots)
    z = 1 - (x_slot.unsqueeze(2) - x.unsqueeze(1))  # (N, slots, C)
    pairs = valid.unsqueeze(2) & (is_target == 0).unsqueeze(1)
    active = pairs & (z > 0)
    return x, slots, z, active, is_target, single, c


def multilabel_margin_loss_forward(self, target, reduction):
    x, _slots, z, active, is_target, single, c = _multilabel_parts(self, target)
    loss = torch.where(active, z, torch.zeros_like(z)).sum((1, 2)) / c
    if single:
        is_target = is_target.reshape(self.shape)
        if reduction == 0:
            loss = loss.reshape(())
    return _reduce(loss, reduction), is_target.reshape(self.shape if single else x.shape)


def multilabel_margin_loss_forward_out(self, target, reduction, *, output, is_target):
    loss, marks = multilabel_margin_loss_forward(self, target, reduction)
    output.resize_(loss.shape).copy_(loss)
    is_target.resize_(marks.shape).copy_(marks)
    return output, is_target


def multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    x, slots, _z, active, _marks, single, c = _multilabel_parts(self, target)
    hits = active.to(x.dtype) / c  # (N, slots, C)
    grad = hits.sum(1)  # +1 for every non-target k of an active pair
    grad = grad.scatter_add(1, slots, -hits.sum(2))  # -1 for its target j
    if reduction == 0:
        g = grad_output.reshape(-1, 1)
    else:
        g = grad_output.reshape(1, 1) / (x.size(0) if reduction == 1 else 1)
    return (grad * g).reshape(self.shape)


def multilabel_margin_loss_backward_out(grad_output, self, target, reduction, is_target, *,
                                        grad_input):  # fmt: skip
    result = multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
    return grad_input.resize_(result.shape).copy_(result)


def install() -> None:
    for name, kernel in (
        ("multi_margin_loss", multi_margin_loss),
        ("multi_margin_loss_backward", multi_margin_loss_backward),
        ("multilabel_margin_loss_forward", multilabel_margin_loss_forward),
        ("multilabel_margin_loss_forward.output", multilabel_margin_loss_forward_out),
        ("multilabel_margin_loss_backward", multilabel_margin_loss_backward),
        ("multilabel_margin_loss_backward.grad_input", multilabel_margin_loss_backward_out),
    ):
        _library.impl(name, kernel, "PrivateUse1")
