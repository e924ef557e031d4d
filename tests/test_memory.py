"""Per-device memory accounting (torch.tpu.memory_allocated and friends) and the
TORCH_TPU_HBM_BYTES cap raising torch.OutOfMemoryError."""

import gc
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu  # noqa: F401

TPU = "tpu"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def settle():
    gc.collect()
    torch.tpu.synchronize()


@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((1000,), torch.float32),
        ((3, 7), torch.float16),
        ((5, 5), torch.int64),
        ((17,), torch.bool),
        ((4, 4), torch.bfloat16),
        ((2, 3), torch.float64),
    ],
    ids=str,
)
def test_allocated_grows_by_storage_bytes(shape, dtype):
    settle()
    start = torch.tpu.memory_allocated()
    x = torch.ones(shape, dtype=dtype, device=TPU)
    nbytes = x.untyped_storage().nbytes()
    assert nbytes == x.numel() * x.element_size()
    assert torch.tpu.memory_allocated() - start == nbytes
    view = x.view(-1)[1:]  # views share the storage: no new bytes
    assert torch.tpu.memory_allocated() - start == nbytes
    del x
    assert torch.tpu.memory_allocated() - start == nbytes  # the view keeps the storage alive
    del view
    settle()
    assert torch.tpu.memory_allocated() == start


def test_results_and_copies_are_counted():
    settle()
    start = torch.tpu.memory_allocated()
    a = torch.arange(256, dtype=torch.float32).to(TPU)
    after_a = torch.tpu.memory_allocated()
    assert after_a - start == 1024
    b = a * 2 + 1  # intermediates freed, result kept
    settle()
    assert torch.tpu.memory_allocated() - after_a == 1024
    c = a.sum()
    settle()
    assert torch.tpu.memory_allocated() - after_a == 1024 + 4
    del a, b, c
    settle()
    assert torch.tpu.memory_allocated() == start


def test_in_place_ops_do_not_leak():
    settle()
    x = torch.zeros(1000, device=TPU)
    start = torch.tpu.memory_allocated()
    for i in range(20):
        x.add_(1.0)
        x.mul_(1.0)
    torch.testing.assert_close(x.cpu(), torch.full((1000,), 20.0))
    settle()
    assert torch.tpu.memory_allocated() == start


def test_allocate_free_cycles_return_to_start():
    settle()
    start = torch.tpu.memory_allocated()
    allocations_before = torch.tpu.memory_stats()["allocation.all.allocated"]
    live_before = torch.tpu.memory_stats()["allocation.all.current"]
    for i in range(1000):
        x = torch.empty(64 + (i % 7), device=TPU)
        del x
    settle()
    assert torch.tpu.memory_allocated() == start
    assert torch.tpu.memory_stats()["allocation.all.current"] == live_before
    assert torch.tpu.memory_stats()["allocation.all.allocated"] - allocations_before >= 1000
    for i in range(200):
        y = torch.ones(32, device=TPU) + i
        del y
    settle()
    assert torch.tpu.memory_allocated() == start


def test_allocation_count_current():
    settle()
    before = torch.tpu.memory_stats()["allocation.all.current"]
    xs = [torch.empty(8, device=TPU) for _ in range(5)]
    assert torch.tpu.memory_stats()["allocation.all.current"] - before == 5
    del xs
    settle()
    assert torch.tpu.memory_stats()["allocation.all.current"] == before


def test_peak_and_reset():
    settle()
    start = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == start
    big = torch.empty(10000, device=TPU)  # 40000 bytes
    small = torch.empty(100, device=TPU)
    assert torch.tpu.max_memory_allocated() == start + 40400
    del big
    settle()
    assert torch.tpu.memory_allocated() == start + 400
    assert torch.tpu.max_memory_allocated() == start + 40400  # the peak stays
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == start + 400
    del small
    settle()
    assert torch.tpu.max_memory_allocated() == start + 400
    assert torch.tpu.memory_stats()["allocated_bytes.all.peak"] == torch.tpu.max_memory_allocated()


def test_memory_stats_keys_and_consistency():
    x = torch.empty(10, device=TPU)
    stats = torch.tpu.memory_stats()
    for key in (
        "allocated_bytes.all.current",
        "allocated_bytes.all.peak",
        "allocation.all.current",
        "allocation.all.allocated",
    ):
        assert key in stats, sorted(stats)
        assert isinstance(stats[key], int)
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    assert stats["allocated_bytes.all.peak"] >= stats["allocated_bytes.all.current"] >= 40
    assert torch.tpu.memory_stats(0) == torch.tpu.memory_stats("tpu:0") == stats
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    assert torch.tpu.memory_reserved() >= torch.tpu.memory_allocated()
    del x


def test_memory_is_per_device():
    settle()
    start0, start1 = torch.tpu.memory_allocated(0), torch.tpu.memory_allocated(1)
    y = torch.arange(100, dtype=torch.float32).to("tpu:1")
    assert torch.tpu.memory_allocated(1) - start1 == 400
    assert torch.tpu.memory_allocated("tpu:1") - start1 == 400
    assert torch.tpu.memory_allocated(0) == start0
    del y
    settle()
    assert torch.tpu.memory_allocated(1) == start1


def test_hbm_cap_raises_out_of_memory_and_recovers():
    code = textwrap.dedent("""
        import gc, json, torch, torch_tpu
        res = {}
        res["total"] = torch.tpu.get_device_properties(0).total_memory
        res["mem_get_info_total"] = torch.tpu.mem_get_info()[1]
        keep = torch.ones(100_000, device="tpu")  # 400 KB, fits
        try:
            torch.empty(200_000, device="tpu")  # 800 KB more: over the 1 MB cap
            res["err"] = None
        except Exception as e:
            res["err"] = [type(e).__name__, isinstance(e, torch.OutOfMemoryError), isinstance(e, RuntimeError), str(e)]
        try:
            torch.ones(300_000, device="tpu")  # a single 1.2 MB allocation
            res["err2"] = None
        except Exception as e:
            res["err2"] = [type(e).__name__, isinstance(e, torch.OutOfMemoryError)]
        gc.collect()
        res["allocated_after"] = torch.tpu.memory_allocated()
        small = torch.arange(1000, dtype=torch.float32).to("tpu")
        res["small"] = (small * 2 + keep[:1000]).sum().item()
        del keep
        gc.collect()
        again = torch.ones(200_000, device="tpu")  # fits now that `keep` is gone
        res["again"] = again.sum().item()
        print(json.dumps(res))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}
    env.update(
        TORCH_TPU_HBM_BYTES="1000000",
        TORCH_TPU_CPU_FALLBACK="silent",
        PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["err"] is not None, "allocating beyond TORCH_TPU_HBM_BYTES succeeded"
    assert res["err"][1], f"expected torch.OutOfMemoryError, got {res['err']}"
    assert res["err2"] is not None and res["err2"][1], res["err2"]
    assert res["total"] == 1_000_000
    assert res["mem_get_info_total"] == 1_000_000
    assert res["allocated_after"] == 400_000  # failed allocations left nothing behind
    expected_small = (torch.arange(1000, dtype=torch.float32) * 2 + 1).sum().item()
    assert res["small"] == expected_small
    assert res["again"] == 200_000.0


def test_default_capacity_is_what_mem_get_info_reports():
    stats = torch_tpu._C._memory_stats(0)
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    if "TORCH_TPU_HBM_BYTES" in os.environ:
        pytest.skip("TORCH_TPU_HBM_BYTES replaces the default capacity")
    assert stats["limit_bytes"] == host  # the CPU plugin reports no limit of its own
    assert stats["limit_source"] == "half the host's physical memory"
    settle()
    gc.disable()  # a collection in between would free other tests' tensors
    try:
        free, total = torch.tpu.mem_get_info()
        assert total == host == torch.tpu.get_device_properties(0).total_memory
        x = torch.ones(1 << 16, device=TPU)
        free_after, _ = torch.tpu.mem_get_info()
        assert free - free_after == x.untyped_storage().nbytes()
        assert free_after == total - torch.tpu.memory_allocated()
    finally:
        gc.enable()


def test_allocation_beyond_capacity_raises_at_the_call_and_recovers():
    settle()
    gc.disable()  # a collection in between would free other tests' tensors
    try:
        start = torch.tpu.memory_allocated()
        total = torch.tpu.mem_get_info()[1]
        too_many = total // 4 + 1  # float32 elements: one more byte-quad than the device holds
        with pytest.raises(torch.OutOfMemoryError) as caught:
            torch.empty(too_many, device=TPU)  # storage is lazy: the check is at allocation
        message = str(caught.value)
        assert message.startswith("tpu:0 out of memory. Tried to allocate ")
        assert f"({too_many * 4} bytes)" in message
        assert "total capacity of" in message
        with pytest.raises(torch.OutOfMemoryError):
            torch.zeros((2, too_many // 2 + 1), device=TPU)
        assert torch.tpu.memory_allocated() == start  # nothing left behind
    finally:
        gc.enable()
    assert (torch.arange(4, device=TPU) * 2).tolist() == [0, 2, 4, 6]


def test_plugin_out_of_memory_becomes_torch_out_of_memory():
    """With the cap lifted far past the host's memory, the CPU plugin itself fails to
    allocate: at execute (a program's output) and inside a fused program's temporaries,
    in strict and defer_and_fuse modes. Each becomes torch.OutOfMemoryError and the process
    goes on. An address-space limit keeps the test safe where the kernel overcommits."""
    code = textwrap.dedent("""
        import gc, json, resource, torch, torch_tpu
        resource.setrlimit(resource.RLIMIT_AS, (256 << 30, resource.RLIM_INFINITY))
        torch_tpu._C._set_memory_limit(1 << 50)
        res = {}
        def attempt(name, make):
            try:
                make()
                res[name] = None
            except Exception as e:
                res[name] = [isinstance(e, torch.OutOfMemoryError), str(e)]
            gc.collect()
            try:
                torch.tpu.synchronize()
            except torch.OutOfMemoryError:
                pass  # the failed run's output may still be alive here: its error again
        huge = 1 << 41  # 2 TiB
        attempt("execute", lambda: torch.zeros(huge, dtype=torch.uint8, device="tpu").cpu())
        row = torch.ones(1 << 20, device="tpu")
        attempt("temporaries", lambda: (row.expand(1 << 21, 1 << 20) * 2).sum().item())
        with torch_tpu.eager_mode("defer_and_fuse"):
            attempt("deferred", lambda: (row.expand(1 << 21, 1 << 20) + 1).amax().item())
            res["deferred_after"] = (row[:4] * 3).tolist()
        torch_tpu._C._set_memory_limit(0)
        del row
        gc.collect()
        res["allocated"] = torch.tpu.memory_allocated()
        res["after"] = (torch.arange(3, device="tpu") + 1).tolist()
        print(json.dumps(res))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}
    env.update(PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("execute", "temporaries", "deferred"):
        assert res[name] is not None, f"{name}: a 2 TiB program ran"
        is_oom, message = res[name]
        assert is_oom, f"{name}: expected torch.OutOfMemoryError, got {message}"
        assert "tpu:0 out of memory in the PJRT plugin" in message, message
        assert "Out of memory allocating" in message, message  # the plugin's own words
    assert res["deferred_after"] == [3.0] * 4
    assert res["allocated"] == 0
    assert res["after"] == [1, 2, 3]
