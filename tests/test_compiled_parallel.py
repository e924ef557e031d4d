"""Compiled tensor-parallel and FSDP2 training steps on the xla collective engine (one
thread per rank, torch_tpu.distributed.testing.run_threaded), under ``spmd_safe``: each
is checked against the same step in eager mode and against the whole model trained in
one process on the CPU, and the programs every rank runs in one steady-state step are
counted (torch_tpu.metrics: executions, and native_ops for the c10d collectives)."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

import torch_tpu.distributed
import torch_tpu.metrics
from torch_tpu.distributed.testing import run_threaded

WORLD = 2  # two ranks: enough for every collective, and quick on a small CPU host
DIM, HIDDEN, BATCH, LR, STEPS = 8, 16, 4, 0.1, 3

pytestmark = pytest.mark.skipif(
    torch.tpu.device_count() < WORLD, reason="needs 2 tpu devices (TORCH_TPU_CPU_DEVICES)"
)


@pytest.fixture(autouse=True)
def _xla_engine(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COLLECTIVES", "xla")
    torch._dynamo.reset()  # each rank compiles for its own device: room for all of them


def make_mlp() -> torch.nn.Sequential:
    model = torch.nn.Sequential(
        torch.nn.Linear(DIM, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, DIM)
    )
    # Fixed values, not the global generator: the rank threads would race on it.
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model


def whole_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, DIM, generator=g), torch.randn(BATCH, DIM, generator=g)


def rank_batch(rank: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's rows of the whole batch (data parallel), on `device`; x needs grad."""
    x, target = whole_batch()
    rows = slice(rank * (BATCH // WORLD), (rank + 1) * (BATCH // WORLD))
    return x[rows].to(device).requires_grad_(True), target[rows].to(device)


def assert_shards_trained_as_one_process(results) -> None:
    """Data-parallel ranks: compiled losses equal eager's, every variant's parameters equal
    one process's on the whole batch, and the ranks' mean loss is the whole batch's."""
    losses, params, _ = one_process()
    for rank in range(WORLD):
        r = results[rank]
        torch.testing.assert_close(r["compiled"]["losses"], r["eager"]["losses"])
        for variant in ("eager", "compiled"):
            for mine, whole in zip(r[variant]["params"], params):
                torch.testing.assert_close(mine, whole, rtol=1e-5, atol=1e-6)
    # Each rank's loss is its half of the batch's: their mean is the whole batch's.
    mean = sum(results[rank]["compiled"]["losses"] for rank in range(WORLD)) / WORLD
    torch.testing.assert_close(mean, torch.tensor(losses), rtol=1e-5, atol=1e-6)


def backward_step(model, opt):
    """loss.backward() ends the graph Dynamo captures (it does not trace backward());
    the optimizer's step is a graph of its own. The seed gradient is made in the graph,
    not by autograd as an eager program of its own."""

    def step(x, target):
        loss = F.mse_loss(model(x), target)
        loss.backward(torch.ones_like(loss))
        opt.step()
        opt.zero_grad()
        return loss.detach()

    return step


def grad_step(model):
    """The whole step in one graph: Dynamo traces autograd.grad with trace_autograd_ops."""
    params = list(model.parameters())

    def step(x, target):
        loss = F.mse_loss(model(x), target)
        *grads, x_grad = torch.autograd.grad(loss, [*params, x])
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(LR * g)
        x.grad = x_grad
        return loss.detach()

    return step


def one_process() -> tuple[list[float], list[torch.Tensor], torch.Tensor]:
    """Losses, trained parameters and the input's gradient of the whole model on the CPU."""
    model = make_mlp()
    x, target = whole_batch()
    x.requires_grad_(True)
    step = backward_step(model, torch.optim.SGD(model.parameters(), lr=LR))
    losses = []
    for _ in range(STEPS):
        x.grad = None
        losses.append(step(x, target).item())
    return losses, [p.detach() for p in model.parameters()], x.grad


def train(step, x, target, barrier):
    """Runs STEPS steps under spmd_safe; counts the programs and collectives all ranks
    run in the last (the metrics are the process's: barriers align the window)."""

    def one():
        x.grad = None
        with torch_tpu.distributed.spmd_safe():
            return step(x, target)

    losses = [one().cpu() for _ in range(STEPS - 1)]
    torch_tpu.sync()
    barrier.wait()
    before = torch_tpu.metrics.snapshot()
    barrier.wait()
    losses.append(one().cpu())
    barrier.wait()
    after = torch_tpu.metrics.snapshot()
    barrier.wait()  # no rank runs on before every rank has read the counters
    collectives = {
        op: calls - before["native_ops"].get(op, 0)
        for op, calls in after["native_ops"].items()
        if op.startswith("c10d::") and calls > before["native_ops"].get(op, 0)
    }
    return {
        "losses": torch.stack(losses),
        "programs": (after["executions"] - before["executions"]) / WORLD,
        "collectives": {op: calls / WORLD for op, calls in collectives.items()},
    }


def tp_rank(rank, barrier, variants):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    device = torch.device("tpu", rank)
    mesh = init_device_mesh("tpu", (WORLD,))
    x, target = whole_batch()
    results = {}
    for variant in variants:
        model = parallelize_module(
            make_mlp().to(device), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}
        )
        if variant == "whole_graph":
            step = torch.compile(grad_step(model), backend="tpu")
        else:
            opt = torch.optim.SGD(model.parameters(), lr=LR, foreach=False)
            step = backward_step(model, opt)
            if variant == "compiled":
                step = torch.compile(step, backend="tpu")
        # The input needs a gradient, so that the backward has a collective too (the
        # column-parallel layer's input gradient is a partial sum, all-reduced).
        x_here = x.to(device).requires_grad_(True)
        if variant == "whole_graph":
            # Dynamo's config overrides are per thread: set on the rank's own.
            with torch._dynamo.config.patch(trace_autograd_ops=True):
                out = train(step, x_here, target.to(device), barrier)
        else:
            out = train(step, x_here, target.to(device), barrier)
        out["params"] = [p.full_tensor().detach().cpu() for p in model.parameters()]
        out["x_grad"] = x_here.grad.cpu()
        results[variant] = out
    return results


def assert_trained_alike(got, expected, reference, *, with_x_grad=True):
    losses, params, x_grad = reference
    torch.testing.assert_close(got["losses"], expected["losses"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got["losses"], torch.tensor(losses), rtol=1e-5, atol=1e-6)
    for mine, theirs, whole in zip(got["params"], expected["params"], params):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(mine, whole, rtol=1e-5, atol=1e-6)
    if with_x_grad:
        torch.testing.assert_close(got["x_grad"], x_grad, rtol=1e-5, atol=1e-6)
    assert not torch.equal(got["params"][0], make_mlp()[0].weight.detach())  # it trained


def test_tensor_parallel_compiled_step_fuses_its_collectives():
    variants = ("eager", "compiled", "whole_graph")
    results = run_threaded(tp_rank, WORLD, threading.Barrier(WORLD), variants)
    reference = one_process()
    for rank in range(WORLD):
        r = results[rank]
        for variant in ("compiled", "whole_graph"):
            assert_trained_alike(r[variant], r["eager"], reference)
        # One all-reduce forward (row-parallel output), one backward (column-parallel
        # input gradient), in every variant.
        for variant in variants:
            assert r[variant]["collectives"] == {"c10d::all_reduce": 2}, variant
        # Eager: every op and each collective a program of its own.
        assert r["eager"]["programs"] >= 20
        # Compiled: forward, backward (collectives inside both) and the optimizer's
        # graph; a collective run on its own would add a program.
        assert r["compiled"]["programs"] == 3
        # Forward, backward and update traced as one graph: one program per step.
        assert r["whole_graph"]["programs"] == 1


def fsdp_rank(rank, barrier):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = torch.device("tpu", rank)
    mesh = init_device_mesh("tpu", (WORLD,))
    x_here, target_here = rank_batch(rank, device)
    results = {}
    for variant in ("eager", "compiled"):
        model = make_mlp().to(device)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=LR, foreach=False)
        step = backward_step(model, opt)
        if variant == "compiled":
            step = torch.compile(step, backend="tpu")
        out = train(step, x_here, target_here, barrier)
        out["params"] = [p.full_tensor().detach().cpu() for p in model.parameters()]
        results[variant] = out
    return results


def test_fsdp2_compiled_step_matches_eager():
    """FSDP2's hooks (unshard, reshard, reduce-scatter) are torch._dynamo.disable'd in
    PyTorch 2.13 (_fsdp_common._dynamo_disable, no traceable-FSDP2 option left), so a
    compiled FSDP2 step breaks its graph around every hook: the collectives, and the
    layers' ops between them, stay eager programs. What the compiled step must be is
    right; this pins how far from one program per step it is."""
    results = run_threaded(fsdp_rank, WORLD, threading.Barrier(WORLD))
    assert_shards_trained_as_one_process(results)
    for rank in range(WORLD):
        r = results[rank]
        # Two layers: an all-gather each forward and again in backward (resharded
        # after forward), a reduce-scatter each backward, all standalone programs.
        for variant in ("eager", "compiled"):
            assert r[variant]["collectives"] == {
                "c10d::all_gather": 4,
                "c10d::reduce_scatter": 2,
            }, variant
        assert r["compiled"]["programs"] < r["eager"]["programs"]
        assert r["compiled"]["programs"] > 6  # the collectives, and eager layers too


def simple_fsdp_rank(rank, barrier):
    """FSDP as DTensor parameters (TorchTitan's SimpleFSDP): each parameter a Shard(0)
    DTensor, all-gathered where the step uses it, its gradient reduce-scattered by the
    all-gather's backward. With no hooks, Dynamo traces the whole step."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    device = torch.device("tpu", rank)
    mesh = init_device_mesh("tpu", (WORLD,))
    x_here, target_here = rank_batch(rank, device)
    results = {}
    for variant in ("eager", "compiled"):
        params = [
            torch.nn.Parameter(distribute_tensor(p.detach().to(device), mesh, [Shard(0)]))
            for p in make_mlp().parameters()
        ]

        def step(x, target, params=params):
            w1, b1, w2, b2 = (
                p.redistribute(mesh, [Replicate()]).to_local(grad_placements=[Partial("avg")])
                for p in params
            )
            loss = F.mse_loss(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), target)
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p.sub_(LR * g)
            return loss.detach()

        if variant == "compiled":
            with torch._dynamo.config.patch(trace_autograd_ops=True):
                out = train(torch.compile(step, backend="tpu"), x_here, target_here, barrier)
        else:
            out = train(step, x_here, target_here, barrier)
        out["params"] = [p.full_tensor().detach().cpu() for p in params]
        results[variant] = out
    return results


def test_simple_fsdp_compiled_step_is_one_program():
    results = run_threaded(simple_fsdp_rank, WORLD, threading.Barrier(WORLD))
    assert_shards_trained_as_one_process(results)
    for rank in range(WORLD):
        r = results[rank]
        for variant in ("eager", "compiled"):
            # Each of the four parameters gathered forward, its gradient scattered back.
            assert r[variant]["collectives"] == {
                "c10d::all_gather": 4,
                "c10d::reduce_scatter": 4,
            }, variant
        assert r["eager"]["programs"] > 20
        assert r["compiled"]["programs"] == 1  # the eight collectives inside
