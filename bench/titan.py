"""TorchTitan's Llama 3 debug model on tpu: tokens/s and MFU, eager and compiled, 1 and 2
ranks, in one run.

    python bench/titan.py [--steps 12] [--batch 4] [--seq 512] [--model llama3|qwen3]

Builds the local assets (``python -m torch_tpu.titan.assets``) in a temporary folder, runs
TorchTitan unchanged (``torchrun -m torchtitan.train --module llama3 --config
llama3_debugmodel`` with the given batch and sequence length, a fixed seed, and
``--parallelism.spmd_backend partial_dtensor``, which FSDP2 in torch 2.13 needs) for each
variant, and prints a table of what rank 0 reported: the median tokens/s per rank and MFU
over the steps after the second (the first two compile), the total tokens/s, the peak
FLOP/s TorchTitan divided by (the device's ``peak_flops``: measured on the CPU, divided by
the ranks sharing the host) and the first and last loss. Variants run one after another;
on a busy machine run it twice. About 4 minutes on 2 cores with the defaults.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP = re.compile(r"step:\s*(\d+)\s+loss:\s*([0-9.]+).*?tps:\s*([0-9,]+).*?mfu:\s*([0-9.]+)%")
PEAK = re.compile(r"Peak FLOPS used for computing MFU: ([0-9.e+]+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cwd: str, ranks: int, args: list[str]) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": ROOT, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("TORCH_TPU_CPU_DEVICES", None)
    command = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
        f"--master_port={_free_port()}", "--local-ranks-filter", "0",
        "-m", "torchtitan.train", *args,
    ]  # fmt: skip
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    output = ANSI.sub("", result.stdout + result.stderr)
    if result.returncode != 0:
        raise SystemExit(f"torchtitan failed ({' '.join(args)}):\n{output[-4000:]}")
    steps = {int(m[1]): (float(m[2]), int(m[3].replace(",", "")), float(m[4]))
             for m in STEP.finditer(output)}  # fmt: skip
    return steps, float(PEAK.search(output)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--model", choices=["llama3", "qwen3"], default="llama3")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        subprocess.run(
            [sys.executable, "-m", "torch_tpu.titan.assets", root], check=True,
            capture_output=True, env={**os.environ, "PYTHONPATH": ROOT},
        )  # fmt: skip
        base = [
            "--module", options.model, "--config", f"{options.model}_debugmodel",
            "--training.local_batch_size", str(options.batch),
            "--training.seq_len", str(options.seq), "--training.steps", str(options.steps),
            "--checkpoint.no-enable", "--validator.no-enable", "--debug.seed", "42",
            "--parallelism.spmd_backend", "partial_dtensor",
        ]  # fmt: skip
        print(f"TorchTitan {options.model}_debugmodel, batch {options.batch} x {options.seq}"
              f" tokens per rank, steps 3-{options.steps} (median)\n")  # fmt: skip
        print("| run | tokens/s per rank | tokens/s in all | MFU | peak FLOP/s per device |"
              " loss first -> last |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---|")
        for ranks in (1, 2):
            for compiled in (False, True):
                extra = ["--compile.enable"] if compiled else []
                steps, peak = run(root, ranks, base + extra)
                steady = [steps[s] for s in sorted(steps) if s >= 3]
                tps = statistics.median(s[1] for s in steady)
                mfu = statistics.median(s[2] for s in steady)
                name = f"{ranks} rank{'s FSDP2' if ranks > 1 else ''}, "
                name += "compiled" if compiled else "eager"
                first, last = steps[min(steps)][0], steps[max(steps)][0]
                print(f"| {name} | {tps:.0f} | {tps * ranks:.0f} | {mfu:.1f}% | {peak:.3g} |"
                      f" {first:.3f} -> {last:.3f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
