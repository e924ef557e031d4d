"""Elementwise ops whose lowering on the CPU platform avoids XLA:CPU's per-element libm calls
or the CPU fallback (pow by a small integer, atan/asin/acos/atan2, log1p and what is built on
it, exp2, erfc, the inverse hyperbolic functions, sinc, logaddexp, hypot) and attention, against
PyTorch's CPU eager in the same run.

    python bench/ops.py [--repeats 7] [--size 512]

Prints a table: median microseconds per call of the compiled function on tpu (torch.compile,
backend "tpu"), the same in strict eager mode, and PyTorch CPU eager; calls are synchronized
every 20, variants take turns, each after 10 untimed calls (PyTorch's OpenMP threads spin after
CPU work and slowed the tpu variant that followed by up to 3x).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import torch_tpu


def cases(size: int) -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(size, size, generator=g) * 1.8 - 0.9  # inside asin's and atanh's domain
    y = torch.randn(size, size, generator=g)
    q, k, v = (torch.randn(16, 4, 32, 16, generator=g) for _ in range(3))
    return {
        "x ** 2": (lambda a: a**2, (x,)),
        "atan": (torch.atan, (x,)),
        "asin": (torch.asin, (x,)),
        "atan2": (torch.atan2, (x, y)),
        "log1p": (torch.log1p, (x,)),
        "softplus": (F.softplus, (y,)),
        "BCE with logits": (
            lambda a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid()),
            (y, x),
        ),
        "exp2": (torch.exp2, (y,)),
        "erfc": (torch.erfc, (y,)),
        "atanh": (torch.atanh, (x,)),
        "asinh": (torch.asinh, (y,)),
        "sinc": (torch.sinc, (y,)),
        "logaddexp": (torch.logaddexp, (x, y)),
        "hypot": (torch.hypot, (x, y)),
        "causal attention, 16x4x32x16": (
            lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
            (q, k, v),
        ),
    }


def timed(fn, args, sync, inner: int = 20) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn(*args)
    sync()
    return (time.perf_counter() - start) / inner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--size", type=int, default=512)
    options = parser.parse_args()

    def device_sync():
        torch.tpu.synchronize()

    print(
        f"| op ({options.size}x{options.size} float32) | tpu compiled (us) | tpu strict (us) "
        "| CPU eager (us) | compiled / CPU |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, (fn, cpu_args) in cases(options.size).items():
        torch._dynamo.reset()
        tpu_args = tuple(a.to("tpu") for a in cpu_args)
        compiled = torch.compile(fn, backend="tpu")
        variants = {
            "compiled": (compiled, tpu_args, device_sync),
            "strict": (fn, tpu_args, device_sync),
            "cpu": (fn, cpu_args, lambda: None),
        }
        times = {label: [] for label in variants}
        with torch_tpu.eager_mode("strict"):
            for f, args, sync in variants.values():
                timed(f, args, sync, inner=3)  # compile and warm up
            for _ in range(options.repeats):
                for label, (f, args, sync) in variants.items():
                    # Untimed calls first: PyTorch's OpenMP threads spin for a while after CPU
                    # work and take the cores from the XLA threads of the variant after it.
                    timed(f, args, sync, inner=10)
                    times[label].append(timed(f, args, sync))
        median = {label: statistics.median(t) * 1e6 for label, t in times.items()}
        print(
            f"| {name} | {median['compiled']:.0f} | {median['strict']:.0f} | "
            f"{median['cpu']:.0f} | {median['compiled'] / median['cpu']:.2f} |"
        )
    print(
        f"\nmedian of {options.repeats} repeats of 20 calls; {torch_tpu.platform()} platform, "
        f"{torch.get_num_threads()} CPU threads"
    )


if __name__ == "__main__":
    main()
