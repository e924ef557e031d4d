"""Conformance on PyTorch's OpInfo database: every OpInfo whose operator has a native
tpu kernel runs its sample inputs on tpu and on the CPU, and the results (and, for
float32, the gradients) are compared, in each of the three eager modes. Exceptions
live in opinfo_expectations.py.
"""

from __future__ import annotations

import pytest
import torch
from opinfo_expectations import EXPECTED_FAILURES, RANDOM, ROUNDED_ONCE, UNINITIALIZED
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_map

import torch_tpu

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool)
# Every dtype runs in strict mode. debug mode checks each op's results as it runs: a
# property of the mode, not of the dtype, so float32 covers it. defer_and_fuse fuses ops
# into one program, where dtypes do matter (float conversions, integer indices, masks);
# float16's fused programs take the same lowering paths as bfloat16's (a 16-bit float
# element type), so its strict run suffices. Each case costs CI time (the suite has an hour on 2 cores).
EAGER_MODES = {
    torch.float32: ("strict", "debug", "defer_and_fuse"),
    torch.bfloat16: ("strict", "defer_and_fuse"),
    torch.float16: ("strict",),
    torch.int64: ("strict", "defer_and_fuse"),
    torch.bool: ("strict", "defer_and_fuse"),
}
MAX_SAMPLES = 6
TOLERANCE = {
    torch.float32: (1.3e-5, 1e-4),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float16: (1e-3, 1e-3),
}


def _native_names() -> set[str]:
    return {name.split("::", 1)[1].split(".", 1)[0] for name in torch_tpu.coverage()}


def _has_native_kernel(op, native: set[str]) -> bool:
    candidates = {op.name.split(".")[-1], op.aten_name or ""}
    if op.name.startswith("nn.functional."):
        candidates.add(op.name.rsplit(".", 1)[-1])
    return any(c in native for c in candidates)


def _cases():
    native = _native_names()
    for op in op_db:
        if op.name in RANDOM or op.name.startswith("sparse.") or not _has_native_kernel(op, native):
            continue
        full = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
        for dtype in DTYPES:
            if dtype not in op.supported_dtypes("cpu"):
                continue
            dtype_name = str(dtype).removeprefix("torch.")
            modes = ["forward"]
            if dtype == torch.float32 and op.supports_autograd:
                modes.append("grad")
            for mode in modes:
                reason = EXPECTED_FAILURES.get((full, dtype_name, mode)) or EXPECTED_FAILURES.get(
                    (full, "*", mode)
                )
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                for eager in EAGER_MODES[dtype]:
                    yield pytest.param(
                        op,
                        dtype,
                        mode,
                        eager,
                        id=f"{full}-{dtype_name}-{mode}-{eager}",
                        marks=marks,
                    )


def _tensor_to_tpu(x: torch.Tensor) -> torch.Tensor:
    # A view keeps its storage layout: move the base and take the same view of it.
    if x._base is not None:
        moved = x._base.detach().to("tpu").as_strided(x.size(), x.stride(), x.storage_offset())
    else:
        moved = x.detach().to("tpu")
    return moved.requires_grad_(x.requires_grad)


def _sample_to_tpu(sample):
    moved = sample.transform(lambda x: _tensor_to_tpu(x) if isinstance(x, torch.Tensor) else x)
    if moved.kwargs.get("device") is not None:  # factory functions
        moved.kwargs["device"] = "tpu"
    return moved


def _compare(actual, expected, values=True):
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        assert actual.device.type == "tpu", f"result on {actual.device}"
        if not values:  # uninitialized memory: only the metadata is defined
            assert (actual.shape, actual.dtype) == (expected.shape, expected.dtype)
            return
        rtol, atol = TOLERANCE.get(expected.dtype, (0, 0))
        torch.testing.assert_close(
            actual.cpu(), expected, rtol=rtol, atol=atol, equal_nan=True, check_stride=False
        )
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _compare(a, e, values)
    else:
        assert actual == expected


def _tensors(value) -> list[torch.Tensor]:
    found = []
    tree_map(lambda x: found.append(x) if isinstance(x, torch.Tensor) else None, value)
    return found


def _weights(o: torch.Tensor) -> torch.Tensor:
    ramp = torch.arange(o.numel(), dtype=torch.float32) % 7 / 7 + 0.5
    return ramp.view(o.shape).to(o.device)


def _grads(op, sample, outputs):
    inputs = [t for t in _tensors((sample.input, sample.args, sample.kwargs)) if t.requires_grad]
    results = [o for o in _tensors(outputs) if o.requires_grad]
    if not inputs or not results:
        return None
    # A fixed, non-uniform weighting so every output element's gradient path counts.
    total = sum((o.float() * _weights(o)).sum() for o in results)
    return torch.autograd.grad(total, inputs, allow_unused=True)


def _closer_to_float64(op, sample, actual, expected):
    """See ROUNDED_ONCE: tpu's largest distance from float64 is at most the CPU's."""
    exact = sample.transform(lambda x: x.double() if isinstance(x, torch.Tensor) else x)
    reference = op(exact.input, *exact.args, **exact.kwargs)
    actual = actual.cpu()
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert torch.equal(actual.isnan(), expected.isnan())
    finite = reference.isfinite() & expected.isfinite()
    torch.testing.assert_close(actual[~finite], expected[~finite], equal_nan=True)
    if not finite.any():
        return
    ours = (actual.double() - reference)[finite].abs().max().item()
    cpus = (expected.double() - reference)[finite].abs().max().item()
    step = torch.finfo(expected.dtype).eps * reference[finite].abs().max().item()
    assert ours <= cpus + step, (ours, cpus)


@pytest.mark.parametrize("op,dtype,mode,eager", list(_cases()))
def test_opinfo(op, dtype, mode, eager):
    with torch_tpu.eager_mode(eager):
        _check_samples(op, dtype, mode)


def _check_samples(op, dtype, mode):
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=mode == "grad"))[:MAX_SAMPLES]
    assert samples, "the OpInfo produced no samples"
    for sample in samples:
        expected = op(sample.input, *sample.args, **sample.kwargs)
        tpu_sample = _sample_to_tpu(sample)
        actual = op(tpu_sample.input, *tpu_sample.args, **tpu_sample.kwargs)
        if mode == "forward" and (op.name, str(dtype).removeprefix("torch.")) in ROUNDED_ONCE:
            _closer_to_float64(op, sample, actual, expected)
        elif mode == "forward":
            _compare(actual, expected, values=op.name not in UNINITIALIZED)
        else:
            expected_grads = _grads(op, sample, expected)
            actual_grads = _grads(op, tpu_sample, actual)
            if expected_grads is None:
                continue
            for a, e in zip(actual_grads, expected_grads):
                if e is None:
                    assert a is None
                else:
                    _compare(a, e)
