"""Trains the small GPT with DistributedDataParallel on tpu: every rank takes its slice of
the same global batch, DDP averages the gradients through torch_tpu's c10d backend
("tpu"), and at the end rank 0 checks the trained parameters against one process
training the same model on the whole batch, without DDP.

    torchrun --nproc_per_node=2 examples/train_ddp.py
    python examples/train_ddp.py          # no torchrun: a world of 1 (still through DDP)

Under torchrun each rank's ``torch.device("tpu")`` is its own device (tpu:LOCAL_RANK).
The mean loss over a rank's equal-sized slice, averaged over ranks by DDP, is the mean
loss over the whole batch, so both trainings take the same steps up to float rounding.
Prints the losses of both and "OK"; fails if the parameters differ or the loss did not
fall. The global batch (16) must divide by the number of ranks.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, Config, batches  # noqa: E402

import torch_tpu  # noqa: E402,F401

STEPS = 20
BATCH = 16  # global, split over the ranks
TIMEOUT = datetime.timedelta(seconds=60)


def init_world() -> tuple[int, int]:
    """The process group from torchrun's environment, or without torchrun a world of 1."""
    if "RANK" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(port))
    dist.init_process_group("tpu", timeout=TIMEOUT)
    return dist.get_rank(), dist.get_world_size()


def make_model(device) -> GPT:
    torch.manual_seed(0)
    return GPT(Config()).to(device)


def make_optimizer(parameters) -> torch.optim.Optimizer:
    """SGD, not AdamW: Adam's steps barely change when every gradient is scaled alike (a
    sum where an average belongs would pass), and it blows rounding up into full steps
    where a gradient is zero in exact arithmetic (the attention's key bias), so it would
    make a loose check."""
    return torch.optim.SGD(parameters, lr=0.1, momentum=0.9)


def step(model, optimizer, x, y, vocab: int) -> torch.Tensor:
    loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


def train_ddp(rank: int, world: int, device) -> tuple[GPT, list[float]]:
    """DDP training; the losses are each step's loss averaged over the ranks."""
    model = make_model(device)
    optimizer = make_optimizer(model.parameters())
    ddp = DDP(model)
    per_rank = BATCH // world
    losses = []
    for x, y in batches(model.config, batch=BATCH, steps=STEPS):
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        loss = step(ddp, optimizer, x[mine].to(device), y[mine].to(device), model.config.vocab)
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        losses.append(loss.item())
    return model, losses


def train_single(device) -> tuple[GPT, list[float]]:
    """The same training in one process on the whole batch, without DDP."""
    model = make_model(device)
    optimizer = make_optimizer(model.parameters())
    losses = []
    for x, y in batches(model.config, batch=BATCH, steps=STEPS):
        losses.append(step(model, optimizer, x.to(device), y.to(device), model.config.vocab).item())
    return model, losses


def check_against_single(label: str, losses: list[float], params: dict, device) -> float:
    """Trains one process on the whole batch and asserts that `params` (name -> CPU tensor)
    match its parameters and that the loss fell; returns the largest difference."""
    single, single_losses = train_single(device)
    for i in (0, 1, 2, 4, 9, 14, 19):
        print(f"step {i + 1:3d}  loss {label} {losses[i]:.5f}   single {single_losses[i]:.5f}")
    worst = 0.0
    for name, q in single.named_parameters():
        p, q = params[name], q.detach().cpu()
        worst = max(worst, (p - q).abs().max().item())
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    assert losses[-1] < 0.5 * losses[0], f"the loss did not fall: {losses[0]} -> {losses[-1]}"
    return worst


def main() -> None:
    rank, world = init_world()
    assert BATCH % world == 0, f"the global batch {BATCH} does not divide by {world} ranks"
    device = torch.device("tpu")  # under torchrun: tpu:LOCAL_RANK
    model, losses = train_ddp(rank, world, device)
    devices = [None] * world
    dist.all_gather_object(devices, str(next(model.parameters()).device))
    if rank == 0:
        params = {name: p.detach().cpu() for name, p in model.named_parameters()}
        worst = check_against_single("ddp", losses, params, device)
        print(
            f"{world} rank(s) on {', '.join(devices)}: loss {losses[0]:.3f} -> "
            f"{losses[-1]:.3f}; parameters match one process on the whole batch within {worst:.1e}"
        )
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("OK")


if __name__ == "__main__":
    main()
