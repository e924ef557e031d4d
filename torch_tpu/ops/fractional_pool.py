"""Fractional max pooling (``nn.FractionalMaxPool2d``/``3d``, Graham 2014) as compositions of
tpu ops, forward and backward, following PyTorch's CPU kernel to the index.

Each plane (n, c) draws its window starts from its own random samples ``u`` (one per
spatial dimension): with ``alpha = (in - pool) / (out - 1)``, window ``i < out - 1`` starts
at ``int((i + u) * alpha) - int(u * alpha)`` and the last one at ``in - pool``, computed in
the input's dtype as the CPU kernel computes it (so bfloat16 rounds the same way). The
starts are data (they depend on ``u``, a tensor on the device), so the windows are gathered
by index rather than sliced; the output is each window's maximum and ``indices`` its flat
position in the plane (``h * W + w``, or ``t * H * W + h * W + w``), the first maximum on
ties and the last NaN where a window holds NaN, as on the CPU. The backward adds each
output's gradient at its index.
"""

from __future__ import annotations

import math

import torch

from torch_tpu.ops.composite_ops import _into
from torch_tpu.ops.window_ops import _scatter_max_grad

_library = torch.library.Library("aten", "IMPL")

# Which sample of a plane drives each spatial dimension (the CPU kernel's order).
_SAMPLE_OF_DIM = {2: (1, 0), 3: (0, 1, 2)}  # 2-d: (H, W) <- (u[1], u[0])
_DIM_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}
# c10's names of the types the kernel refuses
_SCALAR_TYPE_NAMES = {
    torch.int64: "Long",
    torch.int32: "Int",
    torch.int16: "Short",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.bool: "Bool",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
}


def _check(self, kernel_size, output_size, samples, spatial: int) -> str:
    """PyTorch's argument checks, in its order; returns the op's name for messages."""
    name = f"fractional_max_pool{spatial}d"
    ints = "Ints" if spatial == 2 else "three Ints"
    if len(kernel_size) != spatial:
        raise RuntimeError(f"{name}: kernel_size must either be a single Int or tuple of {ints}")
    if len(output_size) != spatial:
        raise RuntimeError(f"{name}: output_size must either be a single Int or tuple of {ints}")
    where = f"{name}()" if spatial == 2 else f"{name}_out()"
    if self.dim() not in (spatial + 1, spatial + 2):
        expected = f"{spatial + 1}D or {spatial + 2}D tensor"
        raise RuntimeError(f"{where}: Expected {expected}, but got: {list(self.shape)}")
    for d in range(1, self.dim()):  # only the batch may be empty
        if self.size(d) == 0:
            raise RuntimeError(
                f"{where}: Expected input to have non-zero size for non-batch dimensions, but "
                f"got{list(self.shape)} with dimension {d} being empty."
            )
    sizes = list(self.shape[-spatial:])

    def check_pools():
        for d, (n, o, k) in enumerate(zip(sizes, output_size, kernel_size)):
            # the CPU's 3-d kernel asks for one position to spare, its 2-d kernel does not
            fits = o + k - 1 <= n if spatial == 2 else o + k - 1 < n
            if not fits:
                what = _DIM_NAMES[spatial][d]
                raise RuntimeError(
                    f"{where}: pool {what} {k} too large relative to input {what} {n}"
                )

    def check_samples():
        if samples.dim() != 3:
            raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.dim()}")
        if samples.dtype != self.dtype:
            raise RuntimeError("Expect _random_samples to have the same dtype as input")
        batch = self.size(0) if self.dim() == spatial + 2 else 1
        channels = self.size(-spatial - 1)
        if samples.size(0) < batch:
            raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
        if samples.size(1) != channels:
            raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
        if samples.size(2) != spatial:
            raise RuntimeError(
                f"Expect _random_samples.size(2) equals to {spatial}; got {samples.size(2)}."
            )

    # (the 3-d kernel checks the pools first, the 2-d one the samples)
    for step in (check_pools, check_samples) if spatial == 3 else (check_samples, check_pools):
        step()
    if not self.is_floating_point():
        raise NotImplementedError(
            f'"{name}_out_frame" not implemented for '
            f"'{_SCALAR_TYPE_NAMES.get(self.dtype, str(self.dtype))}'"
        )
    return name


def _starts(u: torch.Tensor, size: int, out: int, pool: int) -> torch.Tensor:
    """[..., out] window starts for samples u [...] (int64), in u's dtype arithmetic."""
    last = torch.full((*u.shape, 1), size - pool, dtype=torch.long, device=u.device)
    if out <= 1:
        return last[..., :out]
    # alpha as the kernel's scalar_t: both sizes converted, then divided, in that dtype
    alpha = float(torch.tensor(size - pool, dtype=u.dtype) / torch.tensor(out - 1, dtype=u.dtype))
    steps = torch.arange(out - 1, device=u.device).to(u.dtype)
    first = ((steps + u.unsqueeze(-1)) * alpha).long() - (u * alpha).long().unsqueeze(-1)
    return torch.cat([first, last], dim=-1)


def _fractional_max_pool(self, kernel_size, output_size, samples, spatial: int):
    kernel_size, output_size = list(kernel_size), list(output_size)
    _check(self, kernel_size, output_size, samples, spatial)
    unbatched = self.dim() == spatial + 1
    x = self.unsqueeze(0) if unbatched else self
    batch, channels, sizes = x.size(0), x.size(1), list(x.shape[2:])
    if x.numel() == 0 or math.prod(output_size) == 0:
        shape = [batch, channels, *output_size]
        values = x.new_empty(shape)
        indices = torch.empty(shape, dtype=torch.long, device=x.device)
    else:
        u = samples[:batch].to(x.device)
        # flat positions of every window element: [N, C, o0, ..., k0, ...] summed over dims
        flat = None
        strides = [math.prod(sizes[d + 1 :]) for d in range(spatial)]
        for d in range(spatial):
            starts = _starts(u[..., _SAMPLE_OF_DIM[spatial][d]], sizes[d], output_size[d],
                             kernel_size[d])  # fmt: skip
            offsets = torch.arange(kernel_size[d], device=x.device)
            rows = (starts.unsqueeze(-1) + offsets) * strides[d]  # [N, C, o_d, k_d]
            # as [N, C, o_0.., k_0..] with this dimension's o_d and k_d, ones elsewhere
            rows = rows.reshape(
                batch, channels, *[output_size[d] if i == d else 1 for i in range(spatial)],
                *[kernel_size[d] if i == d else 1 for i in range(spatial)],
            )  # fmt: skip
            flat = rows if flat is None else flat + rows
        window = math.prod(kernel_size)
        flat = flat.reshape(batch, channels, *output_size, window)
        plane = x.reshape(batch, channels, -1)
        gathered = plane.gather(2, flat.reshape(batch, channels, -1)).view(flat.shape)
        values, which = gathered.max(-1)
        # the CPU kernel lets every NaN replace the running maximum: the last NaN wins
        nan = gathered.isnan()
        last_nan = (window - 1) - nan.flip(-1).to(torch.uint8).argmax(-1)
        which = torch.where(nan.any(-1), last_nan, which)
        indices = flat.gather(-1, which.unsqueeze(-1)).squeeze(-1)
    if unbatched:
        return values.squeeze(0), indices.squeeze(0)
    return values, indices


def _backward(grad_output, self, output_size, indices, spatial: int):
    name = f"fractional_max_pool{spatial}d_backward"
    names = _DIM_NAMES[spatial]
    for d in reversed(range(spatial)):
        if grad_output.size(d - spatial) != output_size[d]:
            raise RuntimeError(f"{name}(): gradOutput {names[d]} unexpected")
    return _scatter_max_grad(grad_output.contiguous(), self, indices, spatial)


def fractional_max_pool2d(self, kernel_size, output_size, random_samples):
    return _fractional_max_pool(self, kernel_size, output_size, random_samples, 2)


def fractional_max_pool3d(self, kernel_size, output_size, random_samples):
    return _fractional_max_pool(self, kernel_size, output_size, random_samples, 3)


def fractional_max_pool2d_out(self, kernel_size, output_size, random_samples, *, output,
                              indices):  # fmt: skip
    values, where = fractional_max_pool2d(self, kernel_size, output_size, random_samples)
    return _into(output, values), _into(indices, where)


def fractional_max_pool3d_out(self, kernel_size, output_size, random_samples, *, output,
                              indices):  # fmt: skip
    values, where = fractional_max_pool3d(self, kernel_size, output_size, random_samples)
    return _into(output, values), _into(indices, where)


def fractional_max_pool2d_backward(grad_output, self, kernel_size, output_size, indices):
    return _backward(grad_output, self, list(output_size), indices, 2)


def fractional_max_pool3d_backward(grad_output, self, kernel_size, output_size, indices):
    return _backward(grad_output, self, list(output_size), indices, 3)


def fractional_max_pool2d_backward_out(grad_output, self, kernel_size, output_size, indices, *,
                                       grad_input):  # fmt: skip
    return _into(grad_input, _backward(grad_output, self, list(output_size), indices, 2))


def fractional_max_pool3d_backward_out(grad_output, self, kernel_size, output_size, indices, *,
                                       grad_input):  # fmt: skip
    return _into(grad_input, _backward(grad_output, self, list(output_size), indices, 3))


def install() -> None:
    for name, kernel in (
        ("fractional_max_pool2d", fractional_max_pool2d),
        ("fractional_max_pool2d.output", fractional_max_pool2d_out),
        ("fractional_max_pool2d_backward", fractional_max_pool2d_backward),
        ("fractional_max_pool2d_backward.grad_input", fractional_max_pool2d_backward_out),
        ("fractional_max_pool3d", fractional_max_pool3d),
        ("fractional_max_pool3d.output", fractional_max_pool3d_out),
        ("fractional_max_pool3d_backward", fractional_max_pool3d_backward),
        ("fractional_max_pool3d_backward.grad_input", fractional_max_pool3d_backward_out),
    ):
        _library.impl(name, kernel, "PrivateUse1")
