"""Trains a small MLP on the tpu device and checks it against the same run on the CPU.

python examples/train_mlp.py
"""

import torch
from torch import nn

import torch_tpu


def make_data(n: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 16, generator=generator)
    y = (x[:, :4].sum(dim=1, keepdim=True) - x[:, 4:8].prod(dim=1, keepdim=True)).tanh()
    return x, y


def train(device: str, steps: int = 50) -> list[float]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)
    )
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = (t.to(device) for t in make_data())
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    print(
        f"torch_tpu {torch_tpu.__version__} on platform '{torch_tpu.platform()}' "
        f"(PJRT C API {torch_tpu.plugin_info()['api_version']}), "
        f"{torch.tpu.device_count()} tpu device(s)"
    )
    tpu_losses = train("tpu")
    cpu_losses = train("cpu")
    for step in (0, 9, 19, 29, 39, 49):
        print(f"step {step + 1:3d}  loss tpu {tpu_losses[step]:.5f}   cpu {cpu_losses[step]:.5f}")
    worst = max(abs(a - b) for a, b in zip(tpu_losses, cpu_losses))
    assert tpu_losses[-1] < 0.5 * tpu_losses[0], "the loss did not fall"
    assert worst < 1e-3, f"tpu and CPU losses differ by {worst}"
    stats = torch_tpu.metrics.snapshot()
    print(
        f"loss fell from {tpu_losses[0]:.4f} to {tpu_losses[-1]:.4f}; "
        f"matches CPU within {worst:.1e}"
    )
    print(
        f"programs compiled: {stats['compiles']}, executions: {stats['executions']}, "
        f"CPU fallbacks: {sum(stats['cpu_fallbacks'].values())} "
        f"({', '.join(sorted(stats['cpu_fallbacks'])) or 'none'})"
    )


if __name__ == "__main__":
    main()
