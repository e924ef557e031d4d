"""torch.compile(backend="tpu") on the example GPT's training step, against the eager
modes, PyTorch CPU eager and torch.compile with Inductor on the CPU, all in one run;
then the time to the first compiled step in a fresh process, with a cold and a warm
compile cache (TORCH_TPU_CACHE_DIR in a temporary directory).

    python bench/compile.py [--repeats 5] [--threads N]

The compiled step is the whole training step (forward, backward, AdamW's step and
zero_grad) under one torch.compile. Ratios are against PyTorch CPU eager (> 1 is slower).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_START = time.perf_counter()

import torch  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "examples")]
from run import gpt_step as eager_gpt_step  # noqa: E402
from run import timed  # noqa: E402

import torch_tpu  # noqa: E402

CASES = [
    # (label, device, eager mode or None, torch.compile backend or None)
    ("tpu, torch.compile(backend='tpu')", "tpu", None, "tpu"),
    ("tpu, strict eager", "tpu", "strict", None),
    ("tpu, defer_and_fuse eager", "tpu", "defer_and_fuse", None),
    ("CPU, PyTorch eager", "cpu", None, None),
    ("CPU, torch.compile(backend='inductor')", "cpu", None, "inductor"),
]


def gpt_step(device: str, backend: str | None):
    """bench/run.py's GPT training step (2 layers, width 64, batch 16x32), compiled with
    `backend` when one is given."""
    step, _ = eager_gpt_step(device)
    return torch.compile(step, backend=backend) if backend else step


def measure(device: str, mode: str | None, backend: str | None, repeats: int) -> float:
    if mode is None:
        return timed(gpt_step(device, backend), device, repeats, inner=5)
    with torch_tpu.eager_mode(mode):
        return timed(gpt_step(device, backend), device, repeats, inner=5)


def first_step() -> None:
    """In a fresh process: seconds from start to the first compiled step's loss."""
    begin = time.perf_counter()
    loss = gpt_step("tpu", "tpu")().item()
    now = time.perf_counter()
    stats = torch_tpu.metrics.snapshot()
    print(
        json.dumps(
            {
                "total": now - _START,
                "first_step": now - begin,
                "compiles": stats["compiles"],
                "compile_seconds": stats["compile_seconds"],
                "loss": loss,
            }
        )
    )


def cold_and_warm() -> list[dict]:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache)
        runs = []
        for _ in ("cold", "warm"):
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--first-step"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
        return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="PyTorch's CPU threads (use 1 on a busy machine: contended threads spin)",
    )
    parser.add_argument("--first-step", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_step:
        first_step()
        return
    torch.set_num_threads(args.threads)
    times = {}
    for label, device, mode, backend in CASES:
        times[label] = measure(device, mode, backend, args.repeats)
    cpu = times["CPU, PyTorch eager"]
    print("| GPT training step (2 layers, width 64, batch 16x32) | ms | / CPU eager |")
    print("|---|---:|---:|")
    for label, seconds in times.items():
        print(f"| {label} | {seconds * 1e3:.2f} | {seconds / cpu:.2f} |")
    print(
        f"\nmedian of {args.repeats} repeats of 5 steps; {torch_tpu.platform()} platform, "
        f"{torch.get_num_threads()} CPU threads"
    )
    print("\n| first compiled step, fresh process | total (s) | first step (s) | compiles |")
    print("|---|---:|---:|---|")
    for name, run in zip(("cold cache", "warm cache"), cold_and_warm()):
        print(
            f"| {name} | {run['total']:.2f} | {run['first_step']:.2f} | {run['compiles']} "
            f"({run['compile_seconds']:.2f} s compiling) |"
        )


if __name__ == "__main__":
    main()
