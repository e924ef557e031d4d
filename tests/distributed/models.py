"""Small models and data shared by the training workers, and the single-process
reference they are compared with (the same model trained on the whole batch on CPU)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

DIM = 16


class Block(nn.Module):
    def __init__(self, dim: int = DIM, checkpointed: bool = False):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)
        self.checkpointed = checkpointed

    def _forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))

    def forward(self, x):
        if self.checkpointed:
            return checkpoint(self._forward, x, use_reentrant=False)
        return self._forward(x)


class Net(nn.Module):
    def __init__(self, blocks: int = 2, unused: bool = False, checkpointed: bool = False):
        super().__init__()
        self.embed = nn.Linear(8, DIM)
        self.blocks = nn.ModuleList(Block(checkpointed=checkpointed) for _ in range(blocks))
        self.head = nn.Linear(DIM, 4)
        if unused:
            self.unused = nn.Linear(DIM, DIM)  # never in forward: find_unused_parameters

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def make_net(**kwargs) -> Net:
    torch.manual_seed(0)
    return Net(**kwargs)


def batch(step: int, size: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(size, 8, generator=g), torch.randn(size, 4, generator=g)


def shard(t: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    per = t.shape[0] // world
    return t[rank * per : (rank + 1) * per]


def loss_fn(out, target):
    return F.mse_loss(out, target)


def reference_params(steps: int, lr: float = 0.05, **kwargs) -> dict[str, torch.Tensor]:
    """The parameters after `steps` SGD steps of one CPU process on the whole batch."""
    net = make_net(**kwargs)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    for step in range(steps):
        x, y = batch(step)
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()
    return {k: v.detach() for k, v in net.named_parameters()}
