"""The examples run with TORCH_TPU_CPU_FALLBACK=error: every op they reach is native.
Each example checks its own results against the CPU and exits non-zero otherwise; the
training examples do so in the defer_and_fuse mode too."""

import os
import subprocess
import sys

import pytest
from ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
    "example,mode",
    [
        ("train_mlp", "strict"),
        ("train_gpt", "strict"),
        ("train_cnn", "strict"),
        ("generate_gpt", "strict"),
        ("train_gpt", "defer_and_fuse"),
        ("train_cnn", "defer_and_fuse"),
        ("pallas_kernels", "strict"),
    ],
)
def test_example_runs_natively_and_matches_cpu(example, mode):
    env = {
        **os.environ,
        "TORCH_TPU_CPU_FALLBACK": "error",
        "TORCH_TPU_EAGER_MODE": mode,
        "PYTHONPATH": ROOT,
    }
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", f"{example}.py")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]


@pytest.mark.parametrize("example", ["train_ddp", "train_fsdp"])
def test_distributed_example_under_torchrun(example):
    """The README's torchrun commands: 2 ranks, natively, checked against one process."""
    env = {**os.environ, "TORCH_TPU_CPU_FALLBACK": "error", "PYTHONPATH": ROOT}
    env.pop("TORCH_TPU_CPU_DEVICES", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={free_port()}",
            os.path.join(ROOT, "examples", f"{example}.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-4000:]
    assert "OK" in result.stdout
