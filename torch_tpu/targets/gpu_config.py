"""The GPU compiler's description of a GPU it compiles for without one.

The CUDA plugin compiles for a topology only when given a ``stream_executor.GpuTargetConfigProto``
in protobuf text format (``target_config``): what the GPU would report of itself if present.
It ships none, and an incomplete one is accepted at creation and then kills the process inside
the compiler (SIGFPE), so each GPU here is described in full from its datasheet and written out
by ``target_config()``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    name: str  # what the device reports: "NVIDIA H100 80GB HBM3"
    compute_capability: tuple[int, int]
    cores: int  # streaming multiprocessors
    clock_ghz: float
    memory_bytes: int
    memory_bandwidth: int  # bytes/s
    l2_bytes: int
    shared_memory_per_core: int
    shared_memory_per_block_optin: int
    pcie_bandwidth: int = 32 * 2**30
    nvlink_links: int = 18


GPUS = {
    "a100": GpuSpec(
        "NVIDIA A100-SXM4-80GB",
        (8, 0),
        108,
        1.41,
        85_198_045_184,
        2_039_000_000_000,
        40 * 2**20,
        167_936,
        166_912,
        pcie_bandwidth=16 * 2**30,
        nvlink_links=12,
    ),
    "h100": GpuSpec(
        "NVIDIA H100 80GB HBM3",
        (9, 0),
        132,
        1.98,
        84_942_979_072,
        3_352_320_000_000,
        50 * 2**20,
        233_472,
        232_448,
    ),
    "h200": GpuSpec(
        "NVIDIA H200",
        (9, 0),
        132,
        1.98,
        150_754_820_096,
        4_800_000_000_000,
        50 * 2**20,
        233_472,
        232_448,
    ),
    "b200": GpuSpec(
        "NVIDIA B200",
        (10, 0),
        148,
        1.965,
        191_525_486_592,
        8_000_000_000_000,
        126 * 2**20,
        233_472,
        232_448,
        pcie_bandwidth=64 * 2**30,
    ),
}


def target_config(chip: str) -> str:
    """The text-format GpuTargetConfigProto of ``chip`` ("h100", ...).

    >>> "core_count: 132" in target_config("h100")
    True
    """
    spec = GPUS[chip]
    major, minor = spec.compute_capability
    fields = {
        "threads_per_block_limit": 1024,
        "threads_per_warp": 32,
        "shared_memory_per_block": 49152,
        "shared_memory_per_core": spec.shared_memory_per_core,
        "threads_per_core_limit": 2048,
        "core_count": spec.cores,
        "fpus_per_core": 128 if major >= 9 else 64,
        "block_dim_limit_x": 2147483647,
        "block_dim_limit_y": 65535,
        "block_dim_limit_z": 65535,
        "memory_bandwidth": spec.memory_bandwidth,
        "l2_cache_size": spec.l2_bytes,
        "clock_rate_ghz": spec.clock_ghz,
        "device_memory_size": spec.memory_bytes,
        "shared_memory_per_block_optin": spec.shared_memory_per_block_optin,
    }
    lines = ["gpu_device_info {"]
    lines += [f"  {key}: {value}" for key, value in fields.items()]
    lines += [
        f"  cuda_compute_capability {{ major: {major} minor: {minor} }}",
        "  registers_per_core_limit: 65536",
        "  registers_per_block_limit: 65536",
        "  thread_dim_limit_x: 1024",
        "  thread_dim_limit_y: 1024",
        "  thread_dim_limit_z: 64",
        '  device_vendor: "NVIDIA Corporation"',
        f'  platform_version: "Compute Capability {major}.{minor}"',
        f'  name: "{spec.name}"',
        "  device_address_bits: 64",
        f"  pcie_bandwidth: {spec.pcie_bandwidth}",
        "  ecc_enabled: true",
        f"  device_interconnect_info {{ active_links: {spec.nvlink_links} }}",
        "}",
        'platform_name: "CUDA"',
        "dnn_version_info { major: 9 minor: 10 patch: 0 }",
        f'device_description_str: "{spec.name}"',
    ]
    return "\n".join(lines) + "\n"
