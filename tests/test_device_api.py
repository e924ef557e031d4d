"""torch.accelerator and the rest of the torch.tpu device module, checked against what
the CUDA counterparts do: streams, events and their timing, device capability, memory
functions, .numpy() on a device tensor, and DLPack."""

import json

import numpy as np
import pytest
import torch

import torch_tpu


@pytest.fixture(autouse=True)
def restore_current_device():
    before = torch.tpu.current_device()
    yield
    torch.tpu.set_device(before)


def test_accelerator_device_functions():
    acc = torch.accelerator
    assert acc.current_accelerator() == torch.device("tpu")
    assert acc.device_count() == torch.tpu.device_count() >= 1
    last = acc.device_count() - 1
    acc.set_device_index(last)
    assert acc.current_device_index() == last == torch.tpu.current_device()
    with acc.device_index(0):
        assert torch.tpu.current_device() == 0
        assert torch.empty(1, device="tpu").device == torch.device("tpu", 0)
    assert acc.current_device_index() == last
    with pytest.raises(RuntimeError, match="Invalid device index"):
        acc.set_device_index(acc.device_count())
    x = torch.randn(32, 32, device="tpu")
    y = x @ x
    acc.synchronize()
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)


def test_accelerator_memory_functions():
    acc = torch.accelerator
    acc.reset_peak_memory_stats()
    before = acc.memory_allocated()
    assert before == torch.tpu.memory_allocated()
    x = torch.empty(1024, 256, device="tpu")  # 1 MiB
    assert acc.memory_allocated() - before == x.nbytes
    assert acc.max_memory_allocated() >= before + x.nbytes
    assert acc.memory_reserved() == acc.memory_allocated()
    stats = acc.memory_stats()
    assert stats["allocated_bytes.all.current"] == acc.memory_allocated()
    free, total = acc.get_memory_info()
    assert 0 <= free <= total and total > 0
    del x
    assert acc.memory_allocated() == before
    acc.reset_peak_memory_stats()
    assert acc.max_memory_allocated() == before
    acc.empty_cache()


def test_empty_host_cache_after_the_device_is_in_use():
    # vLLM calls it at shutdown; with no host allocator registered for the device it crashed
    # (a null pointer in at::accelerator::emptyHostCache), so it runs in a process of its own.
    from fresh_process import run_python

    result = run_python(
        "import torch, torch_tpu\n"
        "x = torch.ones(4, device='tpu')\n"
        "torch.accelerator.empty_host_cache()\n"
        "y = torch.arange(3.0).pin_memory()\n"
        "torch.accelerator.empty_host_cache()\n"
        "print(y.is_pinned(), y.to('tpu', non_blocking=True).cpu().tolist())\n",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "True [0.0, 1.0, 2.0]"


def test_device_capability_and_name():
    capability = torch.tpu.get_device_capability()
    assert isinstance(capability, tuple) and len(capability) == 2
    assert all(isinstance(v, int) and v >= 0 for v in capability)
    assert isinstance(torch.tpu.get_device_name(), str) and torch.tpu.get_device_name()
    dtypes = torch.accelerator.get_device_capability()["supported_dtypes"]
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool):
        assert dtype in dtypes
    assert torch.qint8 not in dtypes
    with pytest.raises(ValueError):
        torch.tpu.get_device_properties(torch.tpu.device_count())


def test_streams_are_the_one_device_stream():
    s = torch.tpu.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("tpu", torch.tpu.current_device())
    assert s == torch.tpu.current_stream() == torch.tpu.default_stream()
    assert torch.accelerator.current_stream() == s
    x = torch.ones(256, 256, device="tpu")
    with torch.tpu.stream(s):
        y = (x @ x).sum()
    s.synchronize()
    assert s.query()
    assert y.item() == 256.0 * 256 * 256
    s.wait_stream(torch.tpu.default_stream())
    with torch.tpu.stream(None):
        pass
    if torch.tpu.device_count() > 1:
        other = torch.tpu.Stream(1)
        assert other.device == torch.device("tpu", 1)
        with torch.tpu.stream(other):
            assert torch.tpu.current_device() == 1
        assert torch.tpu.current_device() == 0


def test_events_record_query_synchronize_and_time():
    start = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    assert start.query()  # never recorded: complete, as on CUDA
    x = torch.randn(128, 128, device="tpu")
    start.record()
    for _ in range(3):
        x = torch.tanh(x @ x)
    end.record()
    end.synchronize()
    assert end.query()
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float) and elapsed >= 0.0
    assert end.elapsed_time(start) == pytest.approx(-elapsed)
    torch.tpu.current_stream().wait_event(end)
    event = torch.tpu.current_stream().record_event()
    event.synchronize()
    assert event.query()


def test_event_errors_match_cuda():
    untimed, timed = torch.tpu.Event(), torch.tpu.Event(enable_timing=True)
    # torch.Event itself checks this first, raising ValueError for every device.
    with pytest.raises(ValueError, match="Both events must be recorded"):
        timed.elapsed_time(torch.tpu.Event(enable_timing=True))
    untimed.record()
    timed.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        untimed.elapsed_time(timed)


def test_numpy_on_a_tpu_tensor_raises_like_cuda():
    x = torch.ones(2, device="tpu")
    with pytest.raises(TypeError) as info:
        x.numpy()
    assert str(info.value) == (
        "can't convert tpu:0 device type tensor to numpy. "
        "Use Tensor.cpu() to copy the tensor to host memory first."
    )
    np.testing.assert_array_equal(x.cpu().numpy(), np.ones(2, dtype=np.float32))


def test_dlpack_round_trip_shares_storage():
    x = torch.arange(6.0, device="tpu")
    assert x.__dlpack_device__() == (torch.utils.dlpack.DLDeviceType.kDLExtDev, 0)
    y = torch.from_dlpack(x)
    z = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert y.device == z.device == x.device
    y.add_(1)
    z.mul_(2)
    torch.testing.assert_close(x.cpu(), (torch.arange(6.0) + 1) * 2)
    # Other libraries cannot read tpu memory; the fix is a host copy.
    with pytest.raises((RuntimeError, BufferError, TypeError, ValueError)):
        np.from_dlpack(x)
    np.testing.assert_array_equal(np.from_dlpack(x.cpu()), x.cpu().numpy())


def test_device_module_functions_exist_like_cuda():
    for name in [
        "Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
        "synchronize", "get_device_name", "get_device_capability", "get_device_properties",
        "get_amp_supported_dtype", "is_bf16_supported",
    ]:  # fmt: skip
        assert callable(getattr(torch.tpu, name)), name
    json.dumps(torch.tpu.get_device_capability())


def test_tpu_event_is_a_torch_event():
    event = torch.tpu.Event()
    assert isinstance(event, torch.Event) and isinstance(event, torch.tpu.Event)
    assert event.device.type == "tpu"
    event.record()  # a torch.Event takes its device index when recorded
    assert event.device == torch.device("tpu", torch.tpu.current_device())
    assert not isinstance(torch.Event("cpu"), torch.tpu.Event)
    with pytest.raises(NotImplementedError):
        torch.tpu.Event(interprocess=True)


def test_event_covers_deferred_work():
    with torch_tpu.eager_mode("defer_and_fuse"):
        x = torch.ones(64, 64, device="tpu")
        y = torch.tanh(x @ x)
        event = torch.tpu.Event()
        event.record()  # enqueues the pending graph, so the event waits for it
        event.synchronize()
        assert event.query()
        assert torch.tpu.current_stream().query()
        torch.testing.assert_close(y.cpu(), torch.tanh(torch.full((64, 64), 64.0)))
