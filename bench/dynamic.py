"""A training loop with dynamic padding (each batch padded to its own longest
sequence, as Hugging Face's data collators do) under torch.compile(backend="tpu"):
with size buckets (the default), without them (TORCH_TPU_DYNAMIC_BUCKETS=0: a program
per distinct length), with every batch padded to the longest length (one static
shape, padded targets ignored by the loss), the same loop in the defer_and_fuse eager mode
without and with eager size buckets (``torch_tpu.set_dynamic_buckets``), and PyTorch CPU
eager on the same loop.

    python bench/dynamic.py [--steps 120] [--batch 8] [--min-length 16] [--max-length 512]
        [--distribution log-uniform|uniform]
        [--variants buckets,no buckets,pad to max,eager,eager buckets,cpu eager]

Lengths are drawn from a fixed seeded distribution (log-uniform by default: many short
batches, few long ones, as in fine-tuning data; or uniform), the same for every variant; each
variant runs in a fresh process with an empty compile cache (TORCH_TPU_CACHE_DIR in a
temporary directory), from the same weights. Columns: programs compiled
(torch_tpu.metrics: the graphs' and the optimizer's), total time of the loop (compiles
included), steady step time (median over the last half of the steps, each step waited
for) and the final loss; ratios are against PyTorch CPU eager. The variants run one after
another, not interleaved: what is measured is a whole loop, compiles included.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
from torch.nn import functional as F

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "examples"))
from _variants import in_fresh_process  # noqa: E402
from gpt import GPT, Config  # noqa: E402

import torch_tpu  # noqa: E402


def _length(args, generator) -> int:
    """One batch's longest sequence: log-uniform by default (as in fine-tuning data,
    where short examples are many and long ones few), or uniform."""
    u = float(torch.rand((), generator=generator))
    if args.distribution == "uniform":
        return args.min_length + int(u * (args.max_length - args.min_length + 1))
    low, high = math.log(args.min_length), math.log(args.max_length + 1)
    return min(int(math.exp(low + u * (high - low))), args.max_length)


def _batches(args, config):
    generator = torch.Generator().manual_seed(0)
    for _ in range(args.steps):
        length = _length(args, generator)
        start = torch.randint(0, config.vocab, (args.batch, 1), generator=generator)
        seq = (start + torch.arange(length + 1)) % config.vocab
        yield seq[:, :-1], seq[:, 1:]


def _loss(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100)


def _run(variant: str, args, config) -> dict:
    device = "cpu" if variant == "cpu eager" else "tpu"
    torch.manual_seed(0)
    model = GPT(config)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # Padded to the maximum, every batch has one shape: compiled as a static graph.
    dynamic = variant != "pad to max"
    eager = device == "cpu" or variant.startswith("eager")
    step = _loss if eager else torch.compile(_loss, backend="tpu", dynamic=dynamic)
    if variant.startswith("eager"):
        torch_tpu.set_eager_mode("defer_and_fuse")
        torch_tpu.set_dynamic_buckets(variant == "eager buckets")
    if device == "tpu":
        torch_tpu.metrics.reset()
    times = []
    start = time.perf_counter()
    loss = None
    for x, y in _batches(args, config):
        if variant == "pad to max":
            pad = args.max_length - x.shape[1]
            x, y = F.pad(x, (0, pad)), F.pad(y, (0, pad), value=-100)
        t0 = time.perf_counter()
        loss = step(model, x.to(device), y.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        if device == "tpu":
            torch.tpu.synchronize()
        times.append(time.perf_counter() - t0)
    total = time.perf_counter() - start
    counters = torch_tpu.metrics.snapshot() if device == "tpu" else {}
    return {
        "compiles": counters.get("compiles", 0),
        "compile_s": counters.get("compile_seconds", 0.0),
        "total": total,
        "step": statistics.median(times[len(times) // 2 :]),
        "loss": float(loss.detach()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--min-length", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--distribution", choices=("log-uniform", "uniform"), default="log-uniform")
    parser.add_argument(
        "--variants", default="buckets,no buckets,pad to max,eager,eager buckets,cpu eager"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a variant, in this process
    args = parser.parse_args()
    config = Config(vocab=64, context=args.max_length, width=64, heads=4, layers=2)
    if args.one:
        print(json.dumps(_run(args.one, args, config)))
        return
    argv = [
        f"--steps={args.steps}",
        f"--batch={args.batch}",
        f"--min-length={args.min_length}",
        f"--max-length={args.max_length}",
        f"--distribution={args.distribution}",
    ]
    lengths = {x.shape[1] for x, _ in _batches(args, config)}
    print(
        f"GPT {sum(p.numel() for p in GPT(config).parameters()) / 1e6:.2f}M parameters, "
        f"batch {args.batch}, {args.steps} steps, {len(lengths)} distinct lengths in "
        f"[{args.min_length}, {args.max_length}] ({args.distribution}), AdamW"
    )
    results = {v: in_fresh_process(__file__, v, argv) for v in args.variants.split(",")}
    base = results.get("cpu eager")
    columns = ("programs", "compile s", "total s", "step ms", "total/CPU", "step/CPU", "loss")
    print(f"{'variant':<14} " + " ".join(f"{c:>9}" for c in columns))
    for name, r in results.items():
        ratio_total = f"{r['total'] / base['total']:.2f}" if base else "-"
        ratio_step = f"{r['step'] / base['step']:.2f}" if base else "-"
        print(
            f"{name:<14} {r['compiles']:>9} {r['compile_s']:>9.1f} {r['total']:>9.1f} "
            f"{r['step'] * 1e3:>9.1f} "
            f"{ratio_total:>9} {ratio_step:>9} {r['loss']:>9.3f}"
        )


if __name__ == "__main__":
    main()
