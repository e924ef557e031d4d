"""Benchmarks of the tpu device against PyTorch CPU eager, measured in the same run.

    python bench/run.py [--repeats 5]

Prints a table: per-case median time (of several repeats) on tpu and on the CPU and
their ratio (> 1 means tpu is slower). On the CPU PJRT plugin both run on the same
cores, so the ratio measures torch_tpu's overhead, not an accelerator's speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from gpt import GPT, Config, batches  # noqa: E402
from train_cnn import batches as image_batches  # noqa: E402
from train_cnn import make_model  # noqa: E402

import torch_tpu  # noqa: E402,F401


def sync(device: str) -> None:
    if device == "tpu":
        torch.tpu.synchronize()


def timed(fn, device: str, repeats: int, inner: int) -> float:
    """Median seconds per call of fn over `repeats` runs of `inner` calls (after warm-up)."""
    for _ in range(2):
        fn()
    sync(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def small_ops(device: str):
    x = torch.randn(128, device=device)
    y = torch.randn(128, device=device)

    def step():
        z = x + y
        z = z * 0.5
        z = z.relu()
        return z.sum()

    return step, 4  # ops per call


def gpt_step(device: str):
    torch.manual_seed(0)
    config = Config()
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = next(batches(config, batch=16, steps=1))
    x, y = x.to(device), y.to(device)

    def step():
        loss = F.cross_entropy(model(x).reshape(-1, config.vocab), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step, 1


def cnn_step(device: str):
    torch.manual_seed(0)
    model = make_model(0.25).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images, labels = next(image_batches(1))
    images, labels = images.to(device), labels.to(device)

    def step():
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step, 1


CASES = [
    ("small op dispatch (per op, 128 elements)", small_ops, 200),
    ("GPT training step (2 layers, width 64, batch 16x32)", gpt_step, 5),
    ("CNN training step (2 conv layers, batch 32x3x16x16)", cnn_step, 5),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    print("| case | tpu (ms) | CPU eager (ms) | tpu / CPU |")
    print("|---|---:|---:|---:|")
    for name, make, inner in CASES:
        times = {}
        for device in ("tpu", "cpu"):
            step, per_call = make(device)
            times[device] = timed(step, device, args.repeats, inner) / per_call
        ratio = times["tpu"] / times["cpu"]
        print(f"| {name} | {times['tpu'] * 1e3:.3f} | {times['cpu'] * 1e3:.3f} | {ratio:.2f} |")
    print(
        f"\nmedian of {args.repeats} repeats; {torch_tpu.platform()} platform, "
        f"{torch.get_num_threads()} CPU threads"
    )


if __name__ == "__main__":
    main()
