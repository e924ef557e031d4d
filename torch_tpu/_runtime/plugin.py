"""Finding the PJRT plugin that serves the ``tpu`` device.

Order (see DESIGN.md): ``TORCH_TPU_PJRT_PLUGIN`` (a path) wins; else
``TORCH_TPU_PLATFORM`` (tpu, cuda or cpu) picks a platform; else the first of
tpu, cuda, cpu whose plugin package is installed and whose device this machine has (libtpu
and the CUDA plugin are also installed to compile for TPUs and GPUs without one:
torch_tpu.targets).
"""

from __future__ import annotations

import glob
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


# Google's PCI vendor id, and the device ids of its TPU chips (v3, v4, v5p, v5e, v6e, TPU7x
# and one more, as JAX's hardware_utils lists them): Google's virtual NIC and disks share the
# vendor id, so the device id must match too.
_GOOGLE_PCI_VENDOR = "0x1ae0"
_TPU_PCI_DEVICES = {"0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076"}


def tpu_present(root: str = "/") -> bool:
    """Whether this machine has a TPU, looked for as JAX's cloud-TPU start-up does, without
    loading libtpu: an accel device node (TPU v2-v4), or a Google PCI device with a TPU's
    device id (v5e on).

    libtpu installed on a machine without a TPU must not be picked: creating its client asks
    the cloud metadata server for TPU settings (30 tries a variable, minutes) before failing.

    >>> tpu_present("/nonexistent")
    False
    """
    if glob.glob(os.path.join(root, "dev", "accel[0-9]*")):
        return True
    for vendor in glob.glob(os.path.join(root, "sys", "bus", "pci", "devices", "*", "vendor")):
        try:
            with open(vendor) as f:
                if f.read().strip() != _GOOGLE_PCI_VENDOR:
                    continue
            with open(os.path.join(os.path.dirname(vendor), "device")) as f:
                if f.read().strip() in _TPU_PCI_DEVICES:
                    return True
        except OSError:
            continue
    return False


def nvidia_gpu_present(root: str = "/") -> bool:
    """Whether this machine has an NVIDIA GPU the driver has set up (a /dev/nvidiaN node).

    The CUDA plugin is also installed for compiling for GPUs without one; on such a machine
    its client fails ("No visible GPU devices"), so discovery passes it over.

    >>> nvidia_gpu_present("/nonexistent")
    False
    """
    return bool(glob.glob(os.path.join(root, "dev", "nvidia[0-9]*")))


_DEVICE_PRESENT = {"tpu": tpu_present, "cuda": nvidia_gpu_present}


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
        if wanted == "tpu" and path is not None and not tpu_present():
            # libtpu would ask the cloud metadata server for minutes, then fail.
            raise PluginNotFoundError(
                "TORCH_TPU_PLATFORM=tpu but this machine has no TPU (no /dev/accel* device and "
                "no Google PCI device). libtpu is installed, which also compiles for TPUs "
                "without one (python -m torch_tpu.target_check); to start it anyway, set "
                f"TORCH_TPU_PJRT_PLUGIN={path}"
            )
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
        present = _DEVICE_PRESENT.get(platform, lambda: True)
        if path is not None and present():
            return path, platform
        module, library, _ = _PLUGIN_PACKAGES[platform]
        if path is not None:
            searched.append(f"{library} (installed, but this machine has no {platform} device)")
        else:
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


def client_options(platform: str) -> list[tuple[str, bool | int | float | str]]:
    """Options for creating the PJRT client of ``platform``.

    On the CPU plugin, ``TORCH_TPU_CPU_DEVICES`` sets how many ``tpu`` devices there
    are; under torchrun, LOCAL_WORLD_SIZE; otherwise one per usable core, at most 4
    (default_cpu_devices). On the GPU plugin, the options JAX passes it (gpu_client_options).

    >>> client_options("tpu")
    []
    """
    if platform == "cuda":
        return gpu_client_options(os.environ)
    if platform != "cpu":
        return []
    text = os.environ.get("TORCH_TPU_CPU_DEVICES", "").strip()
    if not text:
        # Under torchrun, one device per local rank: each rank uses its own, and
        # ranks x devices XLA worker threads must not swamp the host.
        text = os.environ.get("LOCAL_WORLD_SIZE", "").strip() if "LOCAL_RANK" in os.environ else ""
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


GPU_ALLOCATORS = ("default", "platform", "bfc", "cuda_async")


def _setting(env, name: str, *fallbacks: str) -> tuple[str, str] | None:
    """(variable, value) of the first of `name` and JAX's `fallbacks` that is set."""
    for variable in (name, *fallbacks):
        value = env.get(variable, "").strip()
        if value:
            return variable, value
    return None


def gpu_client_options(env) -> list[tuple[str, bool | int | float | str]]:
    """The GPU plugin's client options, as JAX's CUDA plugin passes them, read from `env`.

    XLA's GPU client preallocates 75% of the GPU's memory by default. A process that also
    uses ``torch.cuda`` would find the GPU full, so torch_tpu asks for no preallocation
    unless told otherwise: XLA then grows its pool as programs need memory, up to its
    memory fraction.

    - ``TORCH_TPU_GPU_PREALLOCATE=0|1`` (default 0; JAX's XLA_PYTHON_CLIENT_PREALLOCATE)
    - ``TORCH_TPU_GPU_MEMORY_FRACTION=0.x`` (the share XLA may use, default the plugin's
      0.75; JAX's XLA_CLIENT_MEM_FRACTION / XLA_PYTHON_CLIENT_MEM_FRACTION)
    - ``TORCH_TPU_GPU_ALLOCATOR=default|platform|bfc|cuda_async`` (JAX's
      XLA_PYTHON_CLIENT_ALLOCATOR)

    >>> gpu_client_options({"TORCH_TPU_GPU_MEMORY_FRACTION": "0.5"})[2:]
    [('preallocate', False), ('memory_fraction', 0.5)]
    """
    options: list[tuple[str, bool | int | float | str]] = [("platform_name", "cuda")]
    allocator = _setting(env, "TORCH_TPU_GPU_ALLOCATOR", "XLA_PYTHON_CLIENT_ALLOCATOR")
    name = allocator[1].lower() if allocator else "default"
    if name not in GPU_ALLOCATORS:
        raise ValueError(
            f"{allocator[0]}={allocator[1]!r}: expected one of {', '.join(GPU_ALLOCATORS)}"
        )
    options.append(("allocator", name))
    preallocate = _setting(env, "TORCH_TPU_GPU_PREALLOCATE", "XLA_PYTHON_CLIENT_PREALLOCATE")
    if preallocate is None:
        options.append(("preallocate", False))
    elif preallocate[1].lower() in ("0", "false"):
        options.append(("preallocate", False))
    elif preallocate[1].lower() in ("1", "true"):
        options.append(("preallocate", True))
    else:
        raise ValueError(f"{preallocate[0]}={preallocate[1]!r}: expected 0 or 1")
    fraction = _setting(
        env,
        "TORCH_TPU_GPU_MEMORY_FRACTION",
        "XLA_CLIENT_MEM_FRACTION",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
    )
    if fraction is not None:
        try:
            value = float(fraction[1])
        except ValueError:
            value = -1.0
        if not 0.0 < value <= 1.0:
            raise ValueError(
                f"{fraction[0]}={fraction[1]!r}: expected a share of the GPU's memory in (0, 1]"
            )
        options.append(("memory_fraction", value))
    return options
