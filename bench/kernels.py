"""JAX and Pallas kernels (torch_tpu.kernels.jax_op) against the native tpu ops, in one run.

    python bench/kernels.py [--repeats 7]

Cases: RMSNorm (examples/pallas_kernels.py's Pallas kernel vs F.rms_norm) and causal
attention (its Pallas flash attention vs F.scaled_dot_product_attention), forward alone
and forward + backward, strict eager and torch.compile(backend="tpu"); the variants are
interleaved within each repeat and the table gives medians. Ratio = kernel / native
(> 1: the kernel is slower). On the CPU platform Pallas runs in interpret mode (a
StableHLO loop over the grid), so the ratio says what interpret mode costs, not what
Mosaic does on a TPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
from torch.nn import functional as F

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "examples"))
import pallas_kernels  # noqa: E402

import torch_tpu  # noqa: E402


def rms_case(kernel: bool, backward: bool):
    x = torch.randn(64, 128, 256, device="tpu", requires_grad=backward)
    w = torch.ones(256, device="tpu", requires_grad=backward)
    if kernel:
        return lambda: pallas_kernels.rms_norm(x, w, 1e-6), (x, w)
    return lambda: F.rms_norm(x, (256,), w, eps=1e-6), (x, w)


def attention_case(kernel: bool, backward: bool):
    q, k, v = (torch.randn(4, 4, 256, 64, device="tpu", requires_grad=backward) for _ in range(3))
    if kernel:
        return lambda: pallas_kernels.flash_attention(q, k, v), (q, k, v)
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v)


def step(make, kernel: bool, backward: bool, compiled: bool):
    fn, inputs = make(kernel, backward)
    if compiled:
        fn = torch.compile(fn, backend="tpu")

    def run():
        out = fn()
        if backward:
            out.sum().backward()
            for t in inputs:
                t.grad = None
        return out

    return run


def seconds(run, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        out = run()
    torch.tpu.synchronize()
    del out
    return (time.perf_counter() - start) / inner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--inner", type=int, default=3)
    args = parser.parse_args()
    print("| case | mode | native ms | kernel ms | kernel / native |")
    print("|---|---|---:|---:|---:|")
    for name, make in (
        ("RMSNorm 64x128x256", rms_case),
        ("causal attention 4x4x256x64", attention_case),
    ):
        for backward in (False, True):
            for compiled in (False, True):
                runs = {k: step(make, k, backward, compiled) for k in (False, True)}
                for run in runs.values():  # warm-up: lowering and compiling
                    seconds(run, 2)
                samples = {False: [], True: []}
                for _ in range(args.repeats):
                    for kernel, run in runs.items():
                        samples[kernel].append(seconds(run, args.inner))
                native, ours = (statistics.median(samples[k]) for k in (False, True))
                label = f"{name}, {'fwd+bwd' if backward else 'forward'}"
                mode = "torch.compile" if compiled else "strict"
                print(
                    f"| {label} | {mode} | {native * 1e3:.2f} | {ours * 1e3:.2f} | "
                    f"{ours / native:.2f} |"
                )
    print(
        f"\nmedian of {args.repeats} repeats x {args.inner} calls; "
        f"{torch_tpu.platform()} platform (Pallas in interpret mode on cpu)"
    )


if __name__ == "__main__":
    main()
