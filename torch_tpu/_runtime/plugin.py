"""Finding the PJRT plugin that serves the ``tpu`` device.

Order (see DESIGN.md): ``TORCH_TPU_PJRT_PLUGIN`` (a path) wins; else
``TORCH_TPU_PLATFORM`` (tpu, cuda or cpu) picks a platform; else the first of
tpu, cuda, cpu whose plugin package is installed.
"""

from __future__ import annotations

import importlib.util
import os

PLATFORMS = ("tpu", "cuda", "cpu")

# platform -> (python package holding the plugin, library file in it, pip package)
_PLUGIN_PACKAGES = {
    "tpu": ("libtpu", "libtpu.so", "libtpu"),
    "cuda": ("jax_plugins.xla_cuda13", "xla_cuda_plugin.so", "jax-cuda13-pjrt"),
    "cpu": ("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so", "xla-cpu-pjrt==0.0.1"),
}


class PluginNotFoundError(ImportError):
    """No PJRT plugin could be found; the message lists what was searched."""


def _installed_path(platform: str) -> str | None:
    module, library, _ = _PLUGIN_PACKAGES[platform]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, library)
        if os.path.isfile(path):
            return path
    return None


def _install_hint() -> str:
    return "; ".join(f"{p}: pip install {_PLUGIN_PACKAGES[p][2]}" for p in PLATFORMS)


def find_plugin() -> tuple[str, str]:
    """Returns ``(path, platform)`` of the plugin to load, or raises PluginNotFoundError.

    >>> path, platform = find_plugin()  # e.g. (".../xla_cpu_pjrt.so", "cpu")
    """
    explicit = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if explicit:
        if not os.path.isfile(explicit):
            raise PluginNotFoundError(
                f"TORCH_TPU_PJRT_PLUGIN={explicit!r} does not name a file. "
                "Point it at a PJRT plugin .so, or unset it to use an installed one "
                f"({_install_hint()})."
            )
        return explicit, os.environ.get("TORCH_TPU_PLATFORM", "custom")

    wanted = os.environ.get("TORCH_TPU_PLATFORM")
    if wanted:
        if wanted not in PLATFORMS:
            raise PluginNotFoundError(
                f"TORCH_TPU_PLATFORM={wanted!r} is not one of {', '.join(PLATFORMS)}."
            )
        path = _installed_path(wanted)
        if path is None:
            module, library, package = _PLUGIN_PACKAGES[wanted]
            raise PluginNotFoundError(
                f"TORCH_TPU_PLATFORM={wanted} but its PJRT plugin is not installed "
                f"(looked for {library} in the Python package {module}). "
                f"Install it with: pip install {package}"
            )
        return path, wanted

    searched = []
    for platform in PLATFORMS:
        path = _installed_path(platform)
        if path is not None:
            return path, platform
        module, library, _ = _PLUGIN_PACKAGES[platform]
        searched.append(f"{library} in {module}")
    raise PluginNotFoundError(
        "torch_tpu found no PJRT plugin. Searched: " + ", ".join(searched) + ". "
        f"Install one ({_install_hint()}), or set TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so."
    )


def usable_cores() -> int:
    """The cores the CPU plugin counts: ``PJRT_NPROC`` where set, else the cores this
    process may run on (its CPU affinity, else the machine's count)."""
    nproc = os.environ.get("PJRT_NPROC", "").strip()
    if nproc.isdigit() and int(nproc) > 0:
        return int(nproc)
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_cpu_devices(cores: int) -> int:
    """The CPU plugin's ``tpu`` device count when nothing sets it: one per core, at most 4
    (a TPU VM host's chip count).

    The plugin runs max(cores, devices) XLA worker threads: more devices than cores would
    add threads that spin beside Python on cores already busy (4 devices on 2 cores made
    the compiled GPT step about 12% slower than 2).

    >>> [default_cpu_devices(cores) for cores in (1, 2, 3, 4, 64)]
    [1, 2, 3, 4, 4]
    """
    return max(1, min(4, cores))


def client_options(platform: str) -> list[tuple[str, int]]:
    """Options for creating the PJRT client of ``platform``.

    On the CPU plugin, ``TORCH_TPU_CPU_DEVICES`` sets how many ``tpu`` devices there
    are; under torchrun, LOCAL_WORLD_SIZE; otherwise one per usable core, at most 4
    (default_cpu_devices).

    >>> client_options("tpu")
    []
    """
    text = os.environ.get("TORCH_TPU_CPU_DEVICES", "").strip()
    if platform == "cpu" and not text:
        # Under torchrun, one device per local rank: each rank uses its own, and
        # ranks x devices XLA worker threads must not swamp the host.
        text = os.environ.get("LOCAL_WORLD_SIZE", "").strip() if "LOCAL_RANK" in os.environ else ""
    if platform != "cpu":
        return []
    if not text:
        return [("cpu_device_count", default_cpu_devices(usable_cores()))]
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= 2048:
        raise ValueError(
            f"TORCH_TPU_CPU_DEVICES={text!r}: expected a whole number of devices from 1 to 2048"
        )
    return [("cpu_device_count", count)]
