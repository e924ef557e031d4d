"""Peak dense matmul FLOP/s and memory capacity per device (MFU's denominator, and
what TorchTitan's memory percentages divide by).

On TPUs it is the published dense bf16 figure of the chip, the same table TorchTitan
uses, keyed by the canonical names ``device_name`` returns ("TPU v5e", "TPU v6e", ...).
On the CPU platform there is no datasheet: the rate is measured once, by timing large
float32 and bfloat16 matmuls on the device, and kept (per host, cores and plugin) in a
JSON file beside the compile cache, so later processes read it. CPU devices share the
host's cores, so under torchrun each device gets the host's rate divided by the ranks on
the host (``LOCAL_WORLD_SIZE``). ``TORCH_TPU_PEAK_FLOPS`` overrides all of this. Ranks
that start together on a fresh host take a lock, so one measures and the others read.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform as _platform
import time

import torch

# PJRT device kinds as libtpu reports them, and the names TorchTitan's table knows.
_TPU_NAMES = {
    "TPU v2": "TPU v2",
    "TPU v3": "TPU v3",
    "TPU v4": "TPU v4",
    "TPU v4 lite": "TPU v4i",
    "TPU v5 lite": "TPU v5e",
    "TPU v5e": "TPU v5e",
    "TPU v5": "TPU v5p",
    "TPU v5p": "TPU v5p",
    "TPU v6 lite": "TPU v6e",
    "TPU v6e": "TPU v6e",
    "TPU7x": "TPU v7",
    "TPU v7": "TPU v7",
}

# Dense bf16 FLOP/s per device (https://cloud.google.com/tpu/docs/system-architecture-tpu-vm);
# v7 exposes each of its two TensorCores as a device.
TPU_PEAK_FLOPS = {
    "TPU v2": 45e12 / 2,
    "TPU v3": 123e12 / 2,
    "TPU v4": 275e12,
    "TPU v5e": 197e12,
    "TPU v5p": 459e12,
    "TPU v6e": 918e12,
    "TPU v7": 2307e12 / 2,
}

# HBM per device (https://cloud.google.com/tpu/docs/system-architecture-tpu-vm).
TPU_HBM_BYTES = {
    "TPU v2": 8 * 2**30,
    "TPU v3": 16 * 2**30,
    "TPU v4": 32 * 2**30,
    "TPU v5e": 16 * 2**30,
    "TPU v5p": 95 * 10**9,
    "TPU v6e": 32 * 2**30,
    "TPU v7": 96 * 10**9,
}

# Dense bf16 FLOP/s of NVIDIA GPUs (datasheets, without sparsity), matched against the
# device's name ("NVIDIA H200", "NVIDIA H100 80GB HBM3", ...), the longest key first.
GPU_PEAK_FLOPS = {
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "GH200": 989e12,
    "H200": 989e12,
    "H100": 989e12,
    "H800": 989e12,
    "B200": 2250e12,
    "A100": 312e12,
    "L40S": 362e12,
    "L4": 121e12,
}

_MEASURE_SIZE = 1024
_FILE = "peak_flops.json"


def canonical_name(kind: str) -> str:
    """The name TorchTitan and Cloud TPU docs use for a PJRT device kind."""
    return _TPU_NAMES.get(kind, kind)


def _host_key(platform: str, plugin_version: str) -> str:
    cpu = _platform.processor() or _platform.machine()
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform}|{plugin_version}|{cpu}|{cores} cores"


def _time_matmul(device: torch.device, dtype: torch.dtype, size: int) -> float:
    """FLOP/s of the best of a few timed square matmuls. The operands are not random:
    drawing them would advance the device's generator, and a program's random numbers
    must not depend on whether this process happened to measure."""
    a = torch.full((size, size), 0.5, device=device, dtype=dtype)
    b = torch.full((size, size), 0.25, device=device, dtype=dtype)
    (a @ b).sum().item()  # compile and warm up
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        c = a @ b
        torch.tpu.synchronize(device)
        best = min(best, time.perf_counter() - start)
        del c
    return 2 * size**3 / best


def measure(device: torch.device) -> float:
    """The best dense matmul rate of float32 and bfloat16 on ``device``, in FLOP/s."""
    dtypes = (torch.float32, torch.bfloat16)
    return max(_time_matmul(device, dtype, _MEASURE_SIZE) for dtype in dtypes)


def _cache_file() -> str | None:
    from torch_tpu import cache

    directory = cache.directory()
    return os.path.join(directory, _FILE) if directory else None


_measured: dict[str, float] = {}


def _read_table(file) -> dict[str, float]:
    file.seek(0)
    try:
        return json.loads(file.read() or "{}")
    except ValueError:
        return {}


def host_peak_flops(device: torch.device, platform: str, plugin_version: str) -> float:
    """The host's measured matmul rate, from the file if another process measured it."""
    key = _host_key(platform, plugin_version)
    if key in _measured:
        return _measured[key]
    path = _cache_file()
    if path is None:
        _measured[key] = measure(device)
        return _measured[key]
    try:
        with open(path, "a+") as file:
            # Held while measuring: ranks on one host measuring at once would each get a
            # share of the cores and record too low a rate.
            fcntl.flock(file, fcntl.LOCK_EX)
            table = _read_table(file)
            if key not in table:
                table[key] = measure(device)
                file.seek(0)
                file.truncate()
                json.dump(table, file, indent=1)
                file.flush()
            _measured[key] = float(table[key])
    except OSError:  # a read-only cache only costs a new measurement next time
        _measured[key] = measure(device)
    return _measured[key]


def peak_flops(name: str, platform: str, plugin_version: str, device: torch.device) -> float:
    """Peak dense FLOP/s of one device; see the module's docstring for where it comes from."""
    override = os.environ.get("TORCH_TPU_PEAK_FLOPS", "").strip()
    if override:
        try:
            value = float(override)
        except ValueError:
            value = -1.0
        if value <= 0:
            raise ValueError(f"TORCH_TPU_PEAK_FLOPS={override!r}: expected a positive number")
        return value
    if name in TPU_PEAK_FLOPS:
        return TPU_PEAK_FLOPS[name]
    if platform == "cpu":
        sharing = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        return host_peak_flops(device, platform, plugin_version) / max(sharing, 1)
    if platform in ("cuda", "gpu"):
        return gpu_peak_flops(name)
    return float("nan")  # an unknown chip: no figure we could stand behind


def gpu_peak_flops(name: str) -> float:
    """The datasheet's dense bf16 FLOP/s of an NVIDIA GPU by name; NaN for one not listed."""
    for key in sorted(GPU_PEAK_FLOPS, key=len, reverse=True):
        if key in name:
            return GPU_PEAK_FLOPS[key]
    return float("nan")


def capacity_bytes(name: str, host_bytes: int) -> int:
    """A device's memory: the chip's HBM on TPUs, else the host's (the CPU platform)."""
    return TPU_HBM_BYTES.get(name, host_bytes)
