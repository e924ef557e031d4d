"""Trains the small GPT with FSDP2 on tpu: ``fully_shard`` shards each transformer Block
and then the root over a 1-D DeviceMesh of all ranks (``init_device_mesh("tpu",
(world,))``), so every rank holds 1/world of each parameter and of the optimizer's
state; parameters are all-gathered for forward and backward and gradients are
reduce-scattered (averaged) through torch_tpu's c10d backend. Every rank takes its
slice of the same global batch; at the end rank 0 checks the full parameters against
one process training the same model on the whole batch, without FSDP.

    torchrun --nproc_per_node=2 examples/train_fsdp.py
    python examples/train_fsdp.py          # no torchrun: a world of 1 (still through FSDP)

The mean loss over a rank's equal-sized slice, averaged over ranks by FSDP, is the mean
loss over the whole batch, so both trainings take the same steps up to float rounding.
Prints the losses of both and "OK"; fails if the parameters differ or the loss did not
fall. The global batch (16) must divide by the number of ranks.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import batches  # noqa: E402
from train_ddp import (  # noqa: E402
    BATCH,
    STEPS,
    check_against_single,
    init_world,
    make_model,
    make_optimizer,
    step,
)

import torch_tpu  # noqa: E402,F401


def train_fsdp(rank: int, world: int) -> tuple[torch.nn.Module, list[float]]:
    """FSDP2 training; the losses are each step's loss averaged over the ranks."""
    mesh = init_device_mesh("tpu", (world,))
    model = make_model(mesh.device_type)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    # Made after sharding, the optimizer steps each rank's shards (DTensors) only.
    optimizer = make_optimizer(model.parameters())
    device = mesh.device_type
    per_rank = BATCH // world
    losses = []
    for x, y in batches(model.config, batch=BATCH, steps=STEPS):
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        loss = step(model, optimizer, x[mine].to(device), y[mine].to(device), model.config.vocab)
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        losses.append(loss.item())
    return model, losses


def main() -> None:
    rank, world = init_world()
    assert BATCH % world == 0, f"the global batch {BATCH} does not divide by {world} ranks"
    model, losses = train_fsdp(rank, world)
    # full_tensor() all-gathers each sharded parameter: every rank takes part.
    full = {name: p.full_tensor().detach().cpu() for name, p in model.named_parameters()}
    shards = [None] * world
    local = next(model.parameters()).to_local()
    dist.all_gather_object(shards, f"{local.device} {tuple(local.shape)}")
    if rank == 0:
        worst = check_against_single("fsdp", losses, full, torch.device("tpu"))
        print(f"first parameter's shard per rank: {', '.join(shards)}")
        print(
            f"{world} rank(s): loss {losses[0]:.3f} -> {losses[-1]:.3f}; parameters match one "
            f"process on the whole batch within {worst:.1e}"
        )
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("OK")


if __name__ == "__main__":
    main()
