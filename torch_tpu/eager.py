"""Eager execution modes.

``strict`` (the default): each operator is its own cached program, enqueued
asynchronously. ``debug``: each operator is awaited before the next, so a failure
surfaces at the operator that caused it, named in the error; set
``TORCH_TPU_DEBUG_NANS=1`` as well to name the first operator that produces a NaN or
an infinity. ``defer_and_fuse`` is not implemented yet and raises NotImplementedError.

The process-wide mode comes from ``TORCH_TPU_EAGER_MODE`` (or ``TPU_LAUNCH_BLOCKING=1``
for debug). Switching waits for the work already enqueued.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch_tpu import _C


def set_eager_mode(mode: str) -> None:
    """Sets the eager mode of the process: ``"strict"`` or ``"debug"``.

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
