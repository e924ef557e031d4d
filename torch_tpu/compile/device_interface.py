"""Dynamo's device interface for ``tpu``, modelled on its CUDA and CPU interfaces.

Streams and events are ``torch.tpu``'s (one stream per device). Imported only once
Dynamo is loaded.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._dynamo import device_interface as dynamo

from torch_tpu import _C
from torch_tpu import device as tpu


def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
    """One stream per device: selecting it selects only its device."""
    tpu.set_device(device_index)


def _exchange_device(index: int) -> int:
    previous = _C._current_device()
    if index >= 0 and index != previous:
        _C._set_device(index)
    return previous


class TpuInterface(dynamo.DeviceInterface):
    device = tpu.device

    Stream = tpu.Stream
    Event = tpu.Event

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            dynamo.caching_worker_current_devices["tpu"] = device

        @staticmethod
        def current_device() -> int:
            return dynamo.caching_worker_current_devices.get("tpu", tpu.current_device())

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            return tpu.get_device_properties(device)

    current_device = staticmethod(tpu.current_device)
    set_device = staticmethod(tpu.set_device)
    device_count = staticmethod(tpu.device_count)
    is_available = staticmethod(tpu.is_available)
    synchronize = staticmethod(tpu.synchronize)
    get_device_properties = staticmethod(tpu.get_device_properties)
    memory_allocated = staticmethod(tpu.memory_allocated)
    stream = staticmethod(tpu.stream)
    current_stream = staticmethod(tpu.current_stream)
    set_stream = staticmethod(tpu.set_stream)
    _set_stream_by_id = staticmethod(_set_stream_by_id)
    exchange_device = staticmethod(_exchange_device)
    maybe_exchange_device = staticmethod(_exchange_device)

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return 0

    @staticmethod
    def get_compute_capability(device: Any = None) -> str:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return True


def register() -> None:
    """Registers TpuInterface for ``tpu`` and ``tpu:N``, replacing PyTorch's own
    placeholder (which serves Google's unrelated package of the same device name)."""
    dynamo.get_registered_device_interfaces()  # runs PyTorch's registrations first
    dynamo.register_interface_for_device("tpu", TpuInterface)
    for index in range(tpu.device_count()):
        dynamo.register_interface_for_device(f"tpu:{index}", TpuInterface)
