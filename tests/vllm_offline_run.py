"""Runs vLLM's offline LLM() on the tpu platform and prints what tests/test_serving.py checks,
as one JSON line: greedy tokens for fixed prompts, programs compiled after warm-up while 20
requests of mixed lengths are served, and prefix-cache hits for a repeated long prompt.

A script (not an import in the test process) because vLLM's engine sets process-wide state:
the eager mode, Dynamo's compiled code, the distributed group.

    python tests/vllm_offline_run.py MODEL_DIR eager|compiled|bf16|tp2 PROMPTS_JSON

bf16: eager, the model in bfloat16.

tp2: tensor parallel over two devices, in eager mode; only the greedy tokens (its workers are
processes of their own, so this process's counters say nothing about them).
"""

import json
import os
import random
import sys

# The engine in this process, so torch_tpu.metrics counts its compiles.
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

from vllm import LLM, SamplingParams  # noqa: E402

import torch_tpu.metrics  # noqa: E402

LIMITS = dict(max_model_len=128, max_num_seqs=8, max_num_batched_tokens=64)


def programs_built() -> int:
    """Programs compiled, or loaded from torch_tpu's disk cache instead of compiled."""
    counters = torch_tpu.metrics.snapshot()
    return counters["compiles"] + counters["disk_hits"]


def prefix_cache_hits(llm) -> float:
    return sum(
        metric.value
        for metric in llm.get_metrics()
        if metric.name == "vllm:prefix_cache_hits" and hasattr(metric, "value")
    )


def main(model: str, mode: str, prompts: list[list[int]]) -> dict:
    llm = LLM(
        model=model,
        dtype="bfloat16" if mode == "bf16" else "float32",
        kv_cache_memory_bytes=1 << 24,
        enforce_eager=mode != "compiled",
        tensor_parallel_size=2 if mode == "tp2" else 1,
        seed=0,
        disable_log_stats=False,
        **LIMITS,
    )
    greedy = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    before = programs_built()
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], greedy)
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    if mode == "tp2":
        return {"tokens": tokens}

    rng = random.Random(0)
    mixed = [[rng.randrange(3, 380) for _ in range(rng.randrange(1, 60))] for _ in range(20)]
    lengths = [SamplingParams(temperature=0, max_tokens=rng.randrange(1, 30)) for _ in mixed]
    llm.generate([{"prompt_token_ids": p} for p in mixed], lengths)
    # A seeded random sample: drawn on the device with the request's own tpu generator.
    seeded = SamplingParams(temperature=1.0, max_tokens=8, seed=7, ignore_eos=True)
    twice = [llm.generate([{"prompt_token_ids": prompts[0]}], seeded)[0] for _ in range(2)]
    compiles = programs_built() - before

    long_prompt = {"prompt_token_ids": [rng.randrange(3, 380) for _ in range(70)]}
    hits_before = prefix_cache_hits(llm)
    llm.generate([long_prompt], SamplingParams(temperature=0, max_tokens=2))
    llm.generate([long_prompt], SamplingParams(temperature=0, max_tokens=2))
    return {
        "tokens": tokens,
        "compiles_after_warm_up": compiles,
        "seeded_samples": [list(o.outputs[0].token_ids) for o in twice],
        "prefix_cache_hits": prefix_cache_hits(llm) - hits_before,
    }


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
    print("RESULT " + json.dumps(result), flush=True)
