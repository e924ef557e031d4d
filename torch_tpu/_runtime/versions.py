"""The versions torch_tpu is built and tested against, checked at import.

GPU images and TPU VMs come with their own torch, so torch_tpu builds against a range of
releases (the C++ differences are in ``csrc/aten/torch_compat.h``; ``scripts/
check_torch_headers.sh`` compiles against another release's headers). The extension itself
fits only the torch it was built against: CMake records that version next to it
(``torch_tpu/_C.torch_version``), and a mismatch is reported here by name rather than as an
undefined symbol from the dynamic loader.
"""

from __future__ import annotations

import importlib.metadata
import os

import torch

# The torch releases (major.minor) torch_tpu builds against; CI tests the last one.
SUPPORTED_TORCH = ("2.11", "2.12", "2.13")
TESTED_TORCH = "2.13.0"
CPU_PLUGIN_PACKAGE = "xla-cpu-pjrt"
CPU_PLUGIN_VERSION = "0.0.1"

# Written by CMake beside the extension: the torch version it was compiled against.
BUILD_RECORD = os.path.join(os.path.dirname(os.path.dirname(__file__)), "_C.torch_version")


def _release(version: str) -> str:
    """'2.11.0+cu130' -> '2.11.0'."""
    return version.split("+")[0]


def check_torch(installed: str | None = None, built_with: str | None = None) -> None:
    """Raises ImportError, naming the versions and the fix, when the running torch is outside
    SUPPORTED_TORCH or differs from the torch the extension was built against.

    >>> check_torch("2.10.0", None)
    Traceback (most recent call last):
    ImportError: torch_tpu supports torch 2.11, 2.12 and 2.13, but torch 2.10.0 is installed...
    """
    installed = _release(installed if installed is not None else torch.__version__)
    minor = ".".join(installed.split(".")[:2])
    if minor not in SUPPORTED_TORCH:
        supported = ", ".join(SUPPORTED_TORCH[:-1]) + " and " + SUPPORTED_TORCH[-1]
        raise ImportError(
            f"torch_tpu supports torch {supported}, but torch {installed} is installed. "
            f"Install one of them (CI tests {TESTED_TORCH}): pip install torch=={TESTED_TORCH}"
        )
    if built_with is None:
        built_with = _built_with()
    if built_with and _release(built_with) != installed:
        raise ImportError(
            f"torch_tpu's extension was built against torch {_release(built_with)}, but torch "
            f"{installed} is installed: an extension fits only the torch it was built with. "
            "Rebuild it against this torch: pip install --no-build-isolation --no-deps -e ."
        )


def _built_with() -> str | None:
    """The version in BUILD_RECORD, or None where there is none (an older build)."""
    try:
        with open(BUILD_RECORD, encoding="utf-8") as record:
            return record.read().strip() or None
    except OSError:
        return None


def check_cpu_plugin(platform: str) -> None:
    if platform != "cpu":
        return
    try:
        installed = importlib.metadata.version(CPU_PLUGIN_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return  # found by path only; the C++ side still checks its API version
    if installed != CPU_PLUGIN_VERSION:
        raise ImportError(
            f"torch_tpu is tested with {CPU_PLUGIN_PACKAGE}=={CPU_PLUGIN_VERSION}, but "
            f"{installed} is installed: pip install {CPU_PLUGIN_PACKAGE}=={CPU_PLUGIN_VERSION}"
        )
