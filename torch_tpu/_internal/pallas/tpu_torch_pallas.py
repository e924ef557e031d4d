"""``torch_tpu._internal.pallas.tpu_torch_pallas``: kernels registered by fingerprint and
called on tpu tensors (Helion's launcher calls ``call_custom_kernel`` on its fast path)."""

from __future__ import annotations

import torch

_registered = {}  # (name, fingerprint) -> torch_tpu.kernels._lowering.Lowered


def register_custom_kernel(name: str, fingerprint: str, *, lowered) -> None:
    _registered[(name, fingerprint)] = lowered


def lookup_custom_kernel(name: str, fingerprint: str) -> bool:
    return (name, fingerprint) in _registered


def call_custom_kernel(
    name: str,
    fingerprint: str,
    *,
    inputs,
    output_shapes,
    donate_argnums=(),
    device_assignment=None,
    aliases=None,
) -> list[torch.Tensor]:
    """Runs a registered kernel on `inputs` (tpu tensors); returns its results in order.
    `aliases` ({input: result}) writes those results into the inputs in place (the input
    itself is then the result); `output_shapes` and `donate_argnums` are accepted as
    TorchTPU's callers pass them (the lowering knows the shapes)."""
    import torch_tpu

    if device_assignment:
        raise NotImplementedError("kernels over several devices (a mesh) are not supported yet")
    lowered = _registered.get((name, fingerprint))
    if lowered is None:
        raise KeyError(f"no kernel {name!r} registered with fingerprint {fingerprint}")
    into = {result: argument for argument, result in (aliases or {}).items()}
    outputs = [
        (list(shape), dtype, into.get(i, -1)) for i, (shape, dtype) in enumerate(lowered.outputs)
    ]
    return list(
        torch_tpu._C._kernels.call(
            name, lowered.callee, list(inputs), list(lowered.input_dtypes), outputs
        )
    )
