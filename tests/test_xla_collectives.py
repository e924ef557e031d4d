"""The xla collective engine, run for real by the CPU plugin: one thread per rank, each on
its own device (torch_tpu.distributed.testing.run_threaded). Every collective is checked
against the value computed in one process, and against the gloo engine's result."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import torch_tpu.distributed
from torch_tpu.distributed.testing import run_threaded

WORLD = 4

pytestmark = pytest.mark.skipif(
    torch.tpu.device_count() < WORLD, reason="needs 4 tpu devices (TORCH_TPU_CPU_DEVICES)"
)

DTYPES = [
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.float16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


def rank_values(rank: int, dtype: torch.dtype, shape=(3, 5)) -> torch.Tensor:
    """Small distinct values per rank (no overflow in a product of four)."""
    g = torch.Generator().manual_seed(1234 + rank)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 2).to(dtype)
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, shape, generator=g).to(dtype)


def with_engine(monkeypatch, engine: str, fn, *args):
    monkeypatch.setenv("TORCH_TPU_COLLECTIVES", engine)
    return run_threaded(fn, WORLD, *args)


def fold(op: str, values: list[torch.Tensor]) -> torch.Tensor:
    """The reduction in one process (float16/bfloat16 in float32, rounded at the end)."""
    dtype = values[0].dtype
    wide = [v.float() if dtype in (torch.float16, torch.bfloat16) else v for v in values]
    if dtype == torch.bool:
        wide = [v.to(torch.uint8) for v in values]
    out = wide[0].clone()
    for v in wide[1:]:
        if op in ("sum", "avg"):
            out = out + v
        elif op == "product":
            out = out * v
        elif op == "min":
            out = torch.minimum(out, v)
        elif op == "max":
            out = torch.maximum(out, v)
        elif op == "band":
            out = out & v
        elif op == "bor":
            out = out | v
        elif op == "bxor":
            out = out ^ v
    if op == "avg":
        if dtype.is_floating_point or dtype.is_complex:
            out = out / len(values)
        else:  # integers round toward zero, as NCCL's average does
            out = torch.div(out, len(values), rounding_mode="trunc")
    if dtype == torch.bool:
        out = out != 0
    return out.to(dtype)


def assert_close(actual, expected, dtype):
    if dtype in (torch.float16, torch.bfloat16):
        torch.testing.assert_close(actual.float(), expected.float(), rtol=2e-2, atol=2e-2)
    elif dtype.is_floating_point or dtype.is_complex:
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(actual, expected), (actual, expected)


REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "band": dist.ReduceOp.BAND,
    "bor": dist.ReduceOp.BOR,
    "bxor": dist.ReduceOp.BXOR,
}


def ops_for(dtype):
    ops = ["sum", "avg", "product", "min", "max"]
    if dtype.is_complex:
        return ["sum", "avg"]
    if dtype == torch.bool:
        ops.remove("avg")
    if not dtype.is_floating_point:
        ops += ["band", "bor", "bxor"]
    return ops


def all_reduce_every_op(rank, dtype):
    results = {}
    for op in ops_for(dtype):
        t = rank_values(rank, dtype).to(f"tpu:{rank}")
        dist.all_reduce(t, op=REDUCE_OPS[op])
        results[op] = t.cpu()
    return results, torch_tpu.distributed.engine_name()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce_every_op_and_dtype(monkeypatch, dtype):
    xla = with_engine(monkeypatch, "xla", all_reduce_every_op, dtype)
    gloo = with_engine(monkeypatch, "host", all_reduce_every_op, dtype)
    assert {engine for _, engine in xla} == {"xla"}
    assert {engine for _, engine in gloo} == {"host_staging(gloo)"}
    inputs = [rank_values(r, dtype) for r in range(WORLD)]
    for op in ops_for(dtype):
        expected = fold(op, inputs)
        for rank in range(WORLD):
            assert_close(xla[rank][0][op], expected, dtype)
            assert_close(xla[rank][0][op], gloo[rank][0][op], dtype)


def movement(rank, dtype):
    """all_gather (tensor and list), reduce_scatter, all_to_all, broadcast, reduce."""
    device = f"tpu:{rank}"
    out = {}
    x = rank_values(rank, dtype, (2, 3)).to(device)
    gathered = torch.empty((WORLD * 2, 3), dtype=dtype, device=device)
    dist.all_gather_into_tensor(gathered, x)
    out["all_gather_into_tensor"] = gathered.cpu()
    pieces = [torch.empty_like(x) for _ in range(WORLD)]
    dist.all_gather(pieces, x)
    out["all_gather"] = torch.cat([p.cpu() for p in pieces])
    if dtype != torch.bool:
        big = rank_values(rank, dtype, (WORLD * 2, 3)).to(device)
        scattered = torch.empty((2, 3), dtype=dtype, device=device)
        dist.reduce_scatter_tensor(scattered, big)
        out["reduce_scatter"] = scattered.cpu()
    a2a_in = rank_values(rank, dtype, (WORLD * 2, 3)).to(device)
    a2a_out = torch.empty_like(a2a_in)
    dist.all_to_all_single(a2a_out, a2a_in)
    out["all_to_all"] = a2a_out.cpu()
    b = rank_values(rank, dtype, (5,)).to(device)
    dist.broadcast(b, src=2)
    out["broadcast"] = b.cpu()
    if dtype != torch.bool:
        r = rank_values(rank, dtype, (4,)).to(device)
        dist.reduce(r, dst=1)
        out["reduce"] = r.cpu()
    return out


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.bfloat16, torch.int32, torch.bool, torch.complex64, torch.uint8],
    ids=str,
)
def test_data_movement_collectives(monkeypatch, dtype):
    xla = with_engine(monkeypatch, "xla", movement, dtype)
    gloo = with_engine(monkeypatch, "host", movement, dtype)
    for rank in range(WORLD):
        got = xla[rank]
        assert set(got) == set(gloo[rank])
        gathered = torch.cat([rank_values(r, dtype, (2, 3)) for r in range(WORLD)])
        assert torch.equal(got["all_gather_into_tensor"], gathered)
        assert torch.equal(got["all_gather"], gathered)
        blocks = [rank_values(r, dtype, (WORLD * 2, 3)) for r in range(WORLD)]
        assert torch.equal(
            got["all_to_all"], torch.cat([blk[2 * rank : 2 * rank + 2] for blk in blocks])
        )
        assert torch.equal(got["broadcast"], rank_values(2, dtype, (5,)))
        if "reduce_scatter" in got:
            expected = fold("sum", blocks)[2 * rank : 2 * rank + 2]
            assert_close(got["reduce_scatter"], expected, dtype)
        if "reduce" in got:
            mine = rank_values(rank, dtype, (4,))
            expected = fold("sum", [rank_values(r, dtype, (4,)) for r in range(WORLD)])
            assert_close(got["reduce"], expected if rank == 1 else mine, dtype)
        for name, value in got.items():
            assert_close(value, gloo[rank][name], dtype)


def views_and_odd_cases(rank):
    device = f"tpu:{rank}"
    base = torch.arange(30.0).reshape(5, 6).to(device) * (rank + 1)
    view = base.t()[1:4]  # non-contiguous, offset: gloo reduces such a CPU view wrongly
    dist.all_reduce(view, op=dist.ReduceOp.MAX)
    # A tensor on another device than the rank's: moved there and back.
    other = torch.full((3,), float(rank), device=f"tpu:{(rank + 1) % WORLD}")
    dist.all_reduce(other)
    empty = torch.empty(0, device=device)
    dist.all_reduce(empty)
    # Uneven all_to_all splits go to the control engine.
    in_splits = [r + 1 for r in range(WORLD)]
    out_splits = [rank + 1] * WORLD
    a2a_in = torch.cat([torch.full((s,), 10.0 * rank + r) for r, s in enumerate(in_splits)])
    a2a_out = torch.empty(sum(out_splits), device=device)
    dist.all_to_all_single(a2a_out, a2a_in.to(device), out_splits, in_splits)
    premul = torch.full((2,), float(rank + 1), device=device)
    dist.all_reduce(premul, op=dist._make_nccl_premul_sum(0.5))
    cpu = torch.full((2,), float(rank))
    dist.all_reduce(cpu)
    return base.cpu(), other.cpu(), other.device, a2a_out.cpu(), premul.cpu(), cpu


def test_views_other_devices_uneven_splits_premul_and_cpu_tensors():
    results = run_threaded(views_and_odd_cases, WORLD)
    for rank, (base, other, other_device, a2a, premul, cpu) in enumerate(results):
        expected = torch.arange(30.0).reshape(5, 6) * (rank + 1)
        expected.t()[1:4] = (torch.arange(30.0).reshape(5, 6) * WORLD).t()[1:4]
        assert torch.equal(base, expected)
        assert torch.equal(other, torch.full((3,), 6.0))
        assert other_device == torch.device("tpu", (rank + 1) % WORLD)
        assert torch.equal(
            a2a, torch.cat([torch.full((rank + 1,), 10.0 * r + rank) for r in range(WORLD)])
        )
        assert torch.equal(premul, torch.full((2,), 5.0))
        assert torch.equal(cpu, torch.full((2,), 6.0))


def test_explicit_xla_engine_refuses_ranks_sharing_a_device(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COLLECTIVES", "xla")

    def shared_device(rank):
        torch.tpu.set_device(0)
        dist.new_group(list(range(WORLD)))

    with pytest.raises(RuntimeError, match="ranks share devices"):
        run_threaded(shared_device, WORLD)


def test_unknown_engine_name_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COLLECTIVES", "nccl")
    with pytest.raises(ValueError, match="TORCH_TPU_COLLECTIVES='nccl'"):
        run_threaded(lambda rank: None, 2)


# Training: DDP and FSDP2 on the xla engine equal the gloo engine and one process.

STEPS = 3


def make_model() -> torch.nn.Module:
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 4),
    )
    # Fixed values, not the global generator: the rank threads would race on it.
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model


def whole_batch():
    g = torch.Generator().manual_seed(7)
    return torch.randn(4 * WORLD, 8, generator=g), torch.randn(4 * WORLD, 4, generator=g)


def train(model, parameters, inputs, targets, device):
    opt = torch.optim.SGD(parameters, lr=0.1, momentum=0.9)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs.to(device)), targets.to(device))
        loss.backward()
        opt.step()


def one_process() -> list[torch.Tensor]:
    model = make_model()
    inputs, targets = whole_batch()
    train(model, model.parameters(), inputs, targets, "cpu")
    return [p.detach() for p in model.parameters()]


def shard_of(rank):
    inputs, targets = whole_batch()
    return inputs[4 * rank : 4 * rank + 4], targets[4 * rank : 4 * rank + 4]


def ddp_rank(rank):
    from torch.nn.parallel import DistributedDataParallel

    device = torch.device("tpu", rank)
    model = make_model().to(device)
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.0005)  # several buckets
    train(ddp, ddp.parameters(), *shard_of(rank), device)
    return [p.detach().cpu() for p in model.parameters()], torch_tpu.distributed.engine_name()


def fsdp_rank(rank):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = torch.device("tpu", rank)
    mesh = init_device_mesh("tpu", (WORLD,))
    model = make_model().to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    train(model, model.parameters(), *shard_of(rank), device)
    return [p.full_tensor().detach().cpu() for p in model.parameters()], (
        torch_tpu.distributed.engine_name(mesh.get_group())
    )


@pytest.mark.parametrize("rank_fn", [ddp_rank, fsdp_rank], ids=["ddp", "fsdp2"])
def test_training_steps_equal_gloo_and_one_process(monkeypatch, rank_fn):
    xla = with_engine(monkeypatch, "xla", rank_fn)
    gloo = with_engine(monkeypatch, "host", rank_fn)
    reference = one_process()
    for rank in range(WORLD):
        params, engine = xla[rank]
        assert engine == "xla"
        for got, on_gloo, expected in zip(params, gloo[rank][0], reference):
            torch.testing.assert_close(got, on_gloo, rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        assert not torch.equal(params[0], make_model()[0].weight.detach())  # it trained


# Collectives inside fused programs: spmd_safe.


def step_with_two_collectives(x):
    import torch.distributed._functional_collectives as fc

    y = fc.all_reduce(x * 2, "sum", dist.group.WORLD)
    z = fc.all_reduce(y * y, "max", dist.group.WORLD)
    gathered = fc.all_gather_tensor(z + 1, 0, dist.group.WORLD)
    return gathered.reshape(WORLD, -1).sum(0) - 3


def executions_of_one_step(rank, fn, x, barrier):
    """Runs fn twice (compiling), then counts the programs every rank runs in one step
    (the metrics are the process's: the window is aligned across ranks by barriers)."""
    for _ in range(2):
        fn(x).cpu()
    torch_tpu.sync()
    barrier.wait()
    before = torch_tpu.metrics.snapshot()["executions"]
    barrier.wait()
    out = fn(x).cpu()
    barrier.wait()
    return out, torch_tpu.metrics.snapshot()["executions"] - before


def fused_rank(rank, barrier):
    x = torch.arange(6.0, device=f"tpu:{rank}") + rank
    eager = step_with_two_collectives(x).cpu()
    results = {"eager": eager}
    # The process-wide mode would race between rank threads: this thread's only.
    with torch_tpu.eager.thread_eager_mode("defer_and_fuse"):
        results["deferred"] = executions_of_one_step(rank, step_with_two_collectives, x, barrier)
        safe = torch_tpu.distributed.spmd_safe(step_with_two_collectives)
        results["spmd_safe"] = executions_of_one_step(rank, safe, x, barrier)
    compiled = torch.compile(step_with_two_collectives, backend="tpu")
    results["compiled"] = executions_of_one_step(
        rank, torch_tpu.distributed.spmd_safe(compiled), x, barrier
    )
    return results


def test_spmd_safe_fuses_collectives_into_one_program_per_rank():
    import threading

    import torch_tpu.metrics  # noqa: F401

    torch._dynamo.reset()  # each rank compiles for its own device: room for all four
    results = run_threaded(fused_rank, WORLD, threading.Barrier(WORLD))
    x = [torch.arange(6.0) + r for r in range(WORLD)]
    y = sum(v * 2 for v in x)
    expected = WORLD * (y * y + 1) - 3  # every rank's z is the same max
    for rank in range(WORLD):
        r = results[rank]
        assert torch.equal(r["eager"], expected)
        for variant in ("deferred", "spmd_safe", "compiled"):
            assert torch.equal(r[variant][0], expected), variant
        # Without spmd_safe each collective is its own program, splitting the graph.
        assert r["deferred"][1] >= 5 * WORLD
        # With it the step is one program per rank, in defer_and_fuse and compiled.
        assert r["spmd_safe"][1] == WORLD
        assert r["compiled"][1] == WORLD
