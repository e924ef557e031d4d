"""Size buckets in the defer_and_fuse eager mode (torch_tpu.set_dynamic_buckets): a step
that differs from an earlier one only in a dimension's size runs its bucket's program, with
values equal to the CPU's (padding never leaks), and what needs a value on the host
(item(), nonzero, a copy to the CPU, a bad argument) still behaves as in eager."""

import copy
import os
import sys

import pytest
import torch
from torch.nn import functional as F

import torch_tpu
from torch_tpu import eager_buckets
from torch_tpu.compile import bucketed

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from gpt import GPT, Config  # noqa: E402


@pytest.fixture(autouse=True)
def _buckets_on():
    torch._dynamo.reset()
    bucketed.reset()
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch_tpu.set_dynamic_buckets(True)
        try:
            yield
        finally:
            torch_tpu.set_dynamic_buckets(False)
    torch._dynamo.reset()


def _lengths(n, low, high, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [int(torch.randint(low, high, (), generator=generator)) for _ in range(n)]


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_a_dynamic_padding_training_loop_runs_at_its_buckets_with_the_cpus_losses(optimizer):
    config = Config(context=64)
    torch.manual_seed(0)
    cpu_model = GPT(config)
    model = copy.deepcopy(cpu_model).to("tpu")
    if optimizer == "adamw":
        opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, cpu_model)]
    else:
        opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, cpu_model)]
    generator = torch.Generator().manual_seed(1)
    lengths = _lengths(12 if optimizer == "adamw" else 8, 3, 64)
    for length in lengths:
        seq = torch.randint(0, config.vocab, (4, length + 1), generator=generator)
        losses = []
        for m, opt, device in ((model, opts[0], "tpu"), (cpu_model, opts[1], "cpu")):
            x, y = seq[:, :-1].to(device), seq[:, 1:].to(device)
            loss = F.cross_entropy(m(x).reshape(-1, config.vocab), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-5, abs=1e-5), length
    stats = eager_buckets.stats()
    if optimizer == "sgd":
        # (Adam's normalized steps turn float rounding in near-zero gradients into
        # differences of its learning rate; SGD's weights show the gradients themselves.)
        for p, q in zip(model.parameters(), cpu_model.parameters()):
            torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
    # One segment per step, forward and backward: the optimizer's step is not recorded
    # (its sizes never change), it runs as plain defer_and_fuse. The first step runs as
    # recorded; from the next on, the step is one function of the length, compiled
    # once, one program per bucket.
    assert stats["segments"] == len(lengths)
    assert stats["compiled_functions"] == 1
    assert stats["bucketed"] == len(lengths) - 1
    buckets = {1 << (n - 1).bit_length() for n in lengths[1:]}
    (graph,) = [g for g in bucketed.snapshot().values() if g["padded_calls"]]
    assert graph["programs"] <= len(buckets) < len(set(lengths))
    assert graph["exact_calls"] == 0


def test_a_read_between_forward_and_backward_keeps_the_saved_activations():
    # item() ends the forward's segment: the tensors autograd saved (other tensors over
    # the results' storages) must get their values though nothing else holds them.
    w = torch.randn(8, 8)
    w_tpu = w.to("tpu").requires_grad_()
    w.requires_grad_()
    for length in (3, 5, 7, 6, 2):
        x = torch.randn(2, length, 8)
        y = (x @ w).relu().softmax(-1).pow(2).sum()
        y_tpu = (x.to("tpu") @ w_tpu).relu().softmax(-1).pow(2).sum()
        assert y_tpu.item() == pytest.approx(y.item(), rel=1e-5)
        y.backward()
        y_tpu.backward()
        torch.testing.assert_close(w_tpu.grad.cpu(), w.grad, rtol=1e-5, atol=1e-6)
    assert eager_buckets.stats()["bucketed"] >= 3


def test_integers_that_do_not_follow_the_fitted_size_are_caught():
    # n * n fits 8 * n - 15 through n = 3 and 5; at 7 the fit says 41, the op gets 49:
    # the segment is fitted again instead of running with the wrong size.
    for n in (3, 5, 7, 9, 4):
        x = torch.arange(n, dtype=torch.float32)
        total = torch.ones(n * n, device="tpu").sum() + x.to("tpu").sum()
        assert total.item() == n * n + x.sum().item()
    assert eager_buckets.stats()["bucketed"] >= 1


def test_a_batch_and_a_length_changing_together_are_told_apart():
    # view(batch * length, width) and the softmax over the length: two sizes move at
    # once, and the fit must find which integer follows which.
    w = torch.randn(8, 8)
    w_tpu = w.to("tpu")
    sizes = [(2, 5), (3, 7), (2, 9), (4, 6), (3, 11), (2, 13), (4, 3), (3, 14)]
    for batch, length in sizes:
        x = torch.randn(batch, length, 8)
        ref = (x.view(batch * length, 8) @ w).view(batch, length, 8).softmax(1).sum()
        out = (x.to("tpu").view(batch * length, 8) @ w_tpu).view(batch, length, 8)
        assert out.softmax(1).sum().item() == pytest.approx(ref.item(), rel=1e-5)
    stats = eager_buckets.stats()
    assert stats["bucketed"] == len(sizes) - 1
    assert stats["compiled_functions"] <= 2


def test_value_dependent_ops_and_copies_to_the_host_run_at_once():
    x = torch.tensor([0.0, 1.5, 0.0, -2.0, 3.0])
    for n in (5, 4, 3):
        t = x[:n].to("tpu") * 2
        nonzero = torch.nonzero(t)  # its size depends on the values: the segment runs
        assert nonzero.cpu().flatten().tolist() == torch.nonzero(x[:n] * 2).flatten().tolist()
        torch.testing.assert_close((t + 1).cpu(), x[:n] * 2 + 1)


def test_a_bad_argument_raises_at_the_op_as_in_eager():
    a = torch.ones(2, 3, device="tpu")
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        a @ a
    assert (a + 1).sum().item() == 12.0


def test_an_explicit_bucket_list_serves_every_length_with_one_program():
    torch_tpu.set_dynamic_buckets(True, buckets=[64])
    w = torch.randn(16, 16)
    w_tpu = w.to("tpu")
    for length in (5, 9, 17, 33, 60):
        x = torch.randn(3, length, 16)
        out = (x.to("tpu") @ w_tpu).softmax(1).amax(1).mean()
        assert out.item() == pytest.approx((x @ w).softmax(1).amax(1).mean().item(), rel=1e-5)
    (graph,) = [g for g in bucketed.snapshot().values() if g["padded_calls"]]
    assert graph["buckets"] == [(64,)] and graph["programs"] == 1


def test_switched_off_what_was_recorded_runs_and_ops_run_as_before():
    t = torch.ones(4, device="tpu") * 3
    torch_tpu.set_dynamic_buckets(False)
    assert not eager_buckets.dynamic_buckets_enabled()
    assert t.sum().item() == 12.0
    assert (t + 1).cpu().tolist() == [4.0] * 4


def test_other_modes_are_not_recorded():
    with torch_tpu.eager_mode("strict"):
        before = eager_buckets.stats()["segments"]
        assert (torch.ones(3, device="tpu") * 2).sum().item() == 6.0
        assert eager_buckets.stats()["segments"] == before


def test_the_environment_switch_is_checked(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_EAGER_BUCKETS", "yes")
    with pytest.raises(ValueError, match="TORCH_TPU_EAGER_BUCKETS"):
        eager_buckets._configure_from_environment()


def test_a_segment_run_op_by_op_takes_each_segments_own_integers():
    # The input's shape never changes, only the slice's end (and a factory's size): the
    # segment runs op by op, and must not replay the first segment's integers.
    base = torch.arange(12.0).reshape(2, 6)
    x = base.to("tpu")
    for k in (2, 4, 5, 3):
        out = ((x[:, :k] * 2 + 1) * 3).sum()
        assert out.item() == ((base[:, :k] * 2 + 1) * 3).sum().item(), k
    for n in (3, 5, 4):
        assert torch.ones(n, device="tpu").sum().item() == n


def test_in_place_size_changes_and_resizing_out_arguments_keep_eager_semantics():
    y = torch.arange(3.0).to("tpu") * 2
    y.unsqueeze_(0)
    assert tuple(y.shape) == (1, 3)
    assert (y + 1).cpu().tolist() == [[1.0, 3.0, 5.0]]
    a = torch.ones(3, device="tpu") * 2
    c = torch.empty(0, device="tpu")
    torch.add(a, a, out=c)
    assert tuple(c.shape) == (3,)
    assert c.cpu().tolist() == [4.0, 4.0, 4.0]


def test_a_cpu_scalar_changed_after_it_was_recorded_is_read_as_it_was():
    x = torch.arange(3.0).to("tpu")
    step = torch.tensor(1.0)
    r = (x * step + 1) * 2
    step += 10
    assert r.sum().item() == ((torch.arange(3.0) * 1 + 1) * 2).sum().item()
    steps = [torch.tensor(1.0), torch.tensor(2.0)]  # written by an op that returns nothing
    r = (x * steps[1] + 1) * 2
    torch._foreach_add_(steps, 10)
    assert r.sum().item() == ((torch.arange(3.0) * 2 + 1) * 2).sum().item()


def test_arguments_that_nest_differently_are_different_segments():
    # avg_pool2d(x, (2, 3)) and avg_pool2d(x, (2,), (3,)) flatten to the same leaves.
    x = torch.randn(1, 1, 6, 9)
    for _ in range(2):
        for args in (((2, 3),), ((2,), (3,))):
            out = (F.avg_pool2d(x.to("tpu"), *args) * 2 + 1).sum()
            assert out.item() == pytest.approx((F.avg_pool2d(x, *args) * 2 + 1).sum().item())
    pooled = [F.avg_pool2d(x.to("tpu"), *args) for args in (((2, 3),), ((2,), (3,)))]
    for out, args in zip(pooled, (((2, 3),), ((2,), (3,)))):
        torch.testing.assert_close(out.cpu(), F.avg_pool2d(x, *args))


def test_results_of_a_segment_that_failed_to_run_raise_when_read(monkeypatch):
    def failing(*args, **kwargs):
        def segment(*values):
            raise RuntimeError("the device ran out of memory")

        return segment

    monkeypatch.setattr(eager_buckets, "_function", failing)
    t = torch.ones(4, device="tpu") * 3
    u = (t + 1) * 2
    with pytest.raises(RuntimeError, match="ran out of memory"):
        u.sum().item()
    with pytest.raises(RuntimeError, match="has no value.*ran out of memory"):
        t.cpu()


def test_switching_off_under_another_mode_leaves_that_mode_on():
    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

    class Counting(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Counting.calls += 1
            return func(*args, **(kwargs or {}))

    with Counting() as counting:
        torch_tpu.set_dynamic_buckets(False)
        assert _get_current_dispatch_mode() is counting
        assert (torch.ones(3, device="tpu") * 2).sum().item() == 6.0
    assert Counting.calls >= 3
    torch_tpu.set_dynamic_buckets(False)  # now on top again: taken off its stack
    assert _get_current_dispatch_mode() is None


def test_seeding_runs_the_draws_recorded_before_it():
    torch.manual_seed(0)
    a = torch.randn(3, device="tpu") * 1
    torch.manual_seed(0)
    b = torch.randn(3, device="tpu") * 1
    assert torch.equal(a.cpu(), b.cpu())
    state = torch.tpu.get_rng_state()
    c = torch.rand(4, device="tpu") + 0
    torch.tpu.set_rng_state(state)
    d = torch.rand(4, device="tpu") + 0
    assert torch.equal(c.cpu(), d.cpu())


def test_setting_data_after_a_recorded_op_keeps_eager_semantics():
    w = torch.ones(3, device="tpu")
    a = w * 2
    w.data = torch.full((3,), 5.0, device="tpu")
    b = w + 1
    assert a.cpu().tolist() == [2.0] * 3 and b.cpu().tolist() == [6.0] * 3
    layer = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    expected = layer(x).detach()
    layer_tpu = copy.deepcopy(layer).to("tpu")
    torch_tpu.sync()
    y = layer_tpu(x.to("tpu"))
    layer_tpu.to(torch.float64)  # sets each parameter's .data: y was computed before
    torch.testing.assert_close(y.detach().cpu(), expected)
    assert layer_tpu(x.to("tpu", torch.float64)).dtype == torch.float64


def test_a_cpu_tensor_written_from_a_tpu_value_is_written_at_once():
    s = torch.zeros(())
    s.copy_(torch.ones(4, device="tpu").sum())
    assert s.item() == 4.0


def test_an_op_that_writes_an_argument_and_returns_a_new_tensor_runs():
    x = torch.linspace(-1, 1, 6)
    out = F.rrelu(x.to("tpu") * 1.0, lower=0.1, upper=0.3, training=True).cpu()
    positive = x >= 0
    torch.testing.assert_close(out[positive], x[positive])
    slopes = out[~positive] / x[~positive]
    assert bool(((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6)).all())


def test_a_segment_of_aliases_only_leaves_no_stale_names():
    x = torch.ones(3, device="tpu") + 0
    torch_tpu.sync()
    d = x.detach()  # names x's alias; no op is recorded
    torch.tpu.synchronize()  # runs a segment with nothing to run
    assert (x * 2 + d).sum().item() == 9.0


def test_bad_arguments_of_in_place_ops_raise_at_the_op():
    x = torch.randn(4, device="tpu") * 1
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        x.clamp_()
    with pytest.raises(RuntimeError):
        x.add_(torch.ones(3, device="tpu"))
    assert x.shape == (4,) and torch.isfinite(x.cpu()).all()


def test_ops_returning_host_values_and_quantized_tensors_run_at_once():
    x = torch.rand(2, 3, device="tpu") * 1
    assert x.sparse_dim() == 0 and x.dense_dim() == 2
    a = torch.rand(3, 4)
    q = torch.quantize_per_tensor(a.to("tpu") * 1, 0.1, 10, torch.quint8)
    expected = torch.quantize_per_tensor(a, 0.1, 10, torch.quint8).flip(0).dequantize()
    torch.testing.assert_close(q.flip(0).dequantize().cpu(), expected)


def test_mask_indexing_and_writes_through_an_index_behave_as_in_eager():
    x = torch.randn(4, 5)
    mask = x > 0
    t = x.to("tpu") * 1
    torch.testing.assert_close(t[mask.to("tpu")].cpu(), x[mask])
    t[mask.to("tpu")] = 0.5
    expected = x.clone()
    expected[mask] = 0.5
    torch.testing.assert_close(t.cpu(), expected)
    r = torch.randn((), device="tpu") * 1
    with pytest.raises(IndexError):
        r[torch.tensor(0)] = 8.8
    with pytest.raises(RuntimeError):
        r.index_put([], torch.tensor([1.0], device="tpu"), True)
