"""The ``torch.tpu`` device module: device selection, synchronization, random
state and memory statistics, named as in ``torch.cuda``.

>>> torch.tpu.device_count() >= 1
True
>>> torch.tpu.memory_allocated()  # doctest: +SKIP
0
"""

from __future__ import annotations

from typing import Any

import torch

from torch_tpu import _C
from torch_tpu import eager_buckets as _eager_buckets
from torch_tpu._runtime import peak_flops as _peak_flops
from torch_tpu.eager import EagerMode
from torch_tpu.eager import _SetEagerMode as set_eager_mode  # noqa: F401  (TorchTPU's name)
from torch_tpu.precision import Precision, precision  # noqa: F401  (TorchTPU's names)


def _index(device: Any = None) -> int:
    if device is None:
        return _C._current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"expected a tpu device, got {device}")
    return _C._current_device() if device.index is None else device.index


def is_available() -> bool:
    """Whether a tpu device exists (always true once torch_tpu imported)."""
    return _C._device_count() > 0


def is_initialized() -> bool:
    return _C._is_initialized()


def _is_in_bad_fork() -> bool:
    return False


def _lazy_init() -> None:
    """The runtime is initialized when torch_tpu is imported; nothing is deferred."""


def device_count() -> int:
    """The number of tpu devices the PJRT plugin exposes."""
    return _C._device_count()


def current_device() -> int:
    """The index of the current tpu device of this thread."""
    return _C._current_device()


def set_device(device: Any) -> None:
    """Makes ``device`` (an index, ``"tpu:1"`` or a torch.device) the current tpu device."""
    _C._set_device(_index(device))


class device:
    """Context manager that changes the current tpu device.

    >>> with torch.tpu.device(0):
    ...     x = torch.zeros(2, device="tpu")
    """

    def __init__(self, device: Any):
        self.index = _index(device)
        self.previous = -1

    def __enter__(self):
        self.previous = _C._current_device()
        _C._set_device(self.index)

    def __exit__(self, *exc):
        _C._set_device(self.previous)
        return False


def synchronize(device: Any = None) -> None:
    """Waits until every program enqueued so far has finished (raising its error if one failed)."""
    _eager_buckets.flush()  # ops recorded under eager size buckets run first
    _C._synchronize()


def get_device_name(device: Any = None) -> str:
    """The device's name: ``"cpu"`` on the CPU plugin; on TPUs the Cloud TPU name of the
    chip (``"TPU v5e"``, ``"TPU v6e"``, ...), which TorchTitan's peak-FLOPs table reads."""
    return _peak_flops.canonical_name(_C._device_properties(_index(device))["kind"])


class _DeviceProperties:
    """What ``torch.tpu.get_device_properties`` reports, as ``torch.cuda``'s does:
    ``name``, ``kind`` (the plugin's own word for the device), ``platform``,
    ``total_memory`` (the TORCH_TPU_HBM_BYTES cap, else the plugin's reported HBM, or the
    half the host's physical memory on the CPU platform: ``mem_get_info``'s total) and
    ``peak_flops`` (dense matmul FLOP/s: the chip's table value, measured on the CPU)."""

    def __init__(self, index: int):
        info = _C._device_properties(index)
        plugin = _C._plugin_info()
        self.index = index
        self.kind = info["kind"]
        self.name = _peak_flops.canonical_name(self.kind)
        self.description = info["description"]
        self.platform = plugin["platform_name"]
        self.platform_version = plugin["platform_version"]
        self.pjrt_api_version = plugin["api_version"]
        self.total_memory = mem_get_info(index)[1]

    @property
    def peak_flops(self) -> float:
        return _peak_flops.peak_flops(
            self.name, self.platform, self.platform_version, torch.device("tpu", self.index)
        )

    def __repr__(self) -> str:
        return (
            f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
            f"pjrt_api_version='{self.pjrt_api_version}', total_memory={self.total_memory})"
        )


def get_device_properties(device: Any = None) -> _DeviceProperties:
    """Name, platform (tpu/cuda/cpu), PJRT API version and memory cap of a device.

    >>> torch.tpu.get_device_properties(0).platform  # doctest: +SKIP
    'cpu'
    """
    index = _index(device)
    if not 0 <= index < device_count():
        raise ValueError(
            f"Invalid device index tpu:{index}: there are {device_count()} tpu devices"
        )
    return _DeviceProperties(index)


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The low-precision dtypes ``torch.autocast("tpu", dtype=...)`` accepts. PyTorch asks
    the device module for this before entering any tpu autocast region, even a disabled one
    (Llama's and Qwen's rotary embeddings open ``autocast(enabled=False)``).

    >>> torch.bfloat16 in torch.tpu.get_amp_supported_dtype()
    True
    """
    return [torch.bfloat16, torch.float16]


# --- random numbers -----------------------------------------------------------------


def default_generator(device: Any = None) -> torch.Generator:
    """The default torch.Generator of a tpu device."""
    return _C._default_generator(_index(device))


# Each call that reads or sets a generator's state first runs the draws recorded under eager
# size buckets: they happened before it.


def manual_seed(seed: int) -> None:
    """Seeds the current tpu device's generator."""
    _eager_buckets.flush()
    default_generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds the generators of every tpu device."""
    _eager_buckets.flush()
    for index in range(device_count()):
        default_generator(index).manual_seed(int(seed))


def seed() -> None:
    """Seeds the current device's generator with a random number."""
    _eager_buckets.flush()
    default_generator().seed()


def seed_all() -> None:
    _eager_buckets.flush()
    for index in range(device_count()):
        default_generator(index).seed()


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state(device: Any = "tpu") -> torch.Tensor:
    """The generator state of a device, as a uint8 CPU tensor."""
    _eager_buckets.flush()
    return default_generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "tpu") -> None:
    _eager_buckets.flush()
    default_generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# --- memory ---------------------------------------------------------------------------


def memory_stats(device: Any = None) -> dict[str, int]:
    """Counters of live tpu storages, keyed as in torch.cuda.memory_stats(). Nothing is
    cached, so active and reserved bytes equal allocated bytes."""
    stats = dict(_C._memory_stats(_index(device)))
    for kind in ("active_bytes", "reserved_bytes"):
        stats[f"{kind}.all.current"] = stats["allocated_bytes.all.current"]
        stats[f"{kind}.all.peak"] = stats["allocated_bytes.all.peak"]
    stats.setdefault("num_alloc_retries", 0)
    stats.setdefault("num_ooms", 0)
    return stats


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live tpu tensors' storages on the device."""
    return _C._memory_stats(_index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    """The peak of memory_allocated() since start or the last reset_peak_memory_stats()."""
    return _C._memory_stats(_index(device))["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    """Equal to memory_allocated(): torch_tpu keeps no cache of freed memory."""
    return memory_allocated(device)


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    """Nothing to release: freed tensors return their buffers to the plugin at once."""


def _set_chip_capacities() -> None:
    """Where a plugin on a TPU reports no memory limit, the chip's HBM from our table is the
    capacity (the runtime falls back to the host's memory, right only for the CPU platform)."""
    for index in range(_C._device_count()):
        stats = _C._memory_stats(index)
        if stats["limit_source"] != "half the host's physical memory":
            continue
        name = get_device_name(index)
        chip = _peak_flops.capacity_bytes(name, 0)
        if chip:
            _C._set_memory_capacity(index, chip, f"the HBM of a {name}")


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of a device. total is its capacity: the TORCH_TPU_HBM_BYTES cap if
    set, else what the PJRT plugin reports (the chip's HBM), else, on the CPU platform, half
    the host's physical memory. free is total minus what tensors hold; allocations beyond it
    raise torch.OutOfMemoryError."""
    stats = _C._memory_stats(_index(device))
    total = stats["limit_bytes"]
    return max(total - stats["allocated_bytes.all.current"], 0), total


# --- streams and events ---------------------------------------------------------------
#
# Each tpu device has one stream. PJRT runs a device's programs in the order their data
# dependencies require, so there is nothing a second stream could overlap or reorder:
# every Stream of a device, a "new" one included, is that stream (stream_id 0), and
# wait_stream / wait_event have nothing to wait for. Events do mark points in the work,
# time it (elapsed_time) and block on it (synchronize).


class Stream(torch.Stream):
    """A tpu stream, as ``torch.cuda.Stream``: ``query``, ``synchronize``, ``wait_event``,
    ``wait_stream``, ``record_event`` and use as a context manager. There is one stream per
    device, so every Stream of a device is the same stream.

    >>> s = torch.tpu.Stream()
    >>> with torch.tpu.stream(s):
    ...     y = torch.ones(2, device="tpu") * 2
    >>> s.synchronize()
    """

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if kwargs:  # stream_id/device_index/device_type, as PyTorch rebuilds streams
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, torch.device("tpu", _index(device)), priority=priority)


class _EventType(type):
    # PyTorch's Stream and Event methods accept only torch.Event itself, not subclasses,
    # so a tpu Event *is* a torch.Event; isinstance(e, torch.tpu.Event) checks its device.
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, torch.Event) and instance.device.type == "tpu"


class Event(metaclass=_EventType):
    """A tpu event, as ``torch.cuda.Event``: ``record``, ``query``, ``synchronize``, ``wait``
    and, with ``enable_timing=True``, ``elapsed_time`` (milliseconds between the moments
    the device finished the work before each event). Returns a ``torch.Event`` on a tpu
    device.

    >>> start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    >>> start.record(); y = torch.randn(64, 64, device="tpu") @ torch.randn(64, 64, device="tpu")
    >>> end.record(); end.synchronize()
    >>> start.elapsed_time(end) >= 0
    True
    """

    def __new__(
        cls,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        device: Any = None,
    ) -> torch.Event:
        if interprocess:
            raise NotImplementedError("tpu events cannot be shared between processes")
        return torch.Event(
            torch.device("tpu", _index(device)), enable_timing=enable_timing, blocking=blocking
        )


def current_stream(device: Any = None) -> Stream:
    """The current (and only) stream of a tpu device."""
    return Stream(device)


def default_stream(device: Any = None) -> Stream:
    """The default (and only) stream of a tpu device."""
    return Stream(device)


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` current; with one stream per device this only selects its device."""
    if stream is not None:
        set_device(stream.device_index)


class StreamContext:
    """Context manager selecting a stream (and its device), as ``torch.cuda.StreamContext``."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.previous = -1

    def __enter__(self):
        if self.stream is not None:
            self.previous = current_device()
            set_device(self.stream.device_index)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_device(self.previous)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """Selects ``stream`` for the block (``None`` selects nothing), as ``torch.cuda.stream``.

    >>> with torch.tpu.stream(torch.tpu.current_stream()):
    ...     x = torch.zeros(2, device="tpu")
    """
    return StreamContext(stream)


# --- device capability and mixed precision ------------------------------------------------


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """The TPU generation as ``(major, minor)``, parsed from the device kind the plugin
    reports: ``"TPU v4"`` gives ``(4, 0)``, ``"TPU v5 lite"`` ``(5, 0)``. Devices whose
    kind names no TPU generation (the ``cpu`` and ``cuda`` platforms) give ``(0, 0)``.
    Which dtypes a device supports is ``torch.accelerator.get_device_capability()``.

    >>> torch.tpu.get_device_capability()  # doctest: +SKIP
    (0, 0)
    """
    import re

    found = re.search(r"\bv(\d+)", get_device_name(device), re.IGNORECASE)
    return (int(found.group(1)), 0) if found else (0, 0)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Always true: every PJRT platform computes in bfloat16."""
    return True


def _set_autocast_default() -> None:
    # PyTorch's default autocast dtype for a backend is float16; a TPU computes in
    # bfloat16. PyTorch keeps autocast dtypes per thread, so this sets the importing
    # thread's; other threads pass dtype= or call torch.set_autocast_dtype("tpu", ...).
    torch.set_autocast_dtype("tpu", torch.bfloat16)


# --- TorchTPU's eager-mode property ------------------------------------------------------


class _DeviceModule(type(torch)):
    """``torch.tpu.eager_mode`` reads and assigns the eager mode, as in TorchTPU."""

    @property
    def eager_mode(self) -> EagerMode:
        return EagerMode(_C._get_eager_mode())

    @eager_mode.setter
    def eager_mode(self, mode: str | EagerMode) -> None:
        from torch_tpu.eager import set_eager_mode as set_mode

        set_mode(mode)


def _install_eager_mode_property() -> None:
    import sys

    sys.modules[__name__].__class__ = _DeviceModule
