"""Offline vLLM serving: torch_tpu's platform (eager and compiled) against vLLM's own CPU backend
on the same machine, one table with ratios.

    python bench/serving.py [--requests 32] [--new-tokens 32] [--repeats 3] [--size small]
        [--variants "tpu eager,tpu compiled,vllm cpu"]

A random Llama made here (torch_tpu.serving.local_models, no download), prompts of mixed
lengths (8-96 tokens, seeded, the same for every variant), greedy decoding. Each variant runs
in a fresh process with an empty torch_tpu compile cache; the repeats interleave the variants
and the table gives medians. In each process: start-up (engine, warm-up) once, then the batch
twice untimed, then timed: time to first token (the batch with max_tokens=1: every prompt's
prefill) and throughput (generated tokens per second of the batch with --new-tokens each).
"vllm cpu" is vLLM's CPU platform (VLLM_TARGET_DEVICE=cpu), the reference a CPU-only machine
has; on a TPU or GPU the tpu rows are what moves.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _variants import in_fresh_process  # noqa: E402

VARIANTS = {
    "tpu eager": {},
    "tpu compiled": {},
    "vllm cpu": {"VLLM_TARGET_DEVICE": "cpu"},
}


def _prompts(args) -> list[list[int]]:
    rng = random.Random(0)
    return [
        [rng.randrange(3, 380) for _ in range(rng.randrange(8, 97))] for _ in range(args.requests)
    ]


def _one(args) -> dict:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM, SamplingParams

    started = time.perf_counter()
    llm = LLM(
        model=args.model,
        dtype="float32",
        max_model_len=256,
        max_num_seqs=32,
        max_num_batched_tokens=512,
        kv_cache_memory_bytes=1 << 28,
        # vLLM CPU runs compiled (its default, its best); "tpu eager" is --enforce-eager.
        enforce_eager=args.one == "tpu eager",
        seed=0,
    )
    startup = time.perf_counter() - started
    prompts = [{"prompt_token_ids": p} for p in _prompts(args)]
    first = SamplingParams(temperature=0, max_tokens=1)
    full = SamplingParams(temperature=0, max_tokens=args.new_tokens, ignore_eos=True)
    for _ in range(2):
        llm.generate(prompts, full, use_tqdm=False)
    started = time.perf_counter()
    llm.generate(prompts, first, use_tqdm=False)
    ttft = time.perf_counter() - started
    started = time.perf_counter()
    outputs = llm.generate(prompts, full, use_tqdm=False)
    seconds = time.perf_counter() - started
    generated = sum(len(o.outputs[0].token_ids) for o in outputs)
    return {"startup": startup, "ttft": ttft, "tokens_per_second": generated / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", default="small")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args)))
        return

    from torch_tpu.serving.local_models import make_model

    variants = [v.strip() for v in args.variants.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        model = make_model(os.path.join(directory, "llama"), "llama", 256, size=args.size)
        argv = [
            "--model",
            model,
            "--requests",
            str(args.requests),
            "--new-tokens",
            str(args.new_tokens),
        ]
        runs = {v: [] for v in variants}
        for _ in range(args.repeats):
            for variant in variants:
                runs[variant].append(
                    in_fresh_process(__file__, variant, argv, env=VARIANTS[variant])
                )
    median = {v: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for v, rs in runs.items()}
    base = median.get("vllm cpu")
    print(
        f"{args.requests} requests, prompts 8-96 tokens, {args.new_tokens} new tokens each, "
        f"{args.size} Llama, median of {args.repeats}"
    )
    print(f"{'variant':<14}{'start-up s':>12}{'TTFT s':>10}{'tokens/s':>12}{'vs vllm cpu':>14}")
    for v, m in median.items():
        ratio = f"{m['tokens_per_second'] / base['tokens_per_second']:.2f}x" if base else "-"
        print(
            f"{v:<14}{m['startup']:>12.1f}{m['ttft']:>10.3f}"
            f"{m['tokens_per_second']:>12.1f}{ratio:>14}"
        )


if __name__ == "__main__":
    main()
