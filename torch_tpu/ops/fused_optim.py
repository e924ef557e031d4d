"""``torch.optim.Adam(fused=True)``, ``AdamW(fused=True)`` and ``SGD(fused=True)`` on tpu
tensors.

torch.optim's fused path calls ``aten::_fused_adam_`` / ``aten::_fused_adamw_`` once for
a whole list of parameters (TorchTitan's optimizers are fused by default). Here they are
tpu kernels made of tpu ops, so the update stays on the device (in defer_and_fuse and
under torch.compile it becomes part of the step's program) instead of a CPU fallback
that copies every parameter and optimizer state to the host and back each step. The
arithmetic is that of PyTorch's fused CPU kernel (bias corrections in float32 here, from
double-precision logarithms, where PyTorch uses double): gradients unscaled by ``grad_scale``
(and written back), negated for ``maximize``, decoupled (AdamW) or L2 (Adam) weight
decay, bias-corrected moments, ``amsgrad``'s running maximum, and no update at all (the
gradients included) for a list whose ``found_inf`` is set. Low-precision parameters are
updated in float32.
"""

from __future__ import annotations

import math

import torch

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _one_minus_power(beta: float, step: torch.Tensor) -> torch.Tensor:
    if beta == 0:
        return torch.ones_like(step)
    return -torch.expm1(step * math.log(beta))


def _update_one(
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    max_exp_avg_sq,
    step,
    *,
    lr,
    beta1,
    beta2,
    weight_decay,
    eps,
    amsgrad,
    maximize,
    grad_scale,
    skip,
    decoupled,
) -> None:
    compute = torch.float32 if param.dtype in _LOW_PRECISION else param.dtype
    p = param.to(compute)
    g = grad.to(compute)
    updates = []
    if grad_scale is not None:
        g = g / grad_scale.to(compute)
        updates.append((grad, g))
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    m = exp_avg.to(compute).lerp(g, 1 - beta1)
    v = exp_avg_sq.to(compute) * beta2 + (1 - beta2) * g * g
    step_dtype = torch.float64 if compute == torch.float64 else torch.float32
    step = step.to(device=param.device, dtype=step_dtype)
    # 1 - beta**step as -expm1(step * log(beta)), log taken in double here: PyTorch's
    # kernel works in double on the host, and pow of beta rounded to float32 would be
    # 1e-5 off for beta2 = 0.999 at step 1.
    bias_correction1 = _one_minus_power(beta1, step)
    bias_correction2_sqrt = torch.sqrt(_one_minus_power(beta2, step))
    second = v
    if amsgrad:
        second = torch.maximum(max_exp_avg_sq.to(compute), v)
    denom = second.sqrt() / bias_correction2_sqrt.to(compute) + eps
    p = p - (lr / bias_correction1).to(compute) * m / denom
    updates += [(param, p), (exp_avg, m), (exp_avg_sq, v)]
    if amsgrad:
        updates.append((max_exp_avg_sq, second))
    _store(updates, skip, compute)


def _store(updates, skip, compute) -> None:
    """Writes each (tensor, new value), or keeps the old value where `skip` (found_inf) is set."""
    for target, value in updates:
        if skip is not None:
            value = torch.where(skip, target.to(compute), value)
        target.copy_(value)


def _fused_adam(decoupled: bool):
    def kernel(
        params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *,
        grad_scale=None, found_inf=None, **hyper,
    ) -> None:  # fmt: skip
        # hyper: lr, beta1, beta2, weight_decay, eps, amsgrad, maximize (the schema's names)
        if isinstance(hyper["lr"], torch.Tensor) and hyper["lr"].device.type == "cpu":
            hyper["lr"] = hyper["lr"].item()
        if not params:
            return
        # One fused call holds one device's tensors: the skip flag is read once.
        skip = None if found_inf is None else found_inf.to(params[0].device) == 1
        with torch.no_grad():
            for i, param in enumerate(params):
                max_exp_avg_sq = max_exp_avg_sqs[i] if hyper["amsgrad"] else None
                _update_one(
                    param, grads[i], exp_avgs[i], exp_avg_sqs[i], max_exp_avg_sq,
                    state_steps[i], grad_scale=grad_scale, skip=skip, decoupled=decoupled,
                    **hyper,
                )  # fmt: skip

    return kernel


def _effective_grad(param, grad, compute, grad_scale, maximize, weight_decay):
    """The gradient the fused SGD and Adagrad kernels step with: unscaled (the unscaled
    gradient is written back, as the CPU kernels do), negated for maximize, plus weight
    decay. Returns it and the pending (tensor, value) writes."""
    g = grad.to(compute)
    updates = []
    if grad_scale is not None:
        g = g / grad_scale.to(compute)
        updates.append((grad, g))
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + weight_decay * param.to(compute)
    return g, updates


def _fused_sgd(
    params, grads, momentum_buffers, *, weight_decay, momentum, lr, dampening, nesterov,
    maximize, is_first_step, grad_scale=None, found_inf=None,
) -> None:  # fmt: skip
    """aten::_fused_sgd_ (SGD(fused=True)), as PyTorch's fused CPU kernel computes it:
    unscaled gradients written back, then maximize, weight decay, momentum (the buffer is the
    gradient itself on the first step), Nesterov, and the step; nothing for found_inf."""
    if isinstance(lr, torch.Tensor) and lr.device.type == "cpu":
        lr = lr.item()
    if not params:
        return
    skip = None if found_inf is None else found_inf.to(params[0].device) == 1
    with torch.no_grad():
        for i, param in enumerate(params):
            compute = torch.float32 if param.dtype in _LOW_PRECISION else param.dtype
            g, updates = _effective_grad(
                param, grads[i], compute, grad_scale, maximize, weight_decay
            )
            if momentum != 0:
                buffer = momentum_buffers[i]
                if is_first_step:
                    b = g
                else:
                    b = buffer.to(compute) * momentum + (1 - dampening) * g
                updates.append((buffer, b))
                g = g + momentum * b if nesterov else b
            updates.append((param, param.to(compute) - lr * g))
            _store(updates, skip, compute)


def _fused_adagrad(
    params, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps, maximize,
    grad_scale=None, found_inf=None,
) -> None:  # fmt: skip
    """aten::_fused_adagrad_ (Adagrad(fused=True)), as PyTorch's fused CPU kernel computes
    it: unscaled gradients written back, maximize, weight decay, the sum of squares, and the
    step at lr / (1 + (step - 1) * lr_decay) (the optimizer has already counted the step)."""
    if isinstance(lr, torch.Tensor) and lr.device.type == "cpu":
        lr = lr.item()
    if not params:
        return
    skip = None if found_inf is None else found_inf.to(params[0].device) == 1
    with torch.no_grad():
        for i, param in enumerate(params):
            compute = torch.float32 if param.dtype in _LOW_PRECISION else param.dtype
            g, updates = _effective_grad(
                param, grads[i], compute, grad_scale, maximize, weight_decay
            )
            total = state_sums[i].to(compute) + g * g
            updates.append((state_sums[i], total))
            step = state_steps[i].to(device=param.device, dtype=compute)
            clr = lr / (1 + (step - 1) * lr_decay)
            updates.append((param, param.to(compute) - clr * g / (total.sqrt() + eps)))
            _store(updates, skip, compute)


_library = torch.library.Library("aten", "IMPL")


def install() -> None:
    _library.impl("_fused_adagrad_", _fused_adagrad, "PrivateUse1")
    _library.impl("_fused_adagrad_.tensor_lr", _fused_adagrad, "PrivateUse1")
    _library.impl("_fused_sgd_", _fused_sgd, "PrivateUse1")
    _library.impl("_fused_sgd_.tensor_lr", _fused_sgd, "PrivateUse1")
    for name, decoupled in (("_fused_adam_", False), ("_fused_adamw_", True)):
        kernel = _fused_adam(decoupled)
        _library.impl(name, kernel, "PrivateUse1")
        _library.impl(f"{name}.tensor_lr", kernel, "PrivateUse1")
