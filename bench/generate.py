"""Hugging Face generate() over prompts of varied lengths and batch sizes, with the
model's forward under torch.compile(backend="tpu", dynamic=True): with size buckets (the
default), without them (TORCH_TPU_DYNAMIC_BUCKETS=0: a program per prompt length and per
cache length), and PyTorch CPU eager on the same prompts.

    python bench/generate.py [--prompts 20] [--new-tokens 16] [--min-length 8]
        [--max-length 128] [--variants buckets,no buckets,cpu eager]

A small Llama built from a config (no download), greedy decoding with its key/value cache.
Prompt lengths are drawn log-uniformly from a seeded generator and batch sizes cycle 1-8,
the same for every variant; each variant runs in a fresh process with an empty compile
cache, from the same weights. The prompts run twice: "first pass" includes every compile,
"second pass" is the same prompts again (what a server sees once warmed up). Columns:
programs compiled (torch_tpu.metrics, the graphs' and the eager operators' between them),
both passes' times, tokens per second of the second pass; ratios against CPU eager. Every
variant's tokens are checked against the CPU's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch

import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _variants import in_fresh_process  # noqa: E402


def _prompts(args):
    generator = torch.Generator().manual_seed(0)
    low, high = math.log(args.min_length), math.log(args.max_length + 1)
    for i in range(args.prompts):
        u = float(torch.rand((), generator=generator))
        length = min(int(math.exp(low + u * (high - low))), args.max_length)
        yield torch.randint(1, 256, (1 + i % 8, length), generator=generator)


def _model():
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _run(variant: str, args) -> dict:
    device = "cpu" if variant == "cpu eager" else "tpu"
    model = _model().to(device)
    if device == "tpu":
        model.forward = torch.compile(model.forward, backend="tpu", dynamic=True)
        torch_tpu.metrics.reset()
    options = dict(max_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0)
    passes, outputs = [], []
    with torch.no_grad():
        for _ in range(2):
            start = time.perf_counter()
            outputs = [model.generate(p.to(device), **options).cpu() for p in _prompts(args)]
            passes.append(time.perf_counter() - start)
    tokens = sum(o.shape[0] * args.new_tokens for o in outputs)
    counters = torch_tpu.metrics.snapshot() if device == "tpu" else {}
    return {
        "compiles": counters.get("compiles", 0),
        "first": passes[0],
        "second": passes[1],
        "tokens_per_s": tokens / passes[1],
        "tokens": [o.tolist() for o in outputs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--min-length", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--variants", default="buckets,no buckets,cpu eager")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a variant, in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_run(args.one, args)))
        return
    argv = [
        f"--prompts={args.prompts}",
        f"--new-tokens={args.new_tokens}",
        f"--min-length={args.min_length}",
        f"--max-length={args.max_length}",
    ]
    sizes = {tuple(p.shape) for p in _prompts(args)}
    print(
        f"Llama {sum(p.numel() for p in _model().parameters()) / 1e6:.2f}M parameters, "
        f"{args.prompts} prompts ({len(sizes)} distinct batch x length sizes, lengths in "
        f"[{args.min_length}, {args.max_length}], batches 1-8), {args.new_tokens} new tokens "
        "each, greedy"
    )
    results = {v: in_fresh_process(__file__, v, argv) for v in args.variants.split(",")}
    base = results.get("cpu eager")
    columns = ("programs", "1st pass s", "2nd pass s", "tokens/s", "2nd/CPU", "tokens")
    print(f"{'variant':<12} " + " ".join(f"{c:>10}" for c in columns))
    for name, r in results.items():
        ratio = f"{r['second'] / base['second']:.2f}" if base else "-"
        same = "-" if not base else ("= CPU" if r["tokens"] == base["tokens"] else "DIFFER")
        print(
            f"{name:<12} {r['compiles']:>10} {r['first']:>10.1f} {r['second']:>10.1f} "
            f"{r['tokens_per_s']:>10.1f} {ratio:>10} {same:>10}"
        )


if __name__ == "__main__":
    main()
