"""Trains a small GPT on tpu for 50 steps with AdamW and a cosine learning-rate
schedule, checks that the loss falls and that the first steps match the CPU.

    TORCH_TPU_CPU_FALLBACK=error python examples/train_gpt.py
"""

from __future__ import annotations

import os
import sys

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, Config, batches  # noqa: E402

import torch_tpu  # noqa: E402

STEPS = 50


def train(device: str, steps: int = STEPS) -> list[float]:
    """The losses of `steps` training steps on `device`."""
    return _train(device, steps)[1]


def train_model(device: str, steps: int = STEPS) -> GPT:
    """The GPT after `steps` training steps on `device`."""
    return _train(device, steps)[0]


def _train(device: str, steps: int) -> tuple[GPT, list[float]]:
    torch.manual_seed(0)
    config = Config()
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS)
    losses = []
    for x, y in batches(config, batch=16, steps=steps):
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, config.vocab), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return model, losses


def main() -> None:
    tpu = train("tpu")
    cpu = train("cpu", steps=5)
    for step in (0, 1, 2, 3, 4, 9, 19, 29, 39, 49):
        other = f"   cpu {cpu[step]:.5f}" if step < len(cpu) else ""
        print(f"step {step + 1:3d}  loss tpu {tpu[step]:.5f}{other}")
    worst = max(abs(a - b) for a, b in zip(tpu, cpu))
    assert worst < 2e-3, f"the first steps differ from the CPU by {worst}"
    assert tpu[-1] < 0.5 * tpu[0], "the loss did not fall"
    stats = torch_tpu.metrics.snapshot()
    print(
        f"loss {tpu[0]:.3f} -> {tpu[-1]:.3f}; first 5 steps match CPU within {worst:.1e}; "
        f"compiles {stats['compiles']}, CPU fallbacks {sum(stats['cpu_fallbacks'].values())}"
    )


if __name__ == "__main__":
    main()
