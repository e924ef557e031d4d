"""The examples run with TORCH_TPU_CPU_FALLBACK=error: every op they reach is native.
Each example checks its own results against the CPU and exits non-zero otherwise."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("example", ["train_mlp", "train_gpt", "train_cnn", "generate_gpt"])
def test_example_runs_natively_and_matches_cpu(example):
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", f"{example}.py")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TORCH_TPU_CPU_FALLBACK": "error", "PYTHONPATH": ROOT},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
