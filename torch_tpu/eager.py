"""Eager execution modes.

``strict`` (the default): each operator is its own cached program, enqueued
asynchronously. ``debug``: each operator is awaited before the next, so a failure
surfaces at the operator that caused it, named in the error; set
``TORCH_TPU_DEBUG_NANS=1`` as well to name the first operator that produces a NaN or
an infinity. ``defer_and_fuse``: operators are recorded into a pending graph per
device instead of running; a sync point (``.cpu()``, ``.item()``, printing, a
data-dependent shape, a CPU fallback, ``torch_tpu.sync()``, ``torch.tpu.synchronize()``,
a mode switch, or ``TORCH_TPU_DEFER_MAX_OPS`` recorded ops) compiles the graph as one
fused program, cached by structure, and runs it.

The process-wide mode comes from ``TORCH_TPU_EAGER_MODE`` (or ``TPU_LAUNCH_BLOCKING=1``
for debug, ``TPU_DEFER_AND_FUSE=1`` for defer_and_fuse). Switching first runs and
waits for the work already pending.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch_tpu import _C


def set_eager_mode(mode: str) -> None:
    """Sets the eager mode of the process: ``"strict"``, ``"debug"`` or ``"defer_and_fuse"``.

    >>> torch_tpu.set_eager_mode("debug")
    """
    _C._set_eager_mode(mode)


def get_eager_mode() -> str:
    """The current eager mode.

    >>> torch_tpu.get_eager_mode()
    'strict'
    """
    return _C._get_eager_mode()


@contextlib.contextmanager
def eager_mode(mode: str) -> Iterator[None]:
    """Runs a block in another eager mode, restoring the previous one after.

    >>> with torch_tpu.eager_mode("debug"):
    ...     y = torch.ones(3, device="tpu") * 2
    """
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def sync() -> None:
    """Runs the pending defer_and_fuse graphs now (without waiting for their results).

    A training loop in defer_and_fuse mode calls it once per step, so that every step
    records, and reuses, the same fused program. It does nothing in the other modes.

    >>> loss.backward(); optimizer.step(); torch_tpu.sync()
    """
    _C._sync()
