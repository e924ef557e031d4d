"""bench/accelerator.py, the training-step benchmark the accelerator check runs: its
variants run in their own processes and compute the same first loss as PyTorch on the CPU,
and bad requests are refused by name."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench", "accelerator.py")


def bench(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, BENCH, "--size", "tiny", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def rows(stdout: str) -> dict[str, list[str]]:
    return {
        line.split()[0]: line.split()
        for line in stdout.splitlines()
        if re.match(r"(tpu|cpu|cuda)-", line)
    }


def test_variants_train_the_same_model_as_pytorch_on_the_cpu():
    run = bench("--variants", "tpu-compiled,tpu-strict,cpu-eager", "--steps", "1", "--warmup", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    table = rows(run.stdout)
    assert set(table) == {"tpu-compiled", "tpu-strict", "cpu-eager"}
    assert "FAILED" not in run.stdout
    # columns: variant, step ms, tokens/s, MFU, vs base, warm-up s, compiles, 1st loss
    cpu_loss = float(table["cpu-eager"][7])
    for name in ("tpu-compiled", "tpu-strict"):
        assert abs(float(table[name][7]) - cpu_loss) < 2e-2 * cpu_loss, run.stdout
        assert float(table[name][1]) > 0
    assert "0.1M parameters, width 64, 2 layers" in run.stdout


def test_bad_requests_are_refused_by_name():
    run = bench("--variants", "tpu-fast")
    assert run.returncode != 0
    assert "unknown variants ['tpu-fast']" in run.stderr
    run = bench("--dim", "66", "--heads", "4")
    assert run.returncode != 0
    assert "--dim 66 must split into --heads 4" in run.stderr


def test_a_variant_that_dies_is_reported_and_the_others_still_run():
    # a vocabulary of no tokens: the variant fails in its own process, the table says so
    run = bench("--variants", "cpu-eager", "--steps", "1", "--warmup", "1", "--vocab", "0")
    assert run.returncode == 1
    assert re.search(r"cpu-eager\s+FAILED: ", run.stdout), run.stdout


def test_gpu_peaks_come_from_the_datasheet_by_name():
    # MFU's denominator on a GPU: the longest matching name wins (an H100 PCIe is slower
    # than an H100 SXM); a GPU not in the table has no figure rather than a guessed one.
    import math

    from torch_tpu._runtime.peak_flops import gpu_peak_flops, peak_flops

    assert gpu_peak_flops("NVIDIA H200") == 989e12
    assert gpu_peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert gpu_peak_flops("NVIDIA H100 PCIe") == 756e12
    assert gpu_peak_flops("NVIDIA GH200 480GB") == 989e12
    assert math.isnan(gpu_peak_flops("NVIDIA GeForce GTX 1080"))
    assert peak_flops("NVIDIA H200", "cuda", "0.115", None) == 989e12


def test_the_smoke_set_of_the_device_check_passes_here():
    # scripts/accelerator_check.sh runs it on a GPU or TPU; here, on the CPU plugin
    smoke = os.path.join(ROOT, "scripts", "accelerator_smoke.py")
    run = subprocess.run(
        [sys.executable, smoke], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "smoke: 11 of 11 checks passed" in run.stdout
    assert re.search(r"^PASS gpt_example_compiled ", run.stdout, re.M)
    run = subprocess.run(
        [sys.executable, smoke, "--only", "gpt_example_fast"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode != 0 and "unknown checks ['gpt_example_fast']" in run.stderr
