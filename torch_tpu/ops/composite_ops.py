"""Operators that torch.nn modules reach and that had no tpu kernel (found by
``python -m torch_tpu.module_sweep``), written as compositions of tpu ops: ``dot`` (LBFGS,
linear cross-entropy), ``xlogy`` (KLDivLoss), ``mish``, ``glu``, ``threshold``,
``hardshrink``, ``softshrink`` and PReLU's kernel, with their backward kernels. Each
follows PyTorch's CPU kernel: its checks, its type promotion, its special values
(xlogy(0, y) is 0 unless y is NaN; NaN passes through the shrinks and the threshold).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_library = torch.library.Library("aten", "IMPL")


def _into(out: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    if out.shape != result.shape:
        out.resize_(result.shape)
    return out.copy_(result)


def _check_dot(self, tensor) -> None:
    """The CPU's checks of dot and vdot, in its order and words."""
    if self.dim() != 1 or tensor.dim() != 1:
        raise RuntimeError(
            f"1D tensors expected, but got {self.dim()}D and {tensor.dim()}D tensors"
        )
    if self.dtype != tensor.dtype:
        raise RuntimeError(
            "dot : expected both vectors to have same dtype, but found "
            f"{_name(self.dtype)} and {_name(tensor.dtype)}"
        )
    n, m = self.numel(), tensor.numel()
    if n != m:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same "
            f"number of elements, but got {n} and {m} elements respectively"
        )


def dot(self, tensor):
    _check_dot(self, tensor)
    # mm takes a conj() or neg view as such (PyTorch sends dot past its conjugate fallback).
    return torch.mm(self.unsqueeze(0), tensor.unsqueeze(1)).reshape(())


def vdot(self, other):
    """sum(conj(self) * other). Also what makes a CPU tensor an error, as on the CPU: the
    CPU fallback would have moved it."""
    _check_dot(self, other)
    return torch.mm(self.conj().unsqueeze(0), other.unsqueeze(1)).reshape(())


def _name(dtype: torch.dtype) -> str:
    return {torch.float32: "Float", torch.float64: "Double", torch.int64: "Long",
            torch.int32: "Int", torch.float16: "Half", torch.bfloat16: "BFloat16",
            torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
            torch.bool: "Bool", torch.complex64: "ComplexFloat",
            torch.complex128: "ComplexDouble", torch.complex32: "ComplexHalf"}.get(
        dtype, str(dtype).removeprefix("torch."))  # fmt: skip


def xlogy(self, other):
    dtype = torch.result_type(self, other)
    if not (dtype.is_floating_point or dtype.is_complex):
        dtype = torch.get_default_dtype()
    device = (other if isinstance(other, torch.Tensor) else self).device
    # A Python number on either side (xlogy.Scalar_Self / OutScalar_Self reach here with one).
    x, y = (torch.as_tensor(v, device=device).to(dtype) for v in (self, other))
    result = torch.where(x == 0, torch.zeros((), dtype=dtype, device=x.device), x * torch.log(y))
    return torch.where(torch.isnan(y), y, result)


def xlogy_out(self, other, *, out):
    return _into(out, xlogy(self, other))


def mish(self):
    return self * torch.tanh(F.softplus(self))


def mish_out(self, *, out):
    return _into(out, mish(self))


def mish_(self):
    return self.copy_(mish(self))


def mish_backward(grad_output, self):
    sigmoid = torch.sigmoid(self)
    tanh_softplus = torch.tanh(F.softplus(self))
    return grad_output * (tanh_softplus + self * sigmoid * (1 - tanh_softplus * tanh_softplus))


def glu(self, dim=-1):
    if self.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if self.shape[dim] % 2 != 0:
        raise RuntimeError(
            f"Halving dimension must be even, but dimension {dim % self.dim()} is size "
            f"{self.shape[dim]}"
        )
    a, b = self.chunk(2, dim)
    return a * torch.sigmoid(b)


def glu_out(self, dim=-1, *, out):
    return _into(out, glu(self, dim))


def glu_backward(grad_output, self, dim):
    a, b = self.chunk(2, dim)
    sigmoid = torch.sigmoid(b)
    return torch.cat([grad_output * sigmoid, grad_output * a * sigmoid * (1 - sigmoid)], dim)


def glu_backward_out(grad_output, self, dim, *, grad_input):
    return _into(grad_input, glu_backward(grad_output, self, dim))


def threshold(self, threshold, value):
    return torch.where(self <= threshold, torch.full_like(self, value), self)


def threshold_out(self, threshold_, value, *, out):
    return _into(out, threshold(self, threshold_, value))


def threshold_inplace(self, threshold_, value):
    # The CPU lets an in-place threshold write an expanded tensor (it is idempotent, so
    # elements sharing memory get the same value): it is done on the distinct elements,
    # the broadcast dimensions narrowed to one.
    distinct = self
    for dim, (size, stride) in enumerate(zip(self.shape, self.stride())):
        if stride == 0 and size > 1:
            distinct = distinct.narrow(dim, 0, 1)
    distinct.copy_(threshold(distinct, threshold_, value))
    return self


def _inside(self, lambd):
    return (self >= -lambd) & (self <= lambd)


def hardshrink(self, lambd=0.5):
    return torch.where(_inside(self, lambd), torch.zeros_like(self), self)


def hardshrink_out(self, lambd=0.5, *, out):
    return _into(out, hardshrink(self, lambd))


def softshrink(self, lambd=0.5):
    # NaN stays NaN (x * 0), as in PyTorch's kernel.
    return torch.where(self > lambd, self - lambd, torch.where(self < -lambd, self + lambd,
                                                               self * 0))  # fmt: skip


def softshrink_out(self, lambd=0.5, *, out):
    return _into(out, softshrink(self, lambd))


def shrink_backward(grad_output, self, lambd):
    return torch.where(_inside(self, lambd), torch.zeros_like(grad_output), grad_output)


def shrink_backward_out(grad_output, self, lambd, *, grad_input):
    return _into(grad_input, shrink_backward(grad_output, self, lambd))


def prelu_kernel(self, weight):
    return torch.where(self > 0, self, weight * self)


def prelu_kernel_backward(grad_output, self, weight):
    positive = self > 0
    grad_input = torch.where(positive, grad_output, weight * grad_output)
    grad_weight = torch.where(positive, torch.zeros_like(grad_output), self * grad_output)
    return grad_input, grad_weight


def mode_out(self, dim=-1, keepdim=False, *, values, indices):
    """torch.mode(out=...): ATen's out variant refuses every device but CPU, CUDA and XPU
    before dispatching; the values come from the functional op."""
    if values.device != self.device or indices.device != self.device:
        raise RuntimeError(
            f"mode: expected values and indices on {self.device}, but got values on "
            f"{values.device} and indices on {indices.device}"
        )
    # the CPU kernel's words
    if values.dtype != self.dtype:
        raise RuntimeError(
            f"expected scalar type '{_name(self.dtype)}' but got '{_name(values.dtype)}' for "
            "values output"
        )
    if indices.dtype != torch.int64:
        raise RuntimeError(
            f"expected scalar type 'Long' but got '{_name(indices.dtype)}' for indices output"
        )
    result_values, result_indices = torch.mode(self, dim, keepdim)
    _into(values, result_values)
    _into(indices, result_indices)
    return values, indices


def install() -> None:
    for name, kernel in (
        ("dot", dot),
        ("vdot", vdot),
        ("xlogy.Tensor", xlogy),
        ("xlogy.OutTensor", xlogy_out),
        ("mish", mish),
        ("mish.out", mish_out),
        ("mish_", mish_),
        ("mish_backward", mish_backward),
        ("glu", glu),
        ("glu.out", glu_out),
        ("glu_backward", glu_backward),
        ("glu_backward.grad_input", glu_backward_out),
        ("threshold", threshold),
        ("threshold.out", threshold_out),
        ("threshold_", threshold_inplace),
        ("hardshrink", hardshrink),
        ("hardshrink.out", hardshrink_out),
        ("hardshrink_backward", shrink_backward),
        ("hardshrink_backward.grad_input", shrink_backward_out),
        ("softshrink", softshrink),
        ("softshrink.out", softshrink_out),
        ("softshrink_backward", shrink_backward),
        ("softshrink_backward.grad_input", shrink_backward_out),
        ("_prelu_kernel", prelu_kernel),
        ("_prelu_kernel_backward", prelu_kernel_backward),
        ("mode.values", mode_out),
    ):
        _library.impl(name, kernel, "PrivateUse1")
