"""The compile cache on disk: a restarted process compiles nothing, damaged or foreign
entries are recompiled (never trusted, never a crash), concurrent processes share one
directory, the size cap evicts, stats()/clear(), and the recompile log's reasons."""

import json
import os
import subprocess
import sys

import pytest
import torch
from fresh_process import run_python

import torch_tpu
from torch_tpu import _C

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A few ops and one training step, checked against the CPU; prints what it computed
# and the runtime's counters as JSON on its last line.
WORKLOAD = """
import json, torch, torch_tpu
from torch import nn

def workload():
    torch.manual_seed(0)
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    out = {}
    y = (x.to("tpu") @ w.to("tpu")).relu().sum(dim=0)
    torch.testing.assert_close(y.cpu(), (x @ w).relu().sum(dim=0))
    out["matmul"] = y.cpu().tolist()
    cpu_model = nn.Linear(5, 3)
    tpu_model = nn.Linear(5, 3).to("tpu")
    tpu_model.load_state_dict(cpu_model.state_dict())
    for model, device in ((cpu_model, "cpu"), (tpu_model, "tpu")):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = nn.functional.mse_loss(model(x.to(device)), torch.zeros(4, 3, device=device))
        loss.backward()
        optimizer.step()
    torch.testing.assert_close(tpu_model.weight.detach().cpu(), cpu_model.weight.detach())
    out["weight"] = tpu_model.weight.detach().cpu().flatten().tolist()
    return out
"""

RUN = (
    WORKLOAD
    + """
results = workload()
counts = torch_tpu.metrics.snapshot()
print(json.dumps({"results": results, "metrics": counts, "stats": torch_tpu.cache.stats()}))
"""
)


def workload():
    scope = {}
    exec(WORKLOAD, scope)
    return scope["workload"]()


def start(cache_dir, **env):
    environment = dict(os.environ)
    environment.pop("TORCH_TPU_LOG_RECOMPILES", None)
    environment.update(PYTHONPATH=ROOT, TORCH_TPU_CACHE_DIR=str(cache_dir), **env)
    return subprocess.Popen(
        [sys.executable, "-c", RUN],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process):
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    return json.loads(stdout.strip().splitlines()[-1]), stderr


@pytest.fixture
def private_cache(tmp_path):
    """This process's disk cache on an empty directory, memory cache empty too."""
    previous = torch_tpu.cache.directory()
    torch_tpu.cache._configure(str(tmp_path))
    _C._cache_clear_memory()
    yield tmp_path
    torch_tpu.cache._configure(previous)


def entries(directory):
    return sorted(p for p in directory.iterdir() if p.name.endswith(".tpuexec"))


def counts():
    return torch_tpu.metrics.snapshot()


def test_concurrent_writers_then_a_restart_that_compiles_nothing(tmp_path):
    # Four processes start at once on one empty directory, all writing entries.
    writers = [start(tmp_path, TORCH_TPU_LOG_RECOMPILES="1") for _ in range(4)]
    outcomes = [finish(process) for process in writers]
    results = outcomes[0][0]["results"]
    for outcome, log in outcomes:
        assert outcome["results"] == results
        compiles = outcome["metrics"]["compiles"]
        # The recompile log has one line per real compile, each with its reason.
        assert log.count("[torch_tpu] compile ") == compiles, log
        assert outcome["metrics"]["disk_writes"] == compiles
    assert sum(outcome["metrics"]["compiles"] for outcome, _ in outcomes) > 0
    assert any("[torch_tpu] compile aten::mm: new op" in log for _, log in outcomes)
    # Nothing but whole entries is left: temporary files were all renamed into place.
    assert [p for p in tmp_path.iterdir() if not p.name.endswith(".tpuexec")] == []

    # A restarted process on the warm directory compiles nothing and computes the same.
    warm, log = finish(start(tmp_path, TORCH_TPU_LOG_RECOMPILES="1"))
    assert warm["metrics"]["compiles"] == 0
    assert warm["metrics"]["disk_hits"] > 0
    assert warm["metrics"]["disk_corrupt"] == 0
    assert warm["results"] == results
    assert "[torch_tpu] compile" not in log


def test_entries_compiled_under_other_compiler_flags_are_not_reused(tmp_path):
    # XLA_FLAGS changes the code XLA emits; entries compiled without it are not served.
    first, _ = finish(start(tmp_path, XLA_FLAGS=""))
    assert first["metrics"]["compiles"] > 0
    flagged, _ = finish(start(tmp_path, XLA_FLAGS="--xla_cpu_prefer_vector_width=256"))
    assert flagged["metrics"]["compiles"] == first["metrics"]["compiles"]
    assert flagged["metrics"]["disk_hits"] == 0
    assert flagged["results"] == first["results"]
    again, _ = finish(start(tmp_path, XLA_FLAGS="--xla_cpu_prefer_vector_width=256"))
    assert again["metrics"]["compiles"] == 0


@pytest.mark.xla_cpu_shortcut
def test_latency_compiled_ops_compute_the_same_and_are_cached_apart(tmp_path):
    # TORCH_TPU_FAST_OP_COMPILE=2 compiles ops without LLVM's optimizations: the same
    # results, and entries of the default options are not served to it (nor back).
    first, _ = finish(start(tmp_path, TORCH_TPU_FAST_OP_COMPILE="1"))
    fast, _ = finish(start(tmp_path, TORCH_TPU_FAST_OP_COMPILE="2"))
    # (the workload checks each result against the CPU; unoptimized code may round
    # differently in the last bit)
    for name, values in first["results"].items():
        torch.testing.assert_close(torch.tensor(fast["results"][name]), torch.tensor(values))
    assert fast["metrics"]["compiles"] > 0
    assert fast["metrics"]["disk_hits"] < first["metrics"]["compiles"]
    again, _ = finish(start(tmp_path, TORCH_TPU_FAST_OP_COMPILE="2"))
    assert again["metrics"]["compiles"] == 0
    assert again["results"] == fast["results"]


def test_cpu_device_count_is_configurable(tmp_path):
    script = "import torch, torch_tpu; print(torch.tpu.device_count())"
    environment = dict(os.environ, PYTHONPATH=ROOT, TORCH_TPU_CACHE_DIR=str(tmp_path))
    for devices in ("1", "3"):
        environment["TORCH_TPU_CPU_DEVICES"] = devices
        run = subprocess.run(
            [sys.executable, "-c", script], env=environment, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == [devices]
        assert "cpu_device_count" not in run.stderr  # the plugin's INFO line is silenced
    environment["TORCH_TPU_CPU_DEVICES"] = "many"
    run = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True
    )
    assert run.returncode != 0
    assert "ValueError: TORCH_TPU_CPU_DEVICES='many'" in run.stderr


def test_cpu_device_count_defaults_to_one_per_core_up_to_four(tmp_path):
    # More devices than cores would start more XLA worker threads than cores (the plugin
    # runs max(cores, devices)): by default there is one device per usable core, at most 4.
    unset = ("TORCH_TPU_CPU_DEVICES", "PJRT_NPROC")
    count = "import torch, torch_tpu; print(torch.tpu.device_count())"
    cores = sorted(os.sched_getaffinity(0))
    for allowed in (cores[:1], cores):
        # The child narrows its own affinity before importing torch_tpu.
        script = f"import os; os.sched_setaffinity(0, {allowed!r}); " + count
        run = run_python(script, drop=unset, TORCH_TPU_CACHE_DIR=str(tmp_path))
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == [str(min(4, len(allowed)))]
    # PJRT_NPROC is the core count the plugin sizes its threads by: the default follows it.
    run = run_python(count, drop=unset[:1], TORCH_TPU_CACHE_DIR=str(tmp_path), PJRT_NPROC="1")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1"]
    from torch_tpu._runtime import plugin

    assert [plugin.default_cpu_devices(n) for n in (1, 2, 3, 4, 5, 64)] == [1, 2, 3, 4, 4, 4]


@pytest.mark.xla_cpu_shortcut
def test_host_heap_keeps_device_buffers_on_the_cpu_platform(tmp_path):
    # XLA:CPU's buffers live in the malloc heap: glibc is tuned so a step's freed buffers
    # are reused instead of being returned and faulted in again; the variable turns it off
    # and a bad value is named.
    script = "import torch, torch_tpu; print(torch_tpu._C._host_heap_tuned())"
    for value, expected in (("", "True"), ("1", "True"), ("0", "False")):
        run = run_python(
            script, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_HOST_HEAP_TUNING=value
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == [expected]
    run = run_python(script, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_HOST_HEAP_TUNING="yes")
    assert run.returncode != 0
    assert "TORCH_TPU_HOST_HEAP_TUNING must be 0 or 1, got 'yes'" in run.stderr


def flip_a_byte(data):
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x40]) + data[middle + 1 :]


def another_plugin_version(data):
    marker = b"platform_version="
    at = data.index(marker) + len(marker)
    return data[:at] + b"9" + data[at + 1 :]  # same length, another version


DAMAGE = {
    "flipped byte": flip_a_byte,
    "truncated": lambda data: data[: len(data) * 2 // 3],
    "garbage": lambda data: b"\x00garbage, not a cache entry" * 3,
    "another plugin version": another_plugin_version,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_entries_are_recompiled(private_cache, damage):
    expected = workload()
    damaged = entries(private_cache)
    assert damaged
    for path in damaged:
        path.write_bytes(DAMAGE[damage](path.read_bytes()))
    _C._cache_clear_memory()  # as if the process restarted
    before = counts()
    assert workload() == expected
    after = counts()
    assert after["disk_corrupt"] - before["disk_corrupt"] == len(damaged)
    assert after["compiles"] - before["compiles"] == len(damaged)
    # The recompiled programs replaced the damaged entries.
    _C._cache_clear_memory()
    before = counts()
    assert workload() == expected
    assert counts()["compiles"] == before["compiles"]


def test_size_cap_evicts_least_recently_used(private_cache):
    x = torch.ones(8, device="tpu")
    (x + 1).cpu()
    stats = torch_tpu.cache.stats()
    one_entry = stats["bytes"] / stats["entries"]
    torch_tpu.cache._configure(str(private_cache), max_bytes=int(one_entry * 2.5))
    before = counts()
    for n in range(9, 14):  # five new programs
        (torch.ones(n, device="tpu") + 1).cpu()
    stats = torch_tpu.cache.stats()
    assert counts()["disk_evictions"] - before["disk_evictions"] >= 3
    assert stats["bytes"] <= stats["max_bytes"]
    assert 1 <= stats["entries"] <= 3


def test_stats_and_clear(private_cache):
    stats = torch_tpu.cache.stats()
    assert stats["directory"] == str(private_cache) == torch_tpu.cache.directory()
    assert stats["entries"] == 0 and stats["bytes"] == 0
    assert stats["max_bytes"] > 0
    before = counts()
    y = (torch.arange(6, device="tpu") * 3).cpu()
    assert y.tolist() == [0, 3, 6, 9, 12, 15]
    stats = torch_tpu.cache.stats()
    assert stats["entries"] >= 1 and stats["bytes"] > 0
    assert stats["writes"] - before["disk_writes"] == stats["entries"]
    torch_tpu.cache.clear()
    assert torch_tpu.cache.stats()["entries"] == 0
    assert _C._compiled_program_count() == 0
    before = counts()
    assert (torch.arange(6, device="tpu") * 3).cpu().tolist() == y.tolist()
    assert counts()["compiles"] > before["compiles"]


def test_cache_can_be_off(private_cache):
    torch_tpu.cache._configure(None)
    assert torch_tpu.cache.directory() is None
    assert torch_tpu.cache.stats()["entries"] == 0
    before = counts()
    (torch.ones(7, 3, device="tpu") - 1).cpu()
    assert counts()["disk_writes"] == before["disk_writes"]
    assert entries(private_cache) == []


def test_recompile_log_names_the_reason(private_cache, capfd):
    old = torch_tpu.cache._log_recompiles(True)
    try:
        a = torch.ones(13, device="tpu")
        capfd.readouterr()
        (a + a).cpu()
        (torch.ones(17, device="tpu") + a[:1]).cpu()
        m = torch.ones(5, 5, 5, device="tpu")
        m.sum(dim=(0, 2)).cpu()
        m.sum(dim=(1, 2)).cpu()  # the same types: only the reduced dimensions differ
        (a + a).cpu()  # cached: not logged
    finally:
        torch_tpu.cache._log_recompiles(old)
    log = capfd.readouterr().err
    lines = [line for line in log.splitlines() if "aten::add.Tensor" in line]
    assert len(lines) == 2, log
    assert "new op" in lines[0]
    assert "new shapes, dtypes or layout" in lines[1] and "tensor<13xf32>" in lines[1], log
    sums = [line for line in log.splitlines() if "aten::sum:" in line]
    assert len(sums) == 2, log
    assert "new op" in sums[0]
    assert "new graph structure" in sums[1] and "array<i64: 1, 2>" in sums[1], log


def test_fused_graphs_are_cached_on_disk_too(private_cache, capfd):
    x = torch.randn(6, 4)

    def step():
        with torch_tpu.eager_mode("defer_and_fuse"):
            y = (x.to("tpu").sin() * 2 + 1).relu().sum(dim=1)
            return y.cpu()

    old = torch_tpu.cache._log_recompiles(True)
    try:
        expected = step()
        torch.testing.assert_close(expected, (x.sin() * 2 + 1).relu().sum(dim=1))
        # "new fused graph", or "new shapes" when an earlier test logged a similar graph.
        assert "compile fused graph: new " in capfd.readouterr().err
        _C._cache_clear_memory()  # as if the process restarted
        before = counts()
        assert torch.equal(step(), expected)
        after = counts()
    finally:
        torch_tpu.cache._log_recompiles(old)
    assert after["compiles"] == before["compiles"]
    assert after["disk_hits"] > before["disk_hits"]
    assert after["fused_graphs"] > before["fused_graphs"]
    assert "compile" not in capfd.readouterr().err


def test_loaded_programs_are_bounded_so_the_process_keeps_its_memory_maps():
    """XLA:CPU maps ~3 memory regions per loaded program and Linux allows 65530 per process:
    PyTorch's device test files, which load ~20,000 programs, crashed the process inside
    XLA's loader. Only the most recently used TORCH_TPU_MAX_PROGRAMS stay loaded."""
    script = (
        "import torch, torch_tpu\n"
        "def maps(): return sum(1 for _ in open('/proc/self/maps'))\n"
        "assert torch_tpu._C._max_programs() == 20\n"
        "x = torch.ones(3, device='tpu') * 2; x.cpu(); start = maps()\n"
        "for n in range(1, 121):\n"
        "    y = torch.arange(n, device='tpu', dtype=torch.float32) * 3 + 1\n"
        "    assert y[-1].item() == 3 * (n - 1) + 1\n"
        "assert torch_tpu._C._compiled_program_count() <= 20\n"
        "grown = maps() - start\n"
        "assert grown < 500, grown  # cap + 64 just evicted: ~250; unbounded: ~1000\n"
        "print('ok', grown)\n"
    )
    env = dict(os.environ, TORCH_TPU_MAX_PROGRAMS="20", TORCH_TPU_CACHE_DIR="off")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.startswith("ok")


def test_loaded_programs_are_bounded_by_the_process_mapping_limit():
    """A count of programs does not bound the mappings (a fused graph has a mapping set per
    kernel): past half of vm.max_map_count the cache keeps fewer programs. Here the limit is
    lowered (TORCH_TPU_MAPPING_LIMIT, read when the runtime starts) to what ~150 one-op
    programs would pass."""
    maps = "def maps(): return sum(1 for _ in open('/proc/self/maps'))\n"
    env = dict(os.environ, TORCH_TPU_CACHE_DIR="off")
    started = subprocess.run(
        [sys.executable, "-c", "import torch, torch_tpu\n" + maps + "print(maps())"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    limit = 2 * int(started.stdout.split()[-1]) + 1200
    script = (
        "import os, torch, torch_tpu\n" + maps + "for n in range(1, 301):\n"
        "    y = torch.arange(n, device='tpu', dtype=torch.float32) * 3 + 1\n"
        "    assert y[-1].item() == 3 * (n - 1) + 1\n"
        f"    assert maps() < {limit}, (n, maps())\n"
        "loaded = torch_tpu._C._compiled_program_count()\n"
        "assert 64 <= loaded < 600, loaded  # 4 programs a size: ~1200 without the limit\n"
        "print('ok', maps(), loaded)\n"
    )
    env.update(TORCH_TPU_LOG_RECOMPILES="1", TORCH_TPU_MAPPING_LIMIT=str(limit))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.startswith("ok"), done.stdout
    assert "(vm.max_map_count): keeping" in done.stderr


def test_mapping_limit_must_be_a_positive_count():
    env = dict(os.environ, TORCH_TPU_MAPPING_LIMIT="lots", TORCH_TPU_CACHE_DIR="off")
    script = "import torch, torch_tpu\nfor n in range(1, 80): torch.ones(n, device='tpu').cpu()"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode != 0
    assert "TORCH_TPU_MAPPING_LIMIT must be a positive count, got 'lots'" in done.stderr


def test_max_programs_must_be_a_positive_count():
    env = dict(os.environ, TORCH_TPU_MAX_PROGRAMS="none")
    done = subprocess.run(
        [sys.executable, "-c", "import torch, torch_tpu; torch.ones(1, device='tpu')"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode != 0
    assert "TORCH_TPU_MAX_PROGRAMS must be a positive count" in done.stderr


ONE_CORE_SCRIPT = """
import glob, os, torch, torch_tpu
before = os.sched_getaffinity(0)
torch.manual_seed(0)
x = torch.randn(512, 256)
w = torch.randn(256, 256, requires_grad=True)

def step(x, w):
    h = torch.nn.functional.layer_norm(torch.tanh(x @ w) * x, (256,))
    return torch.softmax(h, -1).square().sum()

loss = step(x, w)
loss.backward()
wt = w.detach().to("tpu").requires_grad_()
tpu_loss = torch.compile(step, backend="tpu")(x.to("tpu"), wt)
tpu_loss.backward()
torch.testing.assert_close(tpu_loss.cpu(), loss, rtol=1e-4, atol=1e-5)
torch.testing.assert_close(wt.grad.cpu(), w.grad, rtol=1e-4, atol=1e-5)
assert os.sched_getaffinity(0) == before, "the compiling thread kept one CPU"
dump = os.environ["XLA_FLAGS"].split("=")[1].split()[0]
split = sum(
    open(f).read().count("outer_dimension_partitions")
    for f in glob.glob(dump + "/*after_optimizations.txt")
)
print(torch_tpu.metrics.snapshot()["compiles"], split)
"""


@pytest.mark.xla_cpu_shortcut
def test_one_core_compile_splits_no_loop_and_is_cached_apart(tmp_path):
    # TORCH_TPU_CPU_ONE_CORE_COMPILE=1 compiles on one CPU, so XLA:CPU splits none of the
    # program's loops between threads (XLA's own dump shows where it splits). The results
    # are the same; the main thread gets its CPUs back; entries compiled one way are not
    # served to a process compiling the other way; a bad value is named.
    cache = str(tmp_path / "cache")
    runs = []
    for value in ("0", "1", "1"):
        # XLA_FLAGS is part of the cache's identity: the same flags for the same setting.
        flags = f"--xla_dump_to={tmp_path / ('dump' + value)} --xla_dump_hlo_as_text"
        run = run_python(
            ONE_CORE_SCRIPT,
            TORCH_TPU_CACHE_DIR=cache,
            TORCH_TPU_CPU_ONE_CORE_COMPILE=value,
            XLA_FLAGS=flags,
        )
        assert run.returncode == 0, run.stderr
        runs.append([int(word) for word in run.stdout.split()[-2:]])
    (compiles_off, split_off), (compiles_on, split_on), (compiles_again, _) = runs
    assert compiles_off > 0 and compiles_on > 0  # nothing reused across the setting
    assert compiles_again == 0  # entries compiled for one core serve a process that asks
    if len(os.sched_getaffinity(0)) > 1:  # with one CPU, nothing is split either way
        assert split_off > 0 and split_on == 0
    run = run_python(ONE_CORE_SCRIPT, TORCH_TPU_CACHE_DIR=cache, TORCH_TPU_CPU_ONE_CORE_COMPILE="2")
    assert run.returncode != 0
    assert "TORCH_TPU_CPU_ONE_CORE_COMPILE must be 0 or 1, got '2'" in run.stderr
