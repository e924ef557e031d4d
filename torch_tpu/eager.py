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

The process-wide mode comes from ``TORCH_TPU_EAGER_MODE`` (or ``TORCH_TPU_LAUNCH_BLOCKING=1``
/ ``TPU_LAUNCH_BLOCKING=1`` for debug, ``TORCH_TPU_DEFER_AND_FUSE=1`` /
``TPU_DEFER_AND_FUSE=1`` for defer_and_fuse). Switching first runs and waits for the work
already pending.

Google TorchTPU's names for the same setting work too: ``torch.tpu.EagerMode``
(``DEFER_NEVER`` is strict, ``DEFER_AND_FUSE``, ``DEFER_NEVER_AND_LAUNCH_BLOCKING`` is
debug), the ``torch.tpu.eager_mode`` property (read and assign) and
``torch.tpu.set_eager_mode(mode)``, which sets the mode at once and, used as a context
manager, restores the previous one at the end of the block. TorchTPU's
``TORCH_TPU_ENABLE_DEBUG_CHECKS=1`` (bounds checks) is accepted: index bounds are always
checked here, in every mode.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator

import torch

from torch_tpu import _C, eager_buckets


class EagerMode(enum.Enum):
    """TorchTPU's names of the eager modes; each value is torch_tpu's name."""

    DEFER_NEVER = "strict"
    DEFER_AND_FUSE = "defer_and_fuse"
    DEFER_NEVER_AND_LAUNCH_BLOCKING = "debug"


def _mode_name(mode: str | EagerMode) -> str:
    return mode.value if isinstance(mode, EagerMode) else mode


def set_eager_mode(mode: str | EagerMode) -> None:
    """Sets the eager mode of the process: ``"strict"``, ``"debug"`` or ``"defer_and_fuse"``
    (or a ``torch.tpu.EagerMode``).

    >>> torch_tpu.set_eager_mode("debug")
    """
    eager_buckets.flush()  # what was recorded under size buckets runs in the old mode
    _C._set_eager_mode(_mode_name(mode))


def get_eager_mode() -> str:
    """The current eager mode.

    >>> torch_tpu.get_eager_mode()
    'strict'
    """
    return _C._get_eager_mode()


@contextlib.contextmanager
def eager_mode(mode: str | EagerMode) -> Iterator[None]:
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


@contextlib.contextmanager
def thread_eager_mode(mode: str | EagerMode) -> Iterator[None]:
    """Runs a block in another eager mode on this thread only, whatever the process-wide
    mode (which ``eager_mode()`` sets for every thread, the autograd engine's included).
    Meant for one thread per rank (``torch_tpu.distributed.testing.run_threaded``),
    where ranks switching the shared mode would race.

    >>> with torch_tpu.eager.thread_eager_mode("debug"):
    ...     y = torch.ones(3, device="tpu") * 2
    """
    previous = _C._set_thread_eager_mode(_mode_name(mode))
    try:
        yield
    finally:
        _C._set_thread_eager_mode(previous)


class _SetEagerMode:
    """``torch.tpu.set_eager_mode(mode)``: sets the mode now; as a context manager, puts
    the previous mode back when the block ends (as ``torch.set_grad_enabled`` does)."""

    def __init__(self, mode: str | EagerMode):
        self._previous = get_eager_mode()
        set_eager_mode(mode)

    def __enter__(self) -> _SetEagerMode:
        return self

    def __exit__(self, *exc_info) -> None:
        set_eager_mode(self._previous)


def sync() -> None:
    """Runs the pending defer_and_fuse graphs now (without waiting for their results).

    A training loop in defer_and_fuse mode calls it once per step, so that every step
    records, and reuses, the same fused program. It does nothing in the other modes.

    >>> loss.backward(); optimizer.step(); torch_tpu.sync()
    """
    eager_buckets.flush()
    _C._sync()


def _sync_after_optimizer_step(optimizer, args, kwargs) -> None:
    """In defer_and_fuse mode, each optimizer step ends the pending graph. A training loop
    that never calls torch_tpu.sync() (nor reads its loss) would otherwise be cut only by
    the size limit, at another op in every step: a new graph to compile almost every time.
    Cut at the step, every step records the same graph, compiled once. A loop that syncs
    itself after the step finds the graph already run: its sync does nothing."""
    if torch.compiler.is_compiling() or _C._get_eager_mode() != "defer_and_fuse":
        return
    eager_buckets.flush()
    _C._sync()


def _pause_buckets_for_optimizer_step(optimizer, args, kwargs) -> None:
    """Eager size buckets do not record an optimizer's step (eager_buckets explains why);
    the post-hook above records again."""
    if torch.compiler.is_compiling() or _C._get_eager_mode() != "defer_and_fuse":
        return
    eager_buckets.pause_for_optimizer_step()


def _install_optimizer_step_sync() -> None:
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    register_optimizer_step_pre_hook(_pause_buckets_for_optimizer_step)
    register_optimizer_step_post_hook(_sync_after_optimizer_step)
