"""Greedy generation with a key/value cache on tpu: trains the small GPT briefly,
then decodes one token at a time reusing cached keys and values, and checks the
tokens against full recomputation on the CPU. Both caches are shown: the growing one
(new shapes every step) and the bucketed StaticCache (the same program all through a
bucket, which suits the defer_and_fuse mode). Then the growing cache under
torch.compile(dynamic=True), over prompts of 20 lengths and batch sizes 1-8: a program
per size bucket, not per size.

    TORCH_TPU_CPU_FALLBACK=error python examples/generate_gpt.py
"""

from __future__ import annotations

import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, Config, StaticCache  # noqa: E402
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
def generate_bucketed(model: GPT, prompt: torch.Tensor, new_tokens: int, bucket: int = 8):
    """Greedy decoding through StaticCaches, one token per step (the prompt too), with
    the next token and its position kept on the device: no step waits for the host,
    and each step ends with torch_tpu.sync() so deferred steps all share one program."""
    config = model.config
    head_dim = config.width // config.heads
    caches = [StaticCache(1, config.heads, head_dim, bucket, prompt.device) for _ in model.blocks]
    position = torch.zeros((), dtype=torch.long, device=prompt.device)
    tokens = [prompt[:, i : i + 1] for i in range(prompt.shape[1])]
    for step in range(prompt.shape[1] + new_tokens - 1):
        if step == caches[0].length:
            for cache in caches:
                cache.grow(2 * cache.length)
        logits = model(tokens[step], caches, start=position)
        if step + 1 >= len(tokens):
            tokens.append(logits[:, -1].argmax(dim=-1, keepdim=True))
        position = position + 1
        torch_tpu.sync()
    return torch.cat(tokens, dim=1)[0].tolist()


@torch.no_grad()
def generate_full(model: GPT, prompt: torch.Tensor, new_tokens: int) -> list[int]:
    idx = prompt
    for _ in range(new_tokens):
        token = model(idx)[:, -1].argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, token], dim=1)
    return idx[0].tolist()


@torch.no_grad()
def generate_compiled(forward, model: GPT, prompt: torch.Tensor, new_tokens: int):
    """Greedy decoding of a batch through `forward` (the model compiled with dynamic
    sizes) and growing caches: the prompt's length and each cache length are dynamic."""
    caches = [[None, None] for _ in model.blocks]
    logits = forward(prompt, caches)
    idx = prompt
    for _ in range(new_tokens):
        token = logits[:, -1].argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, token], dim=1)
        logits = forward(token, caches, idx.shape[1] - 1)
    return idx


def generate_varied_prompts(model: GPT, new_tokens: int = 3) -> None:
    forward = torch.compile(model, backend="tpu", dynamic=True)
    cpu = copy.deepcopy(model).cpu()
    generator = torch.Generator().manual_seed(0)
    sizes = set()
    for i in range(20):
        batch, length = 1 + i % 8, 2 + i
        prompt = torch.randint(0, cpu.config.vocab, (batch, length), generator=generator)
        tokens = generate_compiled(forward, model, prompt.to("tpu"), new_tokens)
        full = torch.stack([torch.tensor(generate_full(cpu, p[None], new_tokens)) for p in prompt])
        assert torch.equal(tokens.cpu(), full), (
            f"compiled decoding differs at {tuple(prompt.shape)}"
        )
        sizes.update((batch, n) for n in range(length, length + new_tokens + 1))
    graphs = torch_tpu.metrics.snapshot()["compiled_graphs"]
    programs = [g["programs"] for g in graphs.values() if g["programs"]]
    print(f"compiled, 20 prompts of lengths 2-21 and batches 1-8 ({len(sizes)} sizes):")
    print(f"  programs per graph {programs}; tokens equal the CPU's")
    assert max(programs) < len(sizes) / 2, "a program per size: dynamic buckets did not apply"


def main() -> None:
    model = train_model("tpu", steps=50).eval()
    prompt = torch.tensor([[7, 8, 9, 10]])
    new_tokens = Config().context - prompt.shape[1]
    tpu_tokens = generate_cached(model, prompt.to("tpu"), new_tokens)
    with torch_tpu.eager_mode("defer_and_fuse"):
        bucketed_tokens = generate_bucketed(model, prompt.to("tpu"), new_tokens)
    cpu_tokens = generate_full(copy.deepcopy(model).cpu(), prompt, new_tokens)
    print("tpu, cached:  ", tpu_tokens)
    print("tpu, bucketed:", bucketed_tokens)
    print("cpu, full:    ", cpu_tokens)
    assert tpu_tokens == cpu_tokens, "cached decoding on tpu differs from the CPU"
    assert bucketed_tokens == cpu_tokens, "bucketed decoding on tpu differs from the CPU"
    stats = torch_tpu.metrics.snapshot()
    print(
        f"{new_tokens} tokens; compiles {stats['compiles']}, "
        f"CPU fallbacks {sum(stats['cpu_fallbacks'].values())}"
    )
    generate_varied_prompts(model)


if __name__ == "__main__":
    main()
