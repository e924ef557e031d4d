"""Matmul precision: what ``torch.set_float32_matmul_precision`` means on tpu.

Every float32 dot and convolution carries XLA's ``precision_config``, chosen from PyTorch's
setting when the op is lowered (it is part of the program text, so changing the setting
compiles each program once more, never again):

| ``torch.set_float32_matmul_precision`` | XLA precision | on a TPU |
|---|---|---|
| ``"highest"`` (PyTorch's default) | HIGHEST | full float32 (6 bfloat16 passes) |
| ``"high"`` | HIGH | 3 bfloat16 passes (about float32's accuracy) |
| ``"medium"`` | DEFAULT | one bfloat16 pass (TorchTPU's default) |

The CPU plugin computes float32 in every case; the CUDA plugin may use TF32 below HIGHEST.
TorchTPU's names ``torch.tpu.Precision`` and ``torch.tpu.precision(...)`` set the same thing.
"""

from __future__ import annotations

import enum

import torch


class Precision(enum.Enum):
    """TorchTPU's names of XLA's dot precisions; each value is PyTorch's name."""

    DEFAULT = "medium"
    HIGH = "high"
    HIGHEST = "highest"


class precision:  # noqa: N801  (TorchTPU's name, used as a function and a context manager)
    """``torch.tpu.precision(mode)``: sets the float32 matmul precision now (a
    ``torch.tpu.Precision`` or PyTorch's "highest", "high", "medium"); as a context
    manager, puts the previous one back when the block ends.

    >>> with torch.tpu.precision(torch.tpu.Precision.DEFAULT):  # one bfloat16 pass on a TPU
    ...     y = x @ w
    """

    def __init__(self, mode: Precision | str):
        name = mode.value if isinstance(mode, Precision) else str(mode).lower()
        if isinstance(mode, str) and mode.upper() in Precision.__members__:
            name = Precision[mode.upper()].value
        if name not in ("highest", "high", "medium"):
            raise ValueError(
                f"unknown matmul precision {mode!r}: use torch.tpu.Precision.DEFAULT, HIGH or "
                "HIGHEST, or 'medium', 'high', 'highest'"
            )
        self._previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(name)

    def __enter__(self) -> precision:
        return self

    def __exit__(self, *exc_info) -> None:
        torch.set_float32_matmul_precision(self._previous)
