"""torch.compile(backend="tpu") records a graph once per input signature and replays
its program on later calls (torch_tpu/compile/, csrc/aten/graph_replay.cpp).

A replayed call runs no lowering, so it counts one execution and no native op; each
test checks that replay happened and that its results equal PyTorch's on the CPU.
"""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _C
from torch_tpu.compile import host_split


def counts():
    snap = torch_tpu.metrics.snapshot()
    return snap["executions"], sum(snap["native_ops"].values())


def native_ops() -> dict[str, int]:
    return dict(torch_tpu.metrics.snapshot()["native_ops"])


def replayed(fn, *args):
    """Calls fn and says whether the call was a replay (no op lowered, one program)."""
    torch_tpu.sync()
    executions, natives = counts()
    out = fn(*args)
    torch_tpu.sync()
    after_executions, after_natives = counts()
    return out, after_natives == natives and after_executions == executions + 1


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_replay_gives_eager_results_and_lowers_nothing():
    def f(x, w):
        return torch.tanh(x @ w).softmax(-1) * 2 + x.sum()

    compiled = torch.compile(f, backend="tpu")
    for step in range(4):
        x, w = torch.randn(8, 16), torch.randn(16, 16)
        out, was_replay = replayed(compiled, x.to("tpu"), w.to("tpu"))
        assert was_replay == (step > 0)
        torch.testing.assert_close(out.cpu(), f(x, w), rtol=1e-5, atol=1e-5)


def test_replay_writes_mutated_inputs_in_place():
    def f(x, y):
        x.add_(y)
        y.mul_(2)
        return x + y

    compiled = torch.compile(f, backend="tpu")
    x_cpu, y_cpu = torch.zeros(5), torch.ones(5)
    x, y = x_cpu.to("tpu"), y_cpu.to("tpu")
    for step in range(4):
        out, was_replay = replayed(compiled, x, y)
        expected = f(x_cpu, y_cpu)
        assert was_replay == (step > 0)
        torch.testing.assert_close(out.cpu(), expected)
        torch.testing.assert_close(x.cpu(), x_cpu)
        torch.testing.assert_close(y.cpu(), y_cpu)


def test_views_of_one_storage_as_arguments():
    def f(a, b):
        return a * 10 + b

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    base_cpu = torch.arange(12.0)
    base = base_cpu.to("tpu")
    for step in range(3):
        base_cpu.add_(1)
        base.add_(1)
        out, was_replay = replayed(compiled, base[1:], base[:-1])
        assert was_replay == (step > 0)
        torch.testing.assert_close(out.cpu(), f(base_cpu[1:], base_cpu[:-1]))
    # Same shapes, but the two arguments no longer share a storage: a new plan.
    other = torch.arange(11.0).to("tpu")
    out, was_replay = replayed(compiled, base[1:], other)
    assert not was_replay
    torch.testing.assert_close(out.cpu(), f(base_cpu[1:], torch.arange(11.0)))


def test_outputs_that_are_views_and_inputs():
    def f(x):
        y = x * 3
        return y.t(), y[1], x

    compiled = torch.compile(f, backend="tpu")
    for step in range(3):
        x_cpu = torch.randn(4, 3)
        x = x_cpu.to("tpu")
        (t, row, same), was_replay = replayed(compiled, x)
        assert was_replay == (step > 0)
        torch.testing.assert_close(t.cpu(), (x_cpu * 3).t())
        assert t.stride() == (1, 3)
        torch.testing.assert_close(row.cpu(), (x_cpu * 3)[1])
        torch.testing.assert_close(same.cpu(), x_cpu)


def test_training_steps_replay_and_match_cpu():
    torch.manual_seed(0)
    model_cpu = torch.nn.Sequential(
        torch.nn.Linear(6, 12), torch.nn.GELU(), torch.nn.LayerNorm(12), torch.nn.Linear(12, 3)
    )
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 12), torch.nn.GELU(), torch.nn.LayerNorm(12), torch.nn.Linear(12, 3)
    ).to("tpu")
    model.load_state_dict(model_cpu.state_dict())

    def loss_of(m, x, y):
        return F.cross_entropy(m(x), y)

    compiled = torch.compile(loss_of, backend="tpu")
    opt_cpu = torch.optim.SGD(model_cpu.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    natives_per_step = []
    for _ in range(5):
        x, y = torch.randn(10, 6), torch.randint(0, 3, (10,))
        loss_cpu = loss_of(model_cpu, x, y)
        opt_cpu.zero_grad()
        loss_cpu.backward()
        opt_cpu.step()
        x, y, seed = x.to("tpu"), y.to("tpu"), torch.ones((), device="tpu")
        opt.zero_grad()
        torch_tpu.sync()
        before = counts()[1]
        loss = compiled(model, x, y)
        loss.backward(seed)
        torch_tpu.sync()
        natives_per_step.append(counts()[1] - before)
        opt.step()
        torch.testing.assert_close(loss.cpu(), loss_cpu, rtol=1e-5, atol=1e-5)
    for p, p_cpu in zip(model.parameters(), model_cpu.parameters()):
        torch.testing.assert_close(p.cpu(), p_cpu, rtol=1e-5, atol=1e-5)
    # Forward and backward lower their ops on the first step only.
    assert natives_per_step[0] > 10
    assert natives_per_step[1:] == [0] * 4, natives_per_step


def test_random_ops_draw_new_numbers_as_eager_does():
    def f(x):
        return F.dropout(x, 0.5, training=True) + torch.rand_like(x)

    x = torch.ones(64, device="tpu")
    torch.manual_seed(7)
    with torch_tpu.eager_mode("defer_and_fuse"):
        eager = [f(x).cpu() for _ in range(3)]
    compiled = torch.compile(f, backend="tpu")
    torch.manual_seed(7)
    outs = []
    for step in range(3):
        out, was_replay = replayed(compiled, x)
        assert was_replay == (step > 0)
        outs.append(out.cpu())
    assert not torch.equal(outs[1], outs[2])
    for got, want in zip(outs, eager):
        torch.testing.assert_close(got, want)


def test_deferred_index_checks_still_raise_on_replay():
    def f(x, i):
        return x[i] * 2

    compiled = torch.compile(f, backend="tpu")
    x = torch.arange(5.0, device="tpu")
    for _ in range(2):
        out, _ = replayed(compiled, x, torch.tensor([0, 4], device="tpu"))
        torch.testing.assert_close(out.cpu(), torch.tensor([0.0, 8.0]))
    with pytest.raises(IndexError, match="out of bounds"):
        compiled(x, torch.tensor([1, 5], device="tpu"))
        torch.tpu.synchronize()
    # The failure is reported once; the next calls work again.
    out, was_replay = replayed(compiled, x, torch.tensor([3, 1], device="tpu"))
    assert was_replay
    torch.testing.assert_close(out.cpu(), torch.tensor([6.0, 2.0]))


def test_new_signature_records_a_new_plan_and_logs_it(capfd):
    def f(x):
        return x.cos() + 1

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    base = torch.zeros(4, 3, device="tpu")
    previous = _C._get_log_recompiles()
    _C._set_log_recompiles(True)
    try:
        # Dynamo does not guard on storage offsets: one graph meets rows 0 and 2.
        for row, expect_replay in ((0, False), (0, True), (2, False), (2, True), (0, True)):
            out, was_replay = replayed(compiled, base[row])
            assert was_replay == expect_replay, row
            torch.testing.assert_close(out.cpu(), torch.full((3,), 2.0))
    finally:
        _C._set_log_recompiles(previous)
    err = capfd.readouterr().err
    assert "replay plan 2 for compiled graph" in err and "storage offset 0 -> 6" in err, err


def test_a_cpu_scalar_argument_is_copied_in_and_the_graph_replays():
    # The CPU scalar's value changes every call: it is copied to the device each call
    # (one transfer) and read by the replayed program as an argument.
    compiled = torch.compile(lambda a, s: a * s + 1, backend="tpu")
    for step in range(4):
        x = torch.full((3,), float(step), device="tpu")
        out, was_replay = replayed(compiled, x, torch.tensor(float(step)))
        assert was_replay == (step > 0)
        torch.testing.assert_close(out.cpu(), torch.full((3,), float(step * step + 1)))


def test_a_python_float_of_a_dynamic_graph_replays_while_its_value_repeats():
    # With dynamic=True Dynamo passes Python floats (an epsilon, a scale) as 0-d float64
    # CPU tensors that the graph reads on the host: a plan applies to calls with the same
    # value; another value records (and keeps) a plan of its own, with its own result.
    def f(x, eps):
        return x / (x.abs().sum() + eps)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    for step, eps in enumerate((1e-5, 1e-5, 0.5, 0.5, 1e-5)):
        x = torch.randn(6)
        out, was_replay = replayed(compiled, x.to("tpu"), eps)
        assert was_replay == (step in (1, 3, 4)), (step, eps)
        torch.testing.assert_close(out.cpu(), f(x, eps))


def optimizer_step_setup(optimizer_class, widths=(6, 12, 3), activation=torch.nn.Tanh, **options):
    torch.manual_seed(0)

    def make():
        return torch.nn.Sequential(
            torch.nn.Linear(widths[0], widths[1]), activation(), torch.nn.Linear(*widths[1:])
        )

    model_cpu, model = make(), make()
    model.load_state_dict(model_cpu.state_dict())
    model = model.to("tpu")
    opt_cpu = optimizer_class(model_cpu.parameters(), lr=0.01, **options)
    opt = optimizer_class(model.parameters(), lr=0.01, **options)

    def step(m, optimizer, x, y):
        loss = F.cross_entropy(m(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return model_cpu, model, opt_cpu, opt, step


@pytest.mark.parametrize(
    "optimizer_class, options",
    [(torch.optim.AdamW, {}), (torch.optim.Adam, {"foreach": False}), (torch.optim.SGD, {})],
    ids=["AdamW", "Adam-single-tensor", "SGD"],
)
def test_an_optimizer_with_cpu_step_counts_replays_its_device_part(optimizer_class, options):
    """torch.optim keeps step counts on the CPU unless capturable=True: the optimizer
    graph's CPU math runs on the host each call, its device part replays, and parameters,
    moments and step counts equal the CPU's."""
    model_cpu, model, opt_cpu, opt, step = optimizer_step_setup(optimizer_class, **options)
    compiled = torch.compile(step, backend="tpu")
    lowered = []
    shared_before = host_split.stats["shared"]
    for _ in range(5):
        x, y = torch.randn(10, 6), torch.randint(0, 3, (10,))
        loss_cpu = step(model_cpu, opt_cpu, x, y)
        torch_tpu.sync()
        before = native_ops()
        loss = compiled(model, opt, x.to("tpu"), y.to("tpu"))
        torch_tpu.sync()
        after = native_ops()
        lowered.append(
            {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op)}
        )
        torch.testing.assert_close(loss.cpu(), loss_cpu, rtol=1e-5, atol=1e-5)
    for p, p_cpu in zip(model.parameters(), model_cpu.parameters()):
        torch.testing.assert_close(p.cpu(), p_cpu, rtol=1e-5, atol=1e-5)
        state, state_cpu = opt.state[p], opt_cpu.state[p_cpu]
        for key, value in state_cpu.items():
            assert state[key].device == (value.device if key == "step" else torch.device("tpu:0"))
            torch.testing.assert_close(state[key].cpu(), value, rtol=1e-5, atol=1e-6)
    # Once every graph (forward, backward, optimizer) replays, the only op lowered is
    # the eager fill of loss.backward()'s seed.
    assert sum(lowered[0].values()) > 10
    assert lowered[-2:] == [{"aten::fill_.Scalar": 1}] * 2, lowered
    if optimizer_class is not torch.optim.SGD:
        # The parameters' step counts are equal: their scalar math ran once per step.
        assert host_split.stats["shared"] - shared_before >= 4


def test_host_math_on_equal_cpu_scalars_runs_once_and_stays_right_when_they_differ():
    # The first call's CPU scalars are equal, so the host part gets a shared version (one
    # lane of each foreach op); a later call with unequal scalars, or zeros of different
    # signs, must run the full one.
    def f(x, steps):
        bumped = torch._foreach_add(steps, 1)
        scales = torch._foreach_mul(torch._foreach_reciprocal(steps), 2)
        return [x * b + x * s for b, s in zip(bumped, scales)]

    compiled = torch.compile(f, backend="tpu")
    x = torch.arange(1.0, 5.0)
    runs = []
    for values in ([3.0, 3.0, 3.0], [3.0, 4.0, 3.0], [0.0, -0.0, 0.0], [5.0, 5.0, 5.0]):
        steps = [torch.tensor(v) for v in values]
        before = dict(host_split.stats)
        outs = compiled(x.to("tpu"), steps)
        runs.append({k: host_split.stats[k] - before[k] for k in before})
        for out, expected in zip(outs, f(x, steps)):
            torch.testing.assert_close(out.cpu(), expected)
    assert runs == [
        {"shared": 1, "full": 0},
        {"shared": 0, "full": 1},
        {"shared": 0, "full": 1},
        {"shared": 1, "full": 0},
    ]


def test_shared_host_part_keeps_random_draws_lane_scalars_and_returned_values_apart():
    # With equal CPU scalars the shared host part still draws each random number, honours a
    # foreach op's per-lane scalars, and returns values that do not alias each other.
    def f(x, steps):
        noise = [torch.rand(()) for _ in steps]
        scaled = torch._foreach_add(steps, torch._foreach_mul(steps, [1.0, 2.0, 3.0]))
        bumped = torch._foreach_add(steps, 1)
        return [x * s for s in scaled], noise, bumped[0], bumped[1]

    compiled = torch.compile(f, backend="tpu")
    x = torch.arange(1.0, 5.0)
    for value in (2.0, 3.0):
        steps = [torch.tensor(value) for _ in range(3)]
        before = host_split.stats["shared"]
        outs, noise, first, second = compiled(x.to("tpu"), steps)
        assert host_split.stats["shared"] == before + 1
        for out, lane in zip(outs, (1.0, 2.0, 3.0)):
            torch.testing.assert_close(out.cpu(), x * (value + lane * value))
        assert len({n.item() for n in noise}) == 3  # three draws, not one shared
        first.add_(10)
        assert second.item() == value + 1 and first.item() == value + 11


def test_a_graph_writing_a_cpu_tensor_from_device_values_is_not_split():
    # total (CPU) += x.sum() (tpu): a device value written into a CPU tensor stays in the
    # one graph, which runs (and is lowered) every call; the values are still right.
    def f(x, total):
        total.add_(x.sum().cpu())
        return x * 2

    compiled = torch.compile(f, backend="tpu")
    total, expected = torch.zeros(()), 0.0
    for step in range(3):
        x = torch.full((4,), float(step + 1), device="tpu")
        out, was_replay = replayed(compiled, x, total)
        expected += 4.0 * (step + 1)
        assert not was_replay
        torch.testing.assert_close(out.cpu(), torch.full((4,), 2.0 * (step + 1)))
        assert total.item() == expected


def test_replay_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COMPILE_REPLAY", "0")
    compiled = torch.compile(lambda x: x.exp() - 1, backend="tpu")
    for _ in range(3):
        out, was_replay = replayed(compiled, torch.zeros(4, device="tpu"))
        assert not was_replay
        torch.testing.assert_close(out.cpu(), torch.zeros(4))


# OpInfo entries whose first float32 sample is compiled, replayed twice and compared
# with the CPU: elementwise, reductions, matmuls, indexing, sorting, norms. (A graph of
# views alone runs no program: there is nothing to replay.)
REPLAYED_OPS = (
    "add", "pow", "clamp", "amax", "log_softmax", "addmm", "bmm", "cat", "gather",
    "cumsum", "topk", "sort", "masked_fill", "triu", "var", "nn.functional.layer_norm",
)  # fmt: skip


def test_opinfo_samples_replay_with_cpu_results():
    from torch.testing._internal.common_methods_invocations import op_db

    def to_tpu(x):
        if isinstance(x, torch.Tensor):
            return x.to("tpu")
        return type(x)(to_tpu(v) for v in x) if isinstance(x, (list, tuple)) else x

    def to_cpu(x):
        return x.cpu() if isinstance(x, torch.Tensor) else [v.cpu() for v in x]

    ops = {op.name: op for op in op_db if op.name in REPLAYED_OPS and not op.variant_test_name}
    assert sorted(ops) == sorted(REPLAYED_OPS)
    for name, op in ops.items():
        sample = next(iter(op.sample_inputs("cpu", torch.float32)))
        args = [sample.input, *sample.args]
        expected = op.op(*args, **sample.kwargs)
        torch._dynamo.reset()
        compiled = torch.compile(lambda *a: op.op(*a, **sample.kwargs), backend="tpu")
        for call in range(3):
            out, was_replay = replayed(compiled, *to_tpu(args))
            assert was_replay == (call > 0), name
            torch.testing.assert_close(
                to_cpu(out), to_cpu(expected), rtol=1e-4, atol=1e-4, equal_nan=True, msg=name
            )


def test_training_steps_without_syncs_donate_parameters_the_backward_still_reads():
    # The optimizer graph donates the parameters that the forward and backward, maybe still
    # running, read: its replay lets go of the references those executions keep (PJRT runs
    # it after them) instead of waiting for them, so the host runs ahead. Results must be
    # the CPU's, step after step, with no sync between steps.
    model_cpu, model, opt_cpu, opt, step = optimizer_step_setup(
        torch.optim.AdamW, widths=(64, 256, 64), activation=torch.nn.GELU
    )
    compiled = torch.compile(step, backend="tpu")
    batches = [(torch.randn(256, 64), torch.randint(0, 64, (256,))) for _ in range(8)]
    losses_cpu = [step(model_cpu, opt_cpu, x, y) for x, y in batches]
    for x, y in batches[:2]:  # record every graph
        compiled(model, opt, x.to("tpu"), y.to("tpu"))
    torch_tpu.sync()
    before = native_ops()
    dropped = _C._retired_references_dropped()
    losses = [compiled(model, opt, x.to("tpu"), y.to("tpu")) for x, y in batches[2:]]
    dropped = _C._retired_references_dropped() - dropped
    torch_tpu.sync()
    after = native_ops()
    assert dropped > 0  # some parameter was donated while an execution still held it
    lowered = {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op)}
    assert lowered == {"aten::fill_.Scalar": 6}, lowered  # loss.backward()'s seeds only
    for loss, loss_cpu in zip(losses, losses_cpu[2:]):
        torch.testing.assert_close(loss.cpu(), loss_cpu, rtol=1e-4, atol=1e-5)
    for p, p_cpu in zip(model.parameters(), model_cpu.parameters()):
        torch.testing.assert_close(p.cpu(), p_cpu, rtol=1e-4, atol=1e-5)
