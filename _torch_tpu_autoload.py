"""PyTorch's device-backend autoload entry point (group ``torch.backends``) for torch_tpu.

It lives outside the ``torch_tpu`` package on purpose: loading an entry point imports
its module's package, and importing ``torch_tpu`` starts the backend, which the checks
below must be able to prevent.

With torch_tpu installed, ``import torch`` imports torch_tpu too, so programs that never
name torch_tpu (``torchrun -m torchtitan.train``, PyTorch's own test files) find the
``tpu`` device. ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (PyTorch's switch) or
``TORCH_TPU_AUTOLOAD=0`` turns it off.

Two processes are left alone, because they must not take a chip: torchrun's launcher
(on a TPU VM the chips belong to its workers, and libtpu lets one process hold them)
and processes that set ``TORCH_TPU_AUTOLOAD=0``. If the backend cannot start (no
plugin, chips held by another process), ``import torch`` still succeeds and a warning
says why: a CPU-only program must not break because torch_tpu is installed.
"""

from __future__ import annotations

import os
import sys
import warnings

_LAUNCHER_SCRIPTS = ("torchrun", os.path.join("torch", "distributed", "run.py"))
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _is_torchrun_launcher() -> bool:
    """torchrun, or ``python -m torch.distributed.run``: while runpy imports the module's
    package (and so torch), ``sys.argv[0]`` is still "-m", so the interpreter's own
    command line is read too. torchrun's workers have LOCAL_RANK set."""
    if "LOCAL_RANK" in os.environ:
        return False
    program = sys.argv[0] if sys.argv else ""
    if program.endswith(_LAUNCHER_SCRIPTS):
        return True
    command = list(getattr(sys, "orig_argv", []))
    for index, word in enumerate(command[:-1]):
        if word == "-m" and command[index + 1] in _LAUNCHER_MODULES:
            return True
        if word.startswith("-m") and word[2:] in _LAUNCHER_MODULES:
            return True
    return False


def load() -> None:
    if os.environ.get("TORCH_TPU_AUTOLOAD", "1") == "0" or _is_torchrun_launcher():
        return
    try:
        import torch_tpu  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any failure must leave torch importable
        message = (
            f"torch_tpu is installed but could not start, so there is no 'tpu' device in "
            f"this process: {type(error).__name__}: {error}. Import torch_tpu to see the "
            f"whole error; set TORCH_TPU_AUTOLOAD=0 to stop loading it with torch."
        )
        try:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        except Exception:  # noqa: BLE001 - warnings turned into errors (-W error)
            sys.stderr.write(f"warning: {message}\n")
