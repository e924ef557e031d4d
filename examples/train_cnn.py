"""Trains a small CNN (convolution, batch norm, max pooling, dropout) on tpu for 50
steps, checks that the loss falls and that the first steps match the CPU (the check
runs without dropout, whose random masks differ between devices).

    TORCH_TPU_CPU_FALLBACK=error python examples/train_cnn.py
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

import torch_tpu

STEPS = 50


def make_model(dropout: float) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(3),
        nn.Flatten(),
        nn.Dropout(dropout),
        nn.Linear(32 * 9, 9),
    )


def batches(steps: int, batch: int = 32):
    """Images whose class is the quadrant holding a bright blob, plus noise."""
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        labels = torch.randint(0, 9, (batch,), generator=generator)
        images = 0.3 * torch.randn(batch, 3, 16, 16, generator=generator)
        for i, label in enumerate(labels.tolist()):
            row, col = divmod(label, 3)
            images[i, label % 3, row * 5 : row * 5 + 5, col * 5 : col * 5 + 5] += 2.0
        yield images, labels


def train(device: str, steps: int = STEPS, dropout: float = 0.25) -> list[float]:
    torch.manual_seed(0)
    torch.tpu.manual_seed(0)
    model = make_model(dropout).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for images, labels in batches(steps):
        loss = F.cross_entropy(model(images.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    tpu = train("tpu")
    check_tpu = train("tpu", steps=5, dropout=0.0)
    check_cpu = train("cpu", steps=5, dropout=0.0)
    for step in (0, 9, 19, 29, 39, 49):
        print(f"step {step + 1:3d}  loss tpu {tpu[step]:.5f}")
    worst = max(abs(a - b) for a, b in zip(check_tpu, check_cpu))
    print(f"first 5 steps without dropout: tpu {[round(v, 5) for v in check_tpu]}")
    print(f"                               cpu {[round(v, 5) for v in check_cpu]}")
    assert worst < 2e-3, f"the first steps differ from the CPU by {worst}"
    assert tpu[-1] < 0.5 * tpu[0], "the loss did not fall"
    stats = torch_tpu.metrics.snapshot()
    print(
        f"loss {tpu[0]:.3f} -> {tpu[-1]:.3f}; matches CPU within {worst:.1e}; "
        f"compiles {stats['compiles']}, CPU fallbacks {sum(stats['cpu_fallbacks'].values())}"
    )


if __name__ == "__main__":
    main()
