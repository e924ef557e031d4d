"""Pooling and padding ops that ``torch.nn`` modules reach and that had no tpu kernel (found
by ``python -m torch_tpu.module_sweep``), as compositions of tpu ops with explicit backward
kernels: 3-d max and average pooling, adaptive max pooling (1-d, 2-d, 3-d), 3-d adaptive
average pooling, and 3-d reflection and replication padding.

Each follows PyTorch's CPU kernel: output sizes (padding, dilation, ceil_mode), the
divisor rules of average pooling, the flat ``d * H * W + h * W + w`` indices max pooling
returns, NaN winning a max window, and the argument checks. Window positions are computed
on the host from the shapes, so every program depends on shapes only.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch._prims_common import suggest_memory_format

from torch_tpu.ops.composite_ops import _into
from torch_tpu.ops.composite_ops import _name as _aten_name

_library = torch.library.Library("aten", "IMPL")


def _triple(values, name: str, default=None) -> list[int]:
    values = list(values) if values is not None else []
    if not values:
        if default is None:
            raise RuntimeError(f"{name} must be given")
        return list(default)
    if len(values) == 1:
        return values * 3
    if len(values) != 3:
        raise RuntimeError(f"{name} must either be a single int, or a tuple of three ints")
    return values


def _memory_format(x) -> torch.memory_format:
    """The input's suggested memory format, as ATen's suggest_memory_format (which, unlike
    the Python one, ignores the strides of dimensions of size 1)."""
    if x.dim() in (4, 5) and x.size(1) > 1:
        channels_last = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        # dense channels_last with dimensions of size 1 anywhere (an unsqueezed batch)
        if x.is_contiguous(memory_format=channels_last) and not x.is_contiguous():
            return channels_last
    return suggest_memory_format(x)


def _check_floating(self, kernel: str) -> None:
    """The CPU's refusal of integer inputs, in its words."""
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_aten_name(self.dtype)}'")


def _batched(self, spatial: int, name: str):
    """self as (N, C, *spatial) and whether it had no batch dimension."""
    if self.dim() == spatial + 1:
        return self.unsqueeze(0), True
    if self.dim() != spatial + 2:
        raise RuntimeError(
            f"{name}: Expected {spatial + 1}D or {spatial + 2}D tensor, but got {self.dim()}D "
            f"tensor with sizes {list(self.shape)}"
        )
    return self, False


def _pooled_size(size, kernel, stride, pad, dilation, ceil_mode) -> int:
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _check_pool(self, kernel, stride, padding, dilation, name: str) -> None:
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"{name}: kernel_size must be greater than zero, but got {kernel}")
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{name}: stride must be greater than zero, but got {stride}")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"{name}: dilation must be greater than zero, but got {dilation}")
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise RuntimeError("pad should be at most half of effective kernel size")


def _window_slices(x, offsets, outs, strides):
    """The (N, C, *outs) view of x whose element o is x[..., offsets + o * strides]."""
    index = [slice(None), slice(None)]
    for offset, out, stride in zip(offsets, outs, strides):
        index.append(slice(offset, offset + (out - 1) * stride + 1, stride))
    return x[tuple(index)]


# --- 3-d max pooling ----------------------------------------------------------------------


def _check_non_batch_dims(self, where: str) -> None:
    """pool3d's check: a 5-d input's batch may be empty, no other dimension may."""
    lead = self.dim() - 4
    for d in range(4):
        if self.size(lead + d) == 0:
            raise RuntimeError(
                f"{where}: Expected input's non-batch dimensions to have positive length, but "
                f"input has a shape of {list(self.shape)} and non-batch dimension {d} has "
                "length zero!"
            )


def _max_pool3d_plan(self, kernel_size, stride, padding, dilation, ceil_mode):
    kernel = _triple(kernel_size, "max_pool3d: kernel_size")
    stride = _triple(stride, "max_pool3d: stride", kernel)
    padding = _triple(padding, "max_pool3d: padding")
    dilation = _triple(dilation, "max_pool3d: dilation")
    _check_pool(self, kernel, stride, padding, dilation, "max_pool3d")
    sizes = list(self.shape[-3:])
    outs = [
        _pooled_size(n, k, s, p, d, ceil_mode)
        for n, k, s, p, d in zip(sizes, kernel, stride, padding, dilation)
    ]
    if any(o <= 0 for o in outs):
        raise RuntimeError(
            f"Given input size: ({'x'.join(str(v) for v in self.shape[-4:])}). Calculated output "
            f"size: ({self.shape[-4]}x{'x'.join(str(o) for o in outs)}). Output size is too small"
        )
    return kernel, stride, padding, dilation, sizes, outs


def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):  # fmt: skip
    x, unbatched = _batched(self, 3, "max_pool3d")
    _check_non_batch_dims(self, "max_pool3d_with_indices_out_cpu_template()")
    kernel, stride, padding, dilation, sizes, outs = _max_pool3d_plan(
        x, kernel_size, stride, padding if isinstance(padding, (list, tuple)) else [padding],
        dilation if isinstance(dilation, (list, tuple)) else [dilation], ceil_mode,
    )  # fmt: skip
    # Pad with -inf so that slices stay in range; padded positions never win.
    spans = zip(outs, stride, dilation, kernel, sizes, padding)
    tails = [max(0, (o - 1) * s + d * (k - 1) + 1 - (n + p)) for o, s, d, k, n, p in spans]
    pads = []
    for p, tail in reversed(list(zip(padding, tails))):
        pads += [p, tail]
    lowest = float("-inf") if x.dtype.is_floating_point else torch.iinfo(x.dtype).min
    padded = torch.nn.functional.pad(x, pads, value=lowest)
    best = None
    best_index = None
    hw = sizes[1] * sizes[2]
    for offsets in itertools.product(*(range(k) for k in kernel)):
        starts = [a * d for a, d in zip(offsets, dilation)]
        value = _window_slices(padded, starts, outs, stride)
        # positions in the unpadded input, and whether they are inside it
        pos = [[o * s - p + st for o in range(out)]
               for out, s, p, st in zip(outs, stride, padding, starts)]  # fmt: skip
        flat = [[a * hw for a in pos[0]], [b * sizes[2] for b in pos[1]], pos[2]]
        index = (torch.tensor(flat[0]).view(-1, 1, 1) + torch.tensor(flat[1]).view(1, -1, 1)
                 + torch.tensor(flat[2]).view(1, 1, -1))  # fmt: skip
        inside = [torch.tensor([0 <= v < n for v in dim_pos]) for dim_pos, n in zip(pos, sizes)]
        valid = inside[0].view(-1, 1, 1) & inside[1].view(1, -1, 1) & inside[2].view(1, 1, -1)
        index, valid = index.to(x.device), valid.to(x.device)
        if best is None:
            best = torch.where(valid, value, torch.full_like(value, lowest))
            best_index = torch.where(valid, index, torch.full_like(index, -1)).expand(value.shape)
            continue
        better = valid & ((value > best) | torch.isnan(value) | (best_index < 0))
        better = better & ~torch.isnan(best)  # the first NaN of a window stays
        best = torch.where(better, value, best)
        best_index = torch.where(better, index, best_index)
    # In the input's memory format, as the CPU lays its results out (channels_last_3d stays).
    layout = _memory_format(x)
    best_index = best_index.contiguous(memory_format=layout)
    best = best.contiguous(memory_format=layout)
    if unbatched:
        return best.squeeze(0), best_index.squeeze(0)
    return best, best_index


def max_pool3d_with_indices_out(self, kernel_size, stride=(), padding=0, dilation=1,
                                ceil_mode=False, *, out, indices):  # fmt: skip
    values, where = max_pool3d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
    return _into(out, values), _into(indices, where)


def _scatter_max_grad(grad_output, self, indices, spatial: int):
    """Each output's gradient added at the input position its index names."""
    lead = self.dim() - spatial
    grad = torch.zeros(
        (*self.shape[:lead], math.prod(self.shape[lead:])),
        dtype=grad_output.dtype, device=grad_output.device,
    )  # fmt: skip
    if grad.numel() == 0 or grad_output.numel() == 0:
        return grad.view(self.shape)
    outputs = math.prod(indices.shape[lead:])  # not -1: an empty batch has no size to infer
    grad.scatter_add_(
        lead, indices.reshape(*indices.shape[:lead], outputs),
        grad_output.reshape(*grad_output.shape[:lead], outputs),
    )  # fmt: skip
    return grad.view(self.shape)


def max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride, padding,
                                     dilation, ceil_mode, indices):  # fmt: skip
    return _scatter_max_grad(grad_output, self, indices, 3)


def max_pool3d_with_indices_backward_out(grad_output, self, kernel_size, stride, padding,
                                         dilation, ceil_mode, indices, *, grad_input):  # fmt: skip
    return _into(grad_input, _scatter_max_grad(grad_output, self, indices, 3))


# --- 3-d average pooling ------------------------------------------------------------------


def _avg_pool3d_plan(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override):  # fmt: skip
    kernel = _triple(kernel_size, "avg_pool3d: kernel_size")
    stride = _triple(stride, "avg_pool3d: stride", kernel)
    padding = _triple(padding if isinstance(padding, (list, tuple)) else [padding],
                      "avg_pool3d: padding")  # fmt: skip
    _check_pool(self, kernel, stride, padding, [1, 1, 1], "avg_pool3d")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    sizes = list(self.shape[-3:])
    outs = [_pooled_size(n, k, s, p, 1, ceil_mode)
            for n, k, s, p in zip(sizes, kernel, stride, padding)]  # fmt: skip
    if any(o <= 0 for o in outs):
        raise RuntimeError(
            f"Given input size: ({'x'.join(str(v) for v in self.shape[-4:])}). Calculated output "
            f"size: ({self.shape[-4]}x{'x'.join(str(o) for o in outs)}). Output size is too small"
        )
    # The divisor of each output position, as PyTorch's kernel computes it (per dim, then
    # the product): the window clipped to the padded input, or to the input itself.
    factors = []
    for n, k, s, p, out in zip(sizes, kernel, stride, padding, outs):
        row = []
        for o in range(out):
            start = o * s - p
            end = min(start + k, n + p)
            padded_count = end - start
            clipped = min(end, n) - max(start, 0)
            row.append(padded_count if count_include_pad else clipped)
        factors.append(row)
    if divisor_override is not None:
        divisor = torch.full(outs, float(divisor_override), dtype=torch.float64)
    else:
        divisor = (torch.tensor(factors[0], dtype=torch.float64).view(-1, 1, 1)
                   * torch.tensor(factors[1], dtype=torch.float64).view(1, -1, 1)
                   * torch.tensor(factors[2], dtype=torch.float64).view(1, 1, -1))  # fmt: skip
    tails = [max(0, (o - 1) * s + k - (n + p))
             for o, s, k, n, p in zip(outs, stride, kernel, sizes, padding)]  # fmt: skip
    pads = []
    for p, tail in reversed(list(zip(padding, tails))):
        pads += [p, tail]
    return kernel, stride, outs, divisor, pads


def avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):  # fmt: skip
    x, unbatched = _batched(self, 3, "avg_pool3d")
    _check_non_batch_dims(self, "avg_pool3d()")
    kernel, stride, outs, divisor, pads = _avg_pool3d_plan(
        x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )
    padded = torch.nn.functional.pad(x, pads)
    total = None
    for offsets in itertools.product(*(range(k) for k in kernel)):
        window = _window_slices(padded, offsets, outs, stride)
        total = window.clone() if total is None else total + window
    if x.dtype.is_floating_point or x.dtype.is_complex:
        result = total / divisor.to(device=x.device, dtype=x.dtype)
    else:  # the CPU kernel divides integers, truncating
        result = torch.div(total, divisor.to(device=x.device, dtype=x.dtype), rounding_mode="trunc")
    result = result.contiguous()  # the CPU's layout, whatever the input's
    return result.squeeze(0) if unbatched else result


def avg_pool3d_out(self, kernel_size, stride=(), padding=0, ceil_mode=False,
                   count_include_pad=True, divisor_override=None, *, out):  # fmt: skip
    return _into(out, avg_pool3d(self, kernel_size, stride, padding, ceil_mode,
                                 count_include_pad, divisor_override))  # fmt: skip


def avg_pool3d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):  # fmt: skip
    x, unbatched = _batched(self, 3, "avg_pool3d_backward")
    g = grad_output.unsqueeze(0) if unbatched else grad_output
    kernel, stride, outs, divisor, pads = _avg_pool3d_plan(
        x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )
    share = g / divisor.to(device=g.device, dtype=g.dtype)
    padded_shape = list(x.shape[:2]) + [
        n + pads[2 * (2 - i)] + pads[2 * (2 - i) + 1] for i, n in enumerate(x.shape[2:])
    ]
    grad = torch.zeros(padded_shape, dtype=g.dtype, device=g.device)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        _window_slices(grad, offsets, outs, stride).add_(share)
    d0, h0, w0 = pads[4], pads[2], pads[0]
    grad = grad[:, :, d0 : d0 + x.shape[2], h0 : h0 + x.shape[3], w0 : w0 + x.shape[4]]
    grad = grad.contiguous()
    return grad.squeeze(0) if unbatched else grad


def avg_pool3d_backward_out(grad_output, self, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, divisor_override, *, grad_input):  # fmt: skip
    return _into(grad_input, avg_pool3d_backward(grad_output, self, kernel_size, stride, padding,
                                                 ceil_mode, count_include_pad,
                                                 divisor_override))  # fmt: skip


# --- adaptive pooling ---------------------------------------------------------------------


def _adaptive_windows(size: int, out: int) -> tuple[list[list[int]], int]:
    """Each output's input positions, PyTorch's [floor(i*n/out), ceil((i+1)*n/out)), padded
    to the widest window by repeating its last position (harmless for a max, whose first
    occurrence wins)."""
    starts = [(i * size) // out for i in range(out)]
    ends = [-((-(i + 1) * size) // out) for i in range(out)]
    width = max(e - s for s, e in zip(starts, ends))
    return [[min(s + k, e - 1) for k in range(width)] for s, e in zip(starts, ends)], width


def _adaptive_max(self, output_size, spatial: int, name: str):
    x, unbatched = _batched(self, spatial, name)
    _check_floating(self, name if spatial == 2 else f"{name}_cpu")
    if len(output_size) != spatial:
        raise RuntimeError(f"{name}: internal error: output_size.size() must be {spatial}")
    for d in range(1, self.dim()):  # the CPU's check: all but the first dimension
        if self.size(d) == 0:
            raise RuntimeError(
                f"{name}(): Expected input to have non-zero size for non-batch dimensions, but "
                f"input has sizes {list(self.shape)} with dimension {d} being empty"
            )
    if 0 in output_size:  # nothing to pool into (its backward refuses, as the CPU's does)
        empty = torch.empty(*x.shape[:2], *output_size, dtype=x.dtype, device=x.device)
        indices = torch.empty(empty.shape, dtype=torch.long, device=x.device)
        return (empty.squeeze(0), indices.squeeze(0)) if unbatched else (empty, indices)
    sizes = list(x.shape[2:])
    windows = [_adaptive_windows(n, o) for n, o in zip(sizes, output_size)]
    gathered = x
    for d, (positions, _) in enumerate(windows):
        flat = torch.tensor([p for row in positions for p in row]).to(x.device)
        gathered = gathered.index_select(2 + d, flat)
    # (N, C, o0*k0, o1*k1, ...) -> (N, C, o0, o1, ..., k0*k1*...)
    shape = [x.size(0), x.size(1)]
    for o, (_, width) in zip(output_size, windows):
        shape += [o, width]
    gathered = gathered.reshape(shape)
    order = [0, 1] + [2 + 2 * i for i in range(spatial)] + [3 + 2 * i for i in range(spatial)]
    widths = math.prod(width for _, width in windows)  # not -1: an empty batch has no size
    gathered = gathered.permute(order).reshape(*shape[:2], *output_size, widths)
    values, which = gathered.max(-1)
    # which window element won -> its flat index in the input
    strides = [math.prod(sizes[d + 1 :]) for d in range(spatial)]
    table = torch.zeros([*output_size, math.prod(w for _, w in windows)], dtype=torch.long)
    for out_pos in itertools.product(*(range(o) for o in output_size)):
        rows = [windows[d][0][out_pos[d]] for d in range(spatial)]
        table[out_pos] = torch.tensor(
            [sum(p * s for p, s in zip(combo, strides)) for combo in itertools.product(*rows)]
        )
    table = table.to(x.device).expand(*shape[:2], *table.shape)
    indices = table.gather(-1, which.unsqueeze(-1)).squeeze(-1)
    # In the input's memory format, as the CPU lays its results out.
    # (the CPU's 3-d results are contiguous)
    layout = _memory_format(x) if spatial == 2 else torch.contiguous_format
    if layout != torch.contiguous_format:
        values = values.contiguous(memory_format=layout)
        indices = indices.contiguous(memory_format=layout)
    if unbatched:
        return values.squeeze(0), indices.squeeze(0)
    return values, indices


def adaptive_max_pool2d(self, output_size):
    return _adaptive_max(self, list(output_size), 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(self, output_size):
    return _adaptive_max(self, list(output_size), 3, "adaptive_max_pool3d")


def adaptive_max_pool2d_out(self, output_size, *, out, indices):
    values, where = adaptive_max_pool2d(self, output_size)
    return _into(out, values), _into(indices, where)


def adaptive_max_pool3d_out(self, output_size, *, out, indices):
    values, where = adaptive_max_pool3d(self, output_size)
    return _into(out, values), _into(indices, where)


def _check_grad_output(grad_output, name: str) -> None:
    """The CPU's check of adaptive pooling's backward: an output size of 0 has no gradient."""
    for d in range(1, grad_output.dim()):
        if grad_output.size(d) == 0:
            raise RuntimeError(
                f"{name}(): Expected grad_output to have non-zero size for non-batch "
                f"dimensions, but grad_output has sizes {list(grad_output.shape)} with "
                f"dimension {d} being empty"
            )


def adaptive_max_pool2d_backward(grad_output, self, indices):
    _check_grad_output(grad_output, "adaptive_max_pool2d_backward")
    return _scatter_max_grad(grad_output, self, indices, 2)


def adaptive_max_pool3d_backward(grad_output, self, indices):
    _check_grad_output(grad_output, "adaptive_max_pool3d_backward")
    return _scatter_max_grad(grad_output, self, indices, 3)


def adaptive_max_pool2d_backward_out(grad_output, self, indices, *, grad_input):
    return _into(grad_input, adaptive_max_pool2d_backward(grad_output, self, indices))


def adaptive_max_pool3d_backward_out(grad_output, self, indices, *, grad_input):
    return _into(grad_input, adaptive_max_pool3d_backward(grad_output, self, indices))


def _averaging_matrix(size: int, out: int, dtype, device) -> torch.Tensor:
    """[out, in]: row i averages PyTorch's adaptive window of output i."""
    rows = torch.zeros(out, size, dtype=torch.float64)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        rows[i, start:end] = 1.0 / (end - start)
    return rows.to(device=device, dtype=dtype)


def adaptive_avg_pool3d(self, output_size):
    x, unbatched = _batched(self, 3, "adaptive_avg_pool3d")
    _check_floating(self, "adaptive_avg_pool3d_cpu")
    a, b, c = (_averaging_matrix(n, o, x.dtype, x.device)
               for n, o in zip(x.shape[2:], output_size))  # fmt: skip
    result = torch.einsum("ncdhw,Dd,Hh,Ww->ncDHW", x, a, b, c).contiguous()
    return result.squeeze(0) if unbatched else result


def adaptive_avg_pool3d_out(self, output_size, *, out):
    return _into(out, adaptive_avg_pool3d(self, output_size))


def adaptive_avg_pool3d_backward(grad_output, self):
    _check_grad_output(grad_output, "adaptive_avg_pool3d_backward")
    x, unbatched = _batched(self, 3, "adaptive_avg_pool3d_backward")
    g = grad_output.unsqueeze(0) if unbatched else grad_output
    a, b, c = (_averaging_matrix(n, o, g.dtype, g.device)
               for n, o in zip(x.shape[2:], g.shape[2:]))  # fmt: skip
    result = torch.einsum("ncDHW,Dd,Hh,Ww->ncdhw", g, a, b, c).contiguous()
    return result.squeeze(0) if unbatched else result


def adaptive_avg_pool3d_backward_out(grad_output, self, *, grad_input):
    return _into(grad_input, adaptive_avg_pool3d_backward(grad_output, self))


# --- 3-d padding ----------------------------------------------------------------------------


def _pad_positions(self, padding, reflect: bool):
    if len(padding) != 6:
        raise RuntimeError(f"padding size is expected to be 6, but got: {len(padding)}")
    # The CPU's check: 4-d or 5-d, with only the batch dimension allowed to be empty.
    spatial_ok = self.dim() in (4, 5) and all(n != 0 for n in self.shape[-4:][1:])
    if (
        not spatial_ok
        or (self.dim() == 4 and self.size(0) == 0)
        or (self.dim() == 5 and self.size(1) == 0)
    ):
        raise RuntimeError(
            f"Expected 4D or 5D (batch mode) tensor with possibly 0 batch size and other "
            f"non-zero dimensions for input, but got: {list(self.shape)}"
        )
    positions = []
    for d, (left, right) in enumerate(zip(padding[0::2], padding[1::2])):
        dim = self.dim() - 1 - d
        n = self.size(dim)
        if reflect and (left >= n or right >= n):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({left}, {right}) at dimension {dim} of input "
                f"{list(self.shape)}"
            )
        if n + left + right < 1:
            raise RuntimeError(
                f"input ({list(self.shape)}) is too small. Calculated output size would be "
                f"less than 1 at dimension {dim}"
            )
        row = []
        for i in range(-left, n + right):
            if reflect:
                j = -i if i < 0 else (2 * (n - 1) - i if i >= n else i)
            else:
                j = min(max(i, 0), n - 1)
            row.append(j)
        positions.append((dim, torch.tensor(row).to(self.device)))
    return positions  # innermost dim first


def _pad(self, padding, reflect):
    result = self
    for dim, index in _pad_positions(self, list(padding), reflect):
        result = result.index_select(dim, index)
    return result


def _pad_backward(grad_output, self, padding, reflect):
    grad = grad_output
    for dim, index in reversed(_pad_positions(self, list(padding), reflect)):
        shape = list(grad.shape)
        shape[dim] = self.size(dim)
        grad = torch.zeros(shape, dtype=grad.dtype, device=grad.device).index_add_(dim, index, grad)
    return grad


def reflection_pad3d(self, padding):
    return _pad(self, padding, True)


def replication_pad3d(self, padding):
    return _pad(self, padding, False)


def reflection_pad3d_out(self, padding, *, out):
    return _into(out, _pad(self, padding, True))


def replication_pad3d_out(self, padding, *, out):
    return _into(out, _pad(self, padding, False))


def reflection_pad3d_backward(grad_output, self, padding):
    return _pad_backward(grad_output, self, padding, True)


def replication_pad3d_backward(grad_output, self, padding):
    return _pad_backward(grad_output, self, padding, False)


def reflection_pad3d_backward_out(grad_output, self, padding, *, grad_input):
    return _into(grad_input, _pad_backward(grad_output, self, padding, True))


def replication_pad3d_backward_out(grad_output, self, padding, *, grad_input):
    return _into(grad_input, _pad_backward(grad_output, self, padding, False))


def install() -> None:
    for name, kernel in (
        ("max_pool3d_with_indices", max_pool3d_with_indices),
        ("max_pool3d_with_indices.out", max_pool3d_with_indices_out),
        ("max_pool3d_with_indices_backward", max_pool3d_with_indices_backward),
        ("max_pool3d_with_indices_backward.grad_input", max_pool3d_with_indices_backward_out),
        ("avg_pool3d", avg_pool3d),
        ("avg_pool3d.out", avg_pool3d_out),
        ("avg_pool3d_backward", avg_pool3d_backward),
        ("avg_pool3d_backward.grad_input", avg_pool3d_backward_out),
        ("adaptive_max_pool2d", adaptive_max_pool2d),
        ("adaptive_max_pool2d.out", adaptive_max_pool2d_out),
        ("adaptive_max_pool2d_backward", adaptive_max_pool2d_backward),
        ("adaptive_max_pool2d_backward.grad_input", adaptive_max_pool2d_backward_out),
        ("adaptive_max_pool3d", adaptive_max_pool3d),
        ("adaptive_max_pool3d.out", adaptive_max_pool3d_out),
        ("adaptive_max_pool3d_backward", adaptive_max_pool3d_backward),
        ("adaptive_max_pool3d_backward.grad_input", adaptive_max_pool3d_backward_out),
        ("_adaptive_avg_pool3d", adaptive_avg_pool3d),
        ("_adaptive_avg_pool3d.out", adaptive_avg_pool3d_out),
        ("_adaptive_avg_pool3d_backward", adaptive_avg_pool3d_backward),
        ("_adaptive_avg_pool3d_backward.out", adaptive_avg_pool3d_backward_out),
        ("reflection_pad3d", reflection_pad3d),
        ("reflection_pad3d.out", reflection_pad3d_out),
        ("reflection_pad3d_backward", reflection_pad3d_backward),
        ("reflection_pad3d_backward.grad_input", reflection_pad3d_backward_out),
        ("replication_pad3d", replication_pad3d),
        ("replication_pad3d.out", replication_pad3d_out),
        ("replication_pad3d_backward", replication_pad3d_backward),
        ("replication_pad3d_backward.grad_input", replication_pad3d_backward_out),
    ):
        _library.impl(name, kernel, "PrivateUse1")
