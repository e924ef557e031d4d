"""Compile-only targets (torch_tpu.targets, python -m torch_tpu.target_check): names checked
before a plugin sees them, programs compiled for TPUs and GPUs without one, the check of a
whole script, refusals and programs too big for the chip reported, a cache warmed for a
target, and discovery that passes over libtpu and the CUDA plugin on a machine without their
devices. Needs libtpu, jax-cuda13-pjrt and nvidia-cuda-nvcc (scripts/setup.sh --test)."""

import json
import os
import subprocess
import sys

import pytest
import torch
from fresh_process import ROOT, run_python

import torch_tpu
from torch_tpu import targets
from torch_tpu._runtime import plugin as plugin_discovery
from torch_tpu.targets import chips, gpu_config

ADD = """
module @m {
  func.func public @main(%a: tensor<128x256xf32>, %b: tensor<128x256xf32>) -> tensor<128x256xf32> {
    %0 = "stablehlo.add"(%a, %b) : (tensor<128x256xf32>, tensor<128x256xf32>) -> tensor<128x256xf32>
    "func.return"(%0) : (tensor<128x256xf32>) -> ()
  }
}
"""

# 50 GiB of float32 in, 50 GiB out: more than a v5e's 16 GiB or an H100's 80 GB.
HUGE = """
module @m {
  func.func public @main(%a: tensor<50x1024x1024x256xf32>) -> tensor<50x1024x1024x256xf32> {
    %0 = "stablehlo.negate"(%a) : (tensor<50x1024x1024x256xf32>) -> tensor<50x1024x1024x256xf32>
    "func.return"(%0) : (tensor<50x1024x1024x256xf32>) -> ()
  }
}
"""

# Interpolation matrices (a resample's products): the GPU compiler's default Triton tiling
# refuses these shapes; on a GPU its autotuner would pick another variant.
TILING = """
module @m {
  func.func public @main(%a: tensor<4x32x8x8xf32>, %w: tensor<3x8xf32>) -> tensor<4x32x3x3xf32> {
    %0 = "stablehlo.dot_general"(%a, %w) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [3], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]} : (tensor<4x32x8x8xf32>, tensor<3x8xf32>) -> tensor<4x32x8x3xf32>
    %1 = "stablehlo.dot_general"(%0, %w) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]} : (tensor<4x32x8x3xf32>, tensor<3x8xf32>) -> tensor<4x32x3x3xf32>
    "func.return"(%1) : (tensor<4x32x3x3xf32>) -> ()
  }
}
"""

# A custom call no compiler knows: refused by every target.
UNKNOWN_CALL = """
module @m {
  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.custom_call"(%a) {call_target_name = "no_such_kernel", api_version = 4 : i32, backend_config = {}} : (tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%0) : (tensor<4xf32>) -> ()
  }
}
"""


def _cli(*args, timeout=300, **env):
    environment = dict(os.environ, PYTHONPATH=ROOT, **env)
    return subprocess.run(
        [sys.executable, "-m", "torch_tpu.target_check", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


# --- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, topology, devices",
    [
        ("v6e", "1x1", 1),
        ("v6e:2x2", "2x2", 4),
        ("v5p:2x2x1", "2x2x1", 4),
        ("tpu7x:2x2x1", "2x2x1", 8),
        ("TPU7x:1x1x1", "1x1x1", 2),
        ("v5e:16x16", "16x16", 256),
        ("h100", "1x1x1", 1),
        ("H100:1x2x8", "1x2x8", 16),
        ("b200:1x1x8", "1x1x8", 8),
    ],
)
def test_target_names_are_read(text, topology, devices):
    name = chips.parse(text)
    assert (name.topology, name.devices) == (topology, devices)


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("v99:2x2", "unknown target chip 'v99'"),
        ("ironwood", "unknown target chip"),
        ("v6e:2x2x1", "the topology of v6e is NxN"),
        ("v5p:4x4", "NxNxN"),
        ("h100:8", "NxNxN"),
        ("h100:1x0x8", "positive"),
        ("v6e:axb", "positive"),
        ("", "empty target name"),
        ("v5e:100x100", "at most 9216"),
    ],
)
def test_a_bad_target_name_says_what_is_wrong_and_lists_the_valid_ones(text, complaint):
    with pytest.raises(targets.TargetNameError) as raised:
        chips.parse(text)
    assert complaint in str(raised.value)
    if "at most" not in complaint:
        assert "v6e:2x2" in str(raised.value) and "h100" in str(raised.value)


def test_gpu_target_configs_describe_every_field_the_compiler_divides_by():
    for chip in gpu_config.GPUS:
        text = gpu_config.target_config(chip)
        for field in (
            "core_count",
            "threads_per_warp",
            "clock_rate_ghz",
            "memory_bandwidth",
            "shared_memory_per_core",
            "cuda_compute_capability",
            "device_memory_size",
        ):
            assert field in text, (chip, field)
        assert "collective_memory_granularity" not in text  # unknown to the pinned plugin


# --- compiling one program -------------------------------------------------------------------


@pytest.mark.parametrize("target", ["v6e:1x1", "v5e:2x2", "tpu7x:2x2x1", "h100", "b200"])
def test_a_program_compiles_for_each_target_with_the_compilers_memory_figures(target):
    program = targets.compile_for(target, ADD)
    memory = program.memory()
    assert memory["arguments"] >= 2 * 128 * 256 * 4
    assert memory["outputs"] >= 128 * 256 * 4
    assert memory["peak"] >= memory["arguments"] + memory["outputs"] - memory["aliased"]
    costs = program.cost_analysis()
    if targets.parse(target).chip.platform == "tpu":
        assert costs["flops"] >= 128 * 256
        assert costs["bytes accessed"] >= 3 * 128 * 256 * 4
    else:
        assert costs == {}  # the GPU compiler has no cost analysis
    assert len(program.serialize()) > 100


def test_tpu_topologies_give_device_coordinates():
    devices = targets.load("v5e:2x2").devices()
    assert sorted(tuple(d["attributes"]["coords"]) for d in devices) == [
        (0, 0, 0),
        (0, 1, 0),
        (1, 0, 0),
        (1, 1, 0),
    ]
    assert {d["kind"] for d in devices} == {"TPU v5 lite"}


def test_a_refused_program_raises_with_the_compilers_message():
    with pytest.raises(RuntimeError) as raised:
        targets.compile_for("v6e:1x1", UNKNOWN_CALL)
    assert "compiling for v6e:1x1 failed" in str(raised.value)
    assert "no_such_kernel" in str(raised.value)


def test_a_gpu_tiling_the_compiler_refuses_without_a_gpu_falls_back_to_cublas(tmp_path):
    with pytest.warns(UserWarning, match="compiled with cuBLAS GEMMs .* after: .*tile sizes"):
        program = targets.compile_for("h100", TILING)
    assert program.memory()["arguments"] >= 4 * 32 * 8 * 8 * 4
    (tmp_path / "00000-resample.mlir").write_text(TILING)
    done = _cli("--target", "h100", "--target", "v6e:1x1", "--programs", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NOTE resample: compiled with cuBLAS GEMMs" in done.stdout
    assert done.stdout.count("compiled 1, refused 0") == 2


def test_a_missing_compiler_names_its_pip_package(monkeypatch):
    monkeypatch.setattr(targets, "_loaded", {})
    monkeypatch.setattr(targets, "_package_file", lambda module, filename: None)
    with pytest.raises(targets.TargetUnavailableError, match="pip install libtpu==0.0.51"):
        targets.load("v6e:1x1")
    with pytest.raises(targets.TargetUnavailableError, match="pip install jax-cuda13-pjrt==0.10.2"):
        targets.load("h100")


def test_missing_ptxas_names_its_pip_package(monkeypatch):
    monkeypatch.setattr(targets, "_loaded", {})
    monkeypatch.setattr(targets.os, "access", lambda path, mode: False)
    with pytest.raises(targets.TargetUnavailableError, match="pip install nvidia-cuda-nvcc"):
        targets.load("h100")


# --- checking what a process runs ------------------------------------------------------------


def test_also_compile_for_checks_every_program_the_block_runs():
    a = torch.randn(64, 32, device="tpu")
    with targets.also_compile_for("v6e:1x1", "h100") as check:
        ((a + 1).exp() * 2).sum().item()
    results = check.results()
    assert {r["target"] for r in results} == {"v6e:1x1", "h100"}
    tpu = [r for r in results if r["target"] == "v6e:1x1"]
    assert len(tpu) == len(results) // 2 >= 3  # add, exp, mul, sum: each its own program
    assert all(r["compiled"] for r in results), [r["error"] for r in results]
    assert any("exp" in r["label"] for r in tpu)
    assert sum(r["costs"].get("transcendentals", 0) for r in tpu) >= 64 * 32  # the exp


def test_64_bit_integer_products_equal_the_cpus_and_compile_for_a_tpu():
    # Values whose products need all 64 bits: a 32-bit product would wrap.
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-(2**20), 2**20, (5, 7), generator=g)
    b = torch.randint(-(2**20), 2**20, (7, 3), generator=g)
    c = torch.randint(-(2**20), 2**20, (4, 5, 7), generator=g)
    d = torch.randint(-(2**20), 2**20, (4, 7, 2), generator=g)
    v = torch.randint(-(2**20), 2**20, (7,), generator=g)
    cases = [
        lambda x, y, z, w, u: x @ y,
        lambda x, y, z, w, u: torch.bmm(z, w),
        lambda x, y, z, w, u: torch.einsum("bij,bjk->bik", z, w),
        lambda x, y, z, w, u: torch.mv(x, u),
        lambda x, y, z, w, u: torch.dot(u, u),
        lambda x, y, z, w, u: torch.addmm(x @ y, x, y, beta=2, alpha=3),
    ]
    with targets.also_compile_for("v6e:1x1") as check:
        for case in cases:
            expected = case(a, b, c, d, v)
            got = case(*(t.to("tpu") for t in (a, b, c, d, v))).cpu()
            assert got.dtype == torch.int64 and torch.equal(got, expected)
    results = check.results()
    assert results and all(r["compiled"] for r in results), [r["error"] for r in results]


def test_a_host_kernel_in_a_program_is_refused_naming_the_switch():
    if not torch_tpu.plugin_info()["xla_cpu_shortcuts"]:
        pytest.skip("the XLA:CPU shortcuts are off: no host kernel to refuse")
    a = torch.randn(64, 64, device="tpu")
    with targets.also_compile_for("v6e:1x1") as check:
        (a @ a).sum().item()
    refused = [r for r in check.results() if not r["compiled"]]
    assert refused and "TORCH_TPU_XLA_CPU_SHORTCUTS=0" in refused[0]["error"]
    assert "torch_tpu.host_" in refused[0]["error"]


def test_the_target_check_of_the_mlp_example_compiles_everything(tmp_path):
    out = tmp_path / "results.json"
    done = _cli(
        "--target", "v6e:1x1", "--target", "h100", "--json", str(out), "examples/train_mlp.py"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "loss tpu" in done.stdout  # the script ran, unchanged
    assert "== v6e:1x1" in done.stdout and "== h100" in done.stdout
    assert "refused 0, over HBM 0" in done.stdout
    results = json.loads(out.read_text())
    assert len({r["program_hash"] for r in results}) >= 10
    assert all(r["compiled"] and r["fits"] for r in results)
    mm = [r for r in results if r["target"] == "v6e:1x1" and "mm" in r["label"]]
    assert mm and all(r["costs"]["flops"] > 0 for r in mm)  # matmuls, not host kernels


def test_a_script_that_raises_is_reported_after_its_table(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(
        "import torch, torch_tpu\n(torch.ones(3, device='tpu') * 2).sum().item()\n"
        "raise ValueError('the user script broke')\n"
    )
    done = _cli("--target", "v6e:1x1", str(script))
    assert done.returncode == 1
    assert "ValueError: the user script broke" in done.stderr
    assert "raised" in done.stderr
    assert "== v6e:1x1" in done.stdout and "refused 0" in done.stdout


def test_an_unknown_target_exits_2_listing_the_valid_ones(tmp_path):
    done = _cli("--target", "v7x", str(tmp_path / "never_run.py"))
    assert done.returncode == 2
    assert "unknown target chip 'v7x'" in done.stderr and "tpu7x:2x2x2" in done.stderr


def test_refused_and_oversized_programs_fail_the_check_naming_each(tmp_path):
    folder = tmp_path / "programs"
    folder.mkdir()
    (folder / "00000-aten.add.mlir").write_text(ADD)
    (folder / "00001-aten.add.mlir").write_text(ADD)  # the same text: checked once
    (folder / "00002-huge_graph.mlir").write_text(HUGE)
    (folder / "00003_777-custom.mlir").write_text(UNKNOWN_CALL)
    out = tmp_path / "results.json"
    done = _cli(
        "--target", "v5e:1x1", "--target", "h100", "--programs", str(folder), "--json", str(out)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    tpu, gpu = done.stdout.split("== h100")
    # The TPU compiler itself refuses a program over the chip's HBM; the GPU compiler compiles
    # it, and the check finds it too big from its memory figures.
    assert "programs: 3; compiled 1, refused 2, over HBM 0" in tpu
    assert "REFUSED huge_graph:" in tpu and "Ran out of memory on HBM" in tpu
    assert "programs: 3; compiled 2, refused 1, over HBM 1" in gpu
    assert "OVER HBM" in gpu
    for section in (tpu, gpu):
        assert "REFUSED custom:" in section and "no_such_kernel" in section
        assert str(folder / "00003_777-custom.mlir") in section
    results = json.loads(out.read_text())
    huge = [r for r in results if r["label"] == "huge_graph" and r["target"] == "h100"][0]
    assert huge["memory"]["arguments"] >= 50 * 2**30 and not huge["fits"]
    assert len([r for r in results if r["label"] == "aten.add"]) == 2  # once per target


def test_programs_are_checked_in_parallel_processes_with_the_same_results(tmp_path):
    folder = tmp_path / "programs"
    folder.mkdir()
    for i, n in enumerate((8, 16, 32, 64)):
        (folder / f"{i:05d}-add{n}.mlir").write_text(ADD.replace("128x256", f"{n}x{n}"))
    done = _cli("--target", "v6e:1x1", "--target", "h100", "--programs", str(folder), "--jobs", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("programs: 4; compiled 4, refused 0") == 2


def test_the_environment_variable_checks_a_whole_process():
    done = run_python(
        "import torch, torch_tpu\n"
        "x = torch.randn(16, 16, device='tpu')\n"
        "print((x @ x).relu().sum().item())\n",
        TORCH_TPU_ALSO_COMPILE_FOR="v6e:1x1,h100",
    )
    assert done.returncode == 0, done.stderr
    for name in ("v6e:1x1", "h100"):
        line = [ln for ln in done.stderr.splitlines() if ln.startswith(f"torch_tpu: {name}:")]
        assert line, done.stderr
        compiled, _, total = line[0].split(": ")[2].split(" programs")[0].partition(" of ")
        assert int(total) >= 2 and compiled == total, line  # matmul included: no host kernel


def test_a_bad_name_in_the_environment_variable_fails_at_import():
    done = run_python("import torch_tpu", TORCH_TPU_ALSO_COMPILE_FOR="v6e:1x1,gpu9000")
    assert done.returncode != 0
    assert (
        "TORCH_TPU_ALSO_COMPILE_FOR" in done.stderr
        and "unknown target chip 'gpu9000'" in done.stderr
    )


def test_a_warmed_cache_holds_the_programs_under_the_targets_identity(tmp_path):
    cache = tmp_path / "cache"
    script = tmp_path / "tiny.py"
    script.write_text(
        "import torch, torch_tpu\nprint((torch.ones(5, device='tpu') + 1).sum().item())\n"
    )
    done = _cli("--target", "v6e:1x1", "--warm-cache", str(cache), str(script))
    assert done.returncode == 0, done.stderr
    entries = [p for p in cache.rglob("*") if p.is_file()]
    assert len(entries) >= 2  # the add and the sum
    blob = b"".join(p.read_bytes() for p in entries)
    assert b"device_kind=TPU v6 lite" in blob and b"platform=tpu" in blob


# --- discovery -------------------------------------------------------------------------------


def test_device_presence_is_read_from_device_nodes_and_pci_vendors(tmp_path):
    assert not plugin_discovery.tpu_present(str(tmp_path))
    assert not plugin_discovery.nvidia_gpu_present(str(tmp_path))
    pci = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:00:04.0"
    pci.mkdir(parents=True)
    (pci / "vendor").write_text("0x8086\n")
    assert not plugin_discovery.tpu_present(str(tmp_path))
    (pci / "vendor").write_text("0x1ae0\n")
    (pci / "device").write_text("0x0042\n")  # Google's virtual NIC: no TPU
    assert not plugin_discovery.tpu_present(str(tmp_path))
    (pci / "device").write_text("0x006f\n")  # a v6e
    assert plugin_discovery.tpu_present(str(tmp_path))
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").write_text("")
    assert plugin_discovery.nvidia_gpu_present(str(tmp_path))


def test_with_libtpu_and_the_cuda_plugin_installed_a_machine_without_them_picks_cpu():
    assert targets.plugin_path("tpu") and targets.plugin_path("cuda")  # both installed here
    if plugin_discovery.tpu_present() or plugin_discovery.nvidia_gpu_present():
        pytest.skip("this machine has a TPU or a GPU")
    done = run_python(
        "import torch_tpu; print(torch_tpu.platform())",
        timeout=60,
        drop=("TORCH_TPU_PLATFORM", "TORCH_TPU_PJRT_PLUGIN"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "cpu"
