"""Greedy generation with a key/value cache on tpu: trains the small GPT briefly,
then decodes one token at a time reusing cached keys and values, and checks the
tokens against full recomputation on the CPU.

    TORCH_TPU_CPU_FALLBACK=error python examples/generate_gpt.py
"""

from __future__ import annotations

import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, Config  # noqa: E402
from train_gpt import train_model  # noqa: E402

import torch_tpu  # noqa: E402


@torch.no_grad()
def generate_cached(model: GPT, prompt: torch.Tensor, new_tokens: int) -> list[int]:
    caches = [[None, None] for _ in model.blocks]
    logits = model(prompt, caches)  # the prompt fills the caches
    tokens = prompt[0].tolist()
    for _ in range(new_tokens):
        token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens.append(token.item())
        logits = model(token, caches, start=len(tokens) - 1)
    return tokens


@torch.no_grad()
def generate_full(model: GPT, prompt: torch.Tensor, new_tokens: int) -> list[int]:
    idx = prompt
    for _ in range(new_tokens):
        token = model(idx)[:, -1].argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, token], dim=1)
    return idx[0].tolist()


def main() -> None:
    model = train_model("tpu", steps=50).eval()
    prompt = torch.tensor([[7, 8, 9, 10]])
    new_tokens = Config().context - prompt.shape[1]
    tpu_tokens = generate_cached(model, prompt.to("tpu"), new_tokens)
    cpu_tokens = generate_full(copy.deepcopy(model).cpu(), prompt, new_tokens)
    print("tpu, cached:", tpu_tokens)
    print("cpu, full:  ", cpu_tokens)
    assert tpu_tokens == cpu_tokens, "cached decoding on tpu differs from the CPU"
    stats = torch_tpu.metrics.snapshot()
    print(
        f"{new_tokens} tokens; compiles {stats['compiles']}, "
        f"CPU fallbacks {sum(stats['cpu_fallbacks'].values())}"
    )


if __name__ == "__main__":
    main()
