"""Benchmarks of the tpu device's eager modes against PyTorch CPU eager, in one run.

    python bench/run.py [--repeats 7] [--cases chain,gpt]

Prints a table: per case, the median time (of several repeats, after warm-up) of
PyTorch CPU eager and of tpu in the strict and defer_and_fuse modes, the ratios
against the CPU (> 1 means tpu is slower) and defer_and_fuse's speed-up over strict.
On the CPU PJRT plugin everything runs on the same cores, so the ratios measure
torch_tpu's overhead and XLA's fusion, not an accelerator's speed. A second table
covers greedy decoding, where a growing key/value cache changes shapes every step, and a
third (`--cases products`) lone float32 matrix products in the strict mode with the CPU
platform's host matmul kernels (PyTorch's BLAS called from the program) and with XLA's own
dot (the kernels switched off), against PyTorch CPU eager.
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
from generate_gpt import generate_bucketed, generate_cached  # noqa: E402
from gpt import GPT, Config, batches  # noqa: E402
from train_cnn import batches as image_batches  # noqa: E402
from train_cnn import make_model  # noqa: E402

import torch_tpu  # noqa: E402,F401


def sync(device: str) -> None:
    if device == "tpu":
        torch.tpu.synchronize()


def timed(fn, device: str, repeats: int, inner: int, warmup: int = 3) -> float:
    """Median seconds per call of fn over `repeats` runs of `inner` calls (after warm-up).
    In the defer_and_fuse mode each call ends with torch_tpu.sync(), as a training
    loop's step would, so every call runs the same fused program."""
    deferred = device == "tpu" and torch_tpu.get_eager_mode() == "defer_and_fuse"

    def call():
        fn()
        if deferred:
            torch_tpu.sync()

    for _ in range(warmup):
        call()
    sync(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            call()
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


def elementwise_chain(device: str):
    x = torch.randn(1 << 20, device=device)
    out = [x]

    def step():
        y = x
        for i in range(10):
            y = torch.sin(y) if i % 2 else y * 1.0001
            y = y + 0.001
        out[0] = y  # kept alive, as a real program would use it

    return step, 1


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
        return loss

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


CASES = {
    "dispatch": ("small op dispatch (per op, 128 elements)", small_ops, 200),
    "chain": ("20 elementwise ops over 1M float32 elements", elementwise_chain, 5),
    "gpt": ("GPT training step (2 layers, width 64, batch 16x32)", gpt_step, 20),
    "cnn": ("CNN training step (2 conv layers, batch 32x3x16x16)", cnn_step, 20),
}
MODES = ("strict", "defer_and_fuse")
VARIANTS = ("cpu", *MODES)


def run_case(make, inner: int, repeats: int) -> tuple[dict[str, float], float]:
    """Median seconds per op/step of each variant, and the median over repeats of
    strict's time divided by defer_and_fuse's in the same repeat. The variants take
    turns within every repeat, so drifts in the machine's speed hit all of them alike.
    A repeat runs `inner` calls and then waits for the device, as a training loop
    that reads its loss every `inner` steps would."""
    calls = {}
    for variant in VARIANTS:
        device = "cpu" if variant == "cpu" else "tpu"
        with torch_tpu.eager_mode("strict" if variant == "cpu" else variant):
            calls[variant] = make(device)
            timed(calls[variant][0], device, repeats=1, inner=1)  # warm-up
    samples = {variant: [] for variant in VARIANTS}
    for _ in range(repeats):
        for variant in VARIANTS:
            device = "cpu" if variant == "cpu" else "tpu"
            step, per_call = calls[variant]
            with torch_tpu.eager_mode("strict" if variant == "cpu" else variant):
                samples[variant].append(timed(step, device, 1, inner, warmup=0) / per_call)
    speedup = statistics.median(s / d for s, d in zip(samples["strict"], samples["defer_and_fuse"]))
    return {v: statistics.median(samples[v]) for v in VARIANTS}, speedup


def decoding(repeats: int, new_tokens: int = 24) -> None:
    """Greedy decoding of a trained-shape GPT (random weights), per token."""
    torch.manual_seed(0)
    model = GPT(Config()).eval()
    prompt = torch.tensor([[7, 8, 9, 10]])
    variants = [
        ("CPU eager, growing cache", "cpu", None, generate_cached),
        ("tpu strict, growing cache", "tpu", "strict", generate_cached),
        ("tpu defer_and_fuse, growing cache", "tpu", "defer_and_fuse", generate_cached),
        ("tpu strict, bucketed cache", "tpu", "strict", generate_bucketed),
        ("tpu defer_and_fuse, bucketed cache", "tpu", "defer_and_fuse", generate_bucketed),
    ]
    print(
        f"\n| greedy decoding, {new_tokens} tokens | ms per token | compiles, first run |"
        " compiles, later runs |"
    )
    print("|---|---:|---:|---:|")
    for name, device, mode, generate in variants:
        m = model.to(device)
        p = prompt.to(device)
        with torch_tpu.eager_mode(mode or "strict"):
            before = torch_tpu.metrics.snapshot()["compiles"]
            generate(m, p, new_tokens)
            first = torch_tpu.metrics.snapshot()["compiles"] - before
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                generate(m, p, new_tokens)
                sync(device)
                samples.append((time.perf_counter() - start) / new_tokens)
            later = torch_tpu.metrics.snapshot()["compiles"] - before - first
        first_text = "-" if device == "cpu" else str(first)
        later_text = "-" if device == "cpu" else str(later)
        print(f"| {name} | {statistics.median(samples) * 1e3:.2f} | {first_text} | {later_text} |")


PRODUCT_SHAPES = [(512, 64, 64), (512, 64, 192), (512, 64, 256), (512, 256, 64), (2048, 256, 256)]


def products(repeats: int) -> None:
    """Lone float32 products, m x k by k x n, at the GPT step's sizes and one larger; the
    three variants take turns in every repeat."""
    if not torch_tpu._C._host_matmul_installed():
        print("\n(no host matmul kernels on this platform: products table skipped)")
        return
    print(
        "\n| product (m x k x n) | CPU eager (us) | tpu, host matmul (us) | tpu, XLA dot (us) |"
        " host / CPU | XLA / CPU |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    previous = torch_tpu._C._host_matmul_enabled()
    try:
        for m, k, n in PRODUCT_SHAPES:
            a, b = torch.randn(m, k), torch.randn(k, n)
            variants = {"cpu": (a, b), "host": (a.to("tpu"), b.to("tpu")), "xla": None}
            variants["xla"] = variants["host"]
            samples = {v: [] for v in variants}
            with torch_tpu.eager_mode("strict"):
                for _ in range(repeats + 1):  # the first round compiles: dropped
                    for variant, (x, y) in variants.items():
                        torch_tpu._C._set_host_matmul_enabled(variant != "xla")
                        device = "cpu" if variant == "cpu" else "tpu"
                        samples[variant].append(
                            timed(lambda x=x, y=y: x @ y, device, 1, 20, warmup=2)
                        )
            t = {v: statistics.median(s[1:]) * 1e6 for v, s in samples.items()}
            print(
                f"| {m} x {k} x {n} | {t['cpu']:.0f} | {t['host']:.0f} | {t['xla']:.0f} |"
                f" {t['host'] / t['cpu']:.2f} | {t['xla'] / t['cpu']:.2f} |"
            )
    finally:
        torch_tpu._C._set_host_matmul_enabled(previous)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cases", default=",".join([*CASES, "decode", "products"]))
    args = parser.parse_args()
    chosen = args.cases.split(",")
    torch.set_num_threads(os.cpu_count() or 1)
    print(
        "| case | CPU eager (ms) | strict (ms) | defer_and_fuse (ms) | strict / CPU |"
        " defer / CPU | defer speed-up over strict |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key, (name, make, inner) in CASES.items():
        if key not in chosen:
            continue
        t, speedup = run_case(make, inner, args.repeats)
        print(
            f"| {name} | {t['cpu'] * 1e3:.3f} | {t['strict'] * 1e3:.3f} | "
            f"{t['defer_and_fuse'] * 1e3:.3f} | {t['strict'] / t['cpu']:.2f} | "
            f"{t['defer_and_fuse'] / t['cpu']:.2f} | {speedup:.2f}x |"
        )
    if "decode" in chosen:
        decoding(args.repeats)
    if "products" in chosen:
        products(args.repeats)
    print(
        f"\nmedian of {args.repeats} repeats; {torch_tpu.platform()} platform, "
        f"{torch.get_num_threads()} CPU threads"
    )


if __name__ == "__main__":
    main()
