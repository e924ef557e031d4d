"""torch.profiler on tpu: each program run appears as a device kernel named after its op,
with its device time, beside the CPU ops; the Chrome trace export holds them. The legacy
torch.autograd.profiler (use_device="tpu") times ops with tpu events."""

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu


@pytest.fixture(autouse=True)
def strict_mode():
    """Per-op kernels are what strict mode runs (defer_and_fuse runs fused graphs)."""
    with torch_tpu.eager_mode("strict"):
        yield


def _run_some_ops():
    x = torch.randn(64, 64, device="tpu")
    y = torch.relu(x @ x) + 1
    return y.sum().item()


def test_chrome_trace_has_tpu_programs(tmp_path):
    _run_some_ops()  # compile outside the profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        _run_some_ops()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    names = {e["name"] for e in kernels}
    assert {"aten::mm", "aten::relu", "aten::add.Tensor", "aten::sum"} <= names, names
    assert all(e["dur"] >= 0 for e in kernels)
    assert sum(e["dur"] for e in kernels) > 0
    cpu_ops = {e["name"] for e in events if e.get("cat") == "cpu_op"}
    assert {"aten::mm", "aten::relu"} <= cpu_ops
    # The device's events sit on their own row, apart from the host threads.
    host_pids = {e["pid"] for e in events if e.get("cat") == "cpu_op"}
    assert all(e["pid"] not in host_pids for e in kernels)


def test_key_averages_report_device_time():
    _run_some_ops()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        _run_some_ops()
    averages = prof.key_averages()
    assert any(e.key == "aten::mm" for e in averages)
    # A tiny op may time as zero on a loaded machine; all of them together cannot.
    assert sum(e.self_device_time_total for e in averages) > 0
    assert any(e.key == "aten::mm" and e.self_cpu_time_total > 0 for e in averages)
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=5)
    assert "aten::mm" in table


def test_cpu_only_profile_has_no_device_kernels():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _run_some_ops()
    assert prof.events()
    assert all(e.self_device_time_total == 0 for e in prof.key_averages())


def test_legacy_autograd_profiler_times_tpu_ops():
    _run_some_ops()
    with torch.autograd.profiler.profile(use_device="tpu") as prof:
        _run_some_ops()
    averages = prof.key_averages()
    assert any(e.key == "aten::mm" for e in averages)
    # A tiny op may time as zero on a loaded machine; all of them together cannot.
    assert sum(e.self_device_time_total for e in averages) > 0
    assert "Self TPU" in averages.table(row_limit=3)


def test_defer_and_fuse_graphs_appear_as_one_kernel(tmp_path):
    with torch_tpu.eager_mode("defer_and_fuse"):
        _run_some_ops()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            _run_some_ops()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    kernels = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    fused = [e for e in kernels if e["name"].startswith("tpu::fused_graph (")]
    assert fused and all(e["dur"] >= 0 for e in fused)
    assert not any(e["name"] == "aten::mm" for e in kernels)  # it ran inside the graph
