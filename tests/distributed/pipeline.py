"""Pipelines on tpu (ranks running different programs) equal one CPU process on the whole
batch. argv: gpipe | 1f1b (torch.distributed.pipelining) | manual (a 2-stage pipeline
with send/recv, different modules per rank) | mpmd (one rank runs extra work between
collectives)."""

import sys

from common import assert_close, dist, finish, init, torch
from models import Block, batch, loss_fn
from torch import nn

case = sys.argv[1]
rank, world = init()
STEPS, LR = 2, 0.05


def make_layers():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), *(Block() for _ in range(6)), nn.Linear(16, 4))


def reference():
    layers = make_layers()
    opt = torch.optim.SGD(layers.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        loss_fn(layers(x), y).backward()
        opt.step()
    return layers


def stage_slice(stage, stages, n=8):
    per = -(-n // stages)
    return slice(stage * per, min((stage + 1) * per, n))


def check(stage_module, indices):
    ref = reference()
    for local_index, global_index in enumerate(range(indices.start, indices.stop)):
        for name, p in ref[global_index].named_parameters():
            mine = dict(stage_module[local_index].named_parameters())[name]
            assert_close(
                mine, p.detach(), f"{case}: layer {global_index} {name}", rtol=1e-4, atol=1e-5
            )


if case in ("gpipe", "1f1b"):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    indices = stage_slice(rank, world)
    module = make_layers()[indices].to("tpu")
    stage = PipelineStage(module, rank, world, torch.device("tpu"))
    schedule_class = ScheduleGPipe if case == "gpipe" else Schedule1F1B
    schedule = schedule_class(stage, n_microbatches=4, loss_fn=loss_fn)
    opt = torch.optim.SGD(module.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        if rank == 0:
            schedule.step(x.to("tpu"))
        elif rank == world - 1:
            losses = []
            schedule.step(target=y.to("tpu"), losses=losses)
            assert len(losses) == 4
        else:
            schedule.step()
        opt.step()
    check(module, indices)
elif case == "manual":
    assert world == 2
    indices = slice(0, 7) if rank == 0 else slice(7, 8)
    module = make_layers()[indices].to("tpu")
    opt = torch.optim.SGD(module.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        if rank == 0:  # embed + blocks: send activations, receive their gradient
            h = module(x.to("tpu"))
            dist.send(h.detach(), dst=1)
            grad = torch.empty_like(h)
            dist.recv(grad, src=1)
            h.backward(grad)
        else:  # the head and the loss
            h = torch.empty(8, 16, device="tpu")
            dist.recv(h, src=0)
            h.requires_grad_()
            loss_fn(module(h), y.to("tpu")).backward()
            dist.send(h.grad, dst=0)
        opt.step()
    check(module, indices)
elif case == "mpmd":
    total = torch.zeros(3, device="tpu")
    for step in range(4):
        t = torch.full((3,), float(rank + step), device="tpu")
        if rank == 0:  # extra work, its own programs, between two collectives
            m = torch.randn(32, 32, device="tpu")
            for _ in range(step + 1):
                m = (m @ m.t()).tanh()
            assert torch.isfinite(m).all().item()
        dist.all_reduce(t)
        if rank == world - 1:
            t = t * 2 - t  # a different op sequence on another rank
        total += t
    expected = sum(sum(float(r + s) for r in range(world)) for s in range(4))
    assert_close(total, torch.full((3,), expected), "mpmd all_reduce results")
finish()
