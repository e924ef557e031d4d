"""The versions torch_tpu is built and tested against, checked at import."""

from __future__ import annotations

import importlib.metadata

import torch

TORCH_VERSION = "2.13.0"
CPU_PLUGIN_PACKAGE = "xla-cpu-pjrt"
CPU_PLUGIN_VERSION = "0.0.1"


def check_torch() -> None:
    installed = torch.__version__.split("+")[0]
    if installed != TORCH_VERSION:
        raise ImportError(
            f"torch_tpu {TORCH_VERSION} needs torch=={TORCH_VERSION}, "
            f"but torch {torch.__version__} "
            f"is installed. Install the matching torch: pip install torch=={TORCH_VERSION}"
        )


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
