"""torch.compile(backend="tpu") against eager: the example GPT and CNN in training
and inference, a compiled step with optimizer.step(), graph breaks, mutated inputs,
dynamic shapes and a set of OpInfo ops. Each model is compiled once per module."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch
from torch.nn import functional as F

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from gpt import GPT, Config, batches  # noqa: E402
from train_cnn import make_model  # noqa: E402

STEPS = 3


def _compiles():
    """Dynamo's count of graphs handed to a backend."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _assert_close(actual, expected, atol=1e-5, rtol=1e-4):
    assert actual.device == expected.device
    torch.testing.assert_close(actual.cpu(), expected.cpu(), atol=atol, rtol=rtol)


# --- registration -------------------------------------------------------------------


def test_backend_and_device_interface_registered():
    from torch._dynamo.device_interface import get_interface_for_device

    from torch_tpu.compile.device_interface import TpuInterface

    assert "tpu" in torch._dynamo.list_backends()
    interface = get_interface_for_device(torch.device("tpu", 0))
    assert interface is TpuInterface
    assert interface.device_count() == torch.tpu.device_count()
    assert interface.current_stream().device == torch.device("tpu", 0)
    stream = interface.Stream()
    assert stream == interface.current_stream()
    with torch.tpu.device(0):
        assert interface.exchange_device(1) == 0
        assert torch.tpu.current_device() == 1
        interface.maybe_exchange_device(0)
    assert torch.tpu.current_device() == 0


def test_import_does_not_load_dynamo():
    code = "import sys, torch_tpu; assert 'torch._dynamo' not in sys.modules"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# --- the example GPT ----------------------------------------------------------------


def _gpt_losses(model, optimizer, config, forward):
    losses = []
    for x, y in batches(config, batch=4, steps=STEPS):
        x, y = x.to("tpu"), y.to("tpu")
        loss = F.cross_entropy(forward(x).reshape(-1, config.vocab), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_gpt_training_matches_eager():
    torch.manual_seed(0)
    config = Config(context=16, width=32, layers=1)
    eager = GPT(config).to("tpu")
    compiled = copy.deepcopy(eager)
    cpu = copy.deepcopy(eager).cpu()
    expected = _gpt_losses(eager, torch.optim.AdamW(eager.parameters(), lr=1e-3), config, eager)
    actual = _gpt_losses(
        compiled,
        torch.optim.AdamW(compiled.parameters(), lr=1e-3),
        config,
        torch.compile(compiled, backend="tpu"),
    )
    assert actual == pytest.approx(expected, abs=1e-5)
    x, y = next(batches(config, batch=4, steps=1))
    on_cpu = F.cross_entropy(cpu(x).reshape(-1, config.vocab), y.reshape(-1)).item()
    assert actual[0] == pytest.approx(on_cpu, abs=1e-4)
    # AdamW turns rounding differences in near-zero gradients into steps of up to lr:
    # after 3 steps eager tpu and the CPU differ by ~1e-4 as well.
    for (name, a), b in zip(compiled.named_parameters(), eager.parameters()):
        assert a.device.type == "tpu", name
        _assert_close(a, b, atol=2e-4)


def test_a_graph_is_one_program_compiled_once():
    def fn(x, w):
        return torch.tanh(x @ w).softmax(-1) * 2 + 1

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    compiled = torch.compile(fn, backend="tpu")
    compiled(x.to("tpu"), w.to("tpu")).cpu()  # compiles
    torch_tpu.metrics.reset()
    actual = compiled(x.to("tpu"), w.to("tpu")).cpu()
    stats = torch_tpu.metrics.snapshot()
    torch.testing.assert_close(actual, fn(x, w), atol=1e-5, rtol=1e-5)
    assert stats["compiles"] == 0
    assert stats["executions"] == 1


# --- a compiled step with optimizer.step() -------------------------------------------


def test_compiled_step_with_optimizer_matches_eager():
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    eager = eager.to("tpu")
    compiled = copy.deepcopy(eager)
    eager_opt = torch.optim.AdamW(eager.parameters(), lr=1e-2)
    compiled_opt = torch.optim.AdamW(compiled.parameters(), lr=1e-2)

    def step(model, optimizer, x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    compiled_step = torch.compile(step, backend="tpu")
    for _ in range(STEPS):
        x, y = torch.randn(5, 8).to("tpu"), torch.randn(5, 4).to("tpu")
        expected = step(eager, eager_opt, x, y)
        actual = compiled_step(compiled, compiled_opt, x, y)
        _assert_close(actual, expected)
    for a, b in zip(compiled.parameters(), eager.parameters()):
        _assert_close(a, b)
        state, eager_state = compiled_opt.state[a], eager_opt.state[b]
        assert state["exp_avg"].device.type == "tpu"
        _assert_close(state["exp_avg"], eager_state["exp_avg"])
        _assert_close(state["exp_avg_sq"], eager_state["exp_avg_sq"])
        assert float(state["step"]) == float(eager_state["step"]) == STEPS


# --- the example CNN: batch norm statistics, inference --------------------------------


@pytest.fixture(scope="module")
def cnn():
    torch.manual_seed(0)
    eager = make_model(dropout=0.0).to("tpu")
    compiled = copy.deepcopy(eager)
    return eager, compiled, torch.compile(compiled, backend="tpu")


def test_cnn_training_updates_batch_norm_statistics(cnn):
    eager, compiled, forward = cnn
    torch.manual_seed(1)
    images = torch.randn(4, 3, 16, 16).to("tpu")
    mean = compiled[1].running_mean
    address = mean.data_ptr()
    for _ in range(2):
        forward(images).square().mean().backward()
        eager(images).square().mean().backward()
    assert mean.data_ptr() == address  # written back in place, not replaced
    assert int(compiled[1].num_batches_tracked) == 2
    for (name, a), b in zip(compiled.state_dict().items(), eager.state_dict().values()):
        _assert_close(a, b, atol=1e-5)
    for a, b in zip(compiled.parameters(), eager.parameters()):
        _assert_close(a.grad, b.grad, atol=1e-5)


def test_cnn_inference_no_grad(cnn):
    eager, compiled, forward = cnn
    eager.eval()
    compiled.eval()
    images = torch.randn(4, 3, 16, 16).to("tpu")
    with torch.no_grad():
        actual = forward(images)
        expected = eager(images)
    assert not actual.requires_grad
    _assert_close(actual, expected)
    running_var = compiled[1].running_var.cpu()
    with torch.no_grad():
        forward(images)
    _assert_close(compiled[1].running_var.cpu(), running_var)  # eval: untouched


# --- graph breaks, mutation, dynamic shapes -------------------------------------------


def test_graph_breaks_run_in_the_current_eager_mode(capsys):
    def fn(x):
        y = x.sin() * 2
        print("between graphs")
        scale = y.sum().item()
        return y.cos() + scale

    torch._dynamo.utils.counters.clear()
    x = torch.randn(3, 5)
    with torch_tpu.eager_mode("debug"):
        actual = torch.compile(fn, backend="tpu")(x.to("tpu"))
        assert torch_tpu.get_eager_mode() == "debug"
    assert "between graphs" in capsys.readouterr().out
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) >= 1
    torch.testing.assert_close(actual.cpu(), fn(x), atol=1e-5, rtol=1e-5)


def test_mutated_inputs_are_written_back_in_place():
    def fn(x, buffer):
        buffer.mul_(0.5).add_(x)
        x[0] = 0
        return x.sum() + buffer.sum()

    x, buffer = torch.randn(4), torch.randn(4)
    tx, tbuffer = x.to("tpu"), buffer.to("tpu")
    addresses = (tx.data_ptr(), tbuffer.data_ptr())
    actual = torch.compile(fn, backend="tpu")(tx, tbuffer)
    expected = fn(x, buffer)
    assert (tx.data_ptr(), tbuffer.data_ptr()) == addresses
    torch.testing.assert_close(actual.cpu(), expected)
    torch.testing.assert_close(tx.cpu(), x)
    torch.testing.assert_close(tbuffer.cpu(), buffer)


def test_dynamic_true_compiles_one_graph_for_all_sizes():
    def fn(x, w):
        return torch.softmax(x @ w, dim=-1).sum(0)

    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    w = torch.randn(6, 3)
    for rows in (2, 5, 9):
        x = torch.randn(rows, 6)
        actual = compiled(x.to("tpu"), w.to("tpu"))
        torch.testing.assert_close(actual.cpu(), fn(x, w), atol=1e-5, rtol=1e-5)
    assert _compiles() == 1


def test_random_ops_draw_the_same_numbers_as_eager():
    def fn(x):
        return F.dropout(x.sin(), 0.5, training=True) + torch.rand_like(x)

    x = torch.randn(64, device="tpu")
    torch.tpu.manual_seed(3)
    expected = fn(x)
    torch.tpu.manual_seed(3)
    actual = torch.compile(fn, backend="tpu")(x)
    _assert_close(actual, expected, atol=0, rtol=0)


# --- OpInfo ops -----------------------------------------------------------------------

OPINFO_OPS = (
    "add",
    "mul",
    "div",
    "exp",
    "tanh",
    "where",
    "sum",
    "mean",
    "amax",
    "matmul",
    "cat",
    "softmax",
    "nn.functional.gelu",
    "nn.functional.layer_norm",
    "nn.functional.cross_entropy",
    "index_select",
)
SAMPLES_PER_OP = 2


def _opinfo(name):
    from torch.testing._internal.common_methods_invocations import op_db

    return next(op for op in op_db if op.name == name)


@pytest.mark.parametrize("name", OPINFO_OPS)
def test_opinfo_compiled_matches_cpu(name):
    op = _opinfo(name)
    samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=False))
    samples = samples[:SAMPLES_PER_OP]
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a, **k: op.op(*a, **k), backend="tpu", dynamic=False)
    for sample in samples:
        moved = sample.transform(lambda t: t.to("tpu") if isinstance(t, torch.Tensor) else t)
        expected = op.op(sample.input, *sample.args, **sample.kwargs)
        actual = compiled(moved.input, *moved.args, **moved.kwargs)
        torch.testing.assert_close(
            torch.utils._pytree.tree_map(lambda t: t.cpu(), actual),
            expected,
            atol=1e-5,
            rtol=1.3e-4,
        )
