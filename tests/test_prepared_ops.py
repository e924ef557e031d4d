"""Prepared ops (strict mode runs them, defer_and_fuse records them): a call equal to an earlier one (same op, dtypes, shapes,
strides, zero/non-zero offsets, storages and aliasing) runs the earlier call's program
without lowering it again. Every case runs several times with new values (scalars, view
offsets, wrapped CPU scalars) and is compared with the CPU each time, and the
prepared_runs counter shows the fast path was taken."""

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu

pytestmark = pytest.mark.usefixtures("strict")


def prepared_runs() -> int:
    return torch_tpu.metrics.snapshot()["prepared_runs"]


def check_repeated(fn, *cpu_args, calls=4, expect_prepared=True, per_call=1, **tolerance):
    """fn(*args) on tpu equals fn on the CPU (within `tolerance`, assert_close's rtol and
    atol) for `calls` calls whose arguments change value (not metadata); returns how many
    ran prepared. `per_call`: how many of fn's ops must run prepared in each call after the
    first (count the op under test with the others fn calls, so it cannot hide behind them).
    An op whose quickly compiled program is replaced by the optimized one during the calls
    (a tier-up, after 16 runs counted across the whole process) lowers once more to find the
    new program: each tier-up excuses one prepared run."""
    before = prepared_runs()
    tier_ups = torch_tpu.metrics.snapshot()["tier_ups"]
    for call in range(calls):
        args = [a * (call + 1) if isinstance(a, torch.Tensor) else a for a in cpu_args]
        expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args], call)
        actual = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args], call)
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tolerance)
    ran = prepared_runs() - before
    tier_ups = torch_tpu.metrics.snapshot()["tier_ups"] - tier_ups
    if os.environ.get("PRINT_PREPARED"):
        print("prepared runs", ran, "calls", calls, "tier-ups", tier_ups)
    if expect_prepared:
        assert ran + tier_ups >= per_call * (calls - 1), (
            f"only {ran} prepared runs in {calls} calls ({tier_ups} tier-ups)"
        )
    return ran


def test_binary_ops_with_tensors_and_alpha():
    x, y = torch.randn(6, 5), torch.randn(6, 5)
    check_repeated(lambda a, b, c: a + b, x, y)
    check_repeated(lambda a, b, c: a.sub(b, alpha=2), x, y)
    check_repeated(lambda a, b, c: torch.add(a, b, alpha=0.5), x, y)
    check_repeated(lambda a, b, c: a * b, x, y)
    check_repeated(lambda a, b, c: a / b, x, y)


def test_scalars_change_value_without_reusing_the_first():
    x = torch.randn(32)
    check_repeated(lambda a, c: a * (0.5 + c), x)
    check_repeated(lambda a, c: a + (3 - c), x)
    check_repeated(lambda a, c: a.sub(1.5 * c, alpha=c + 2), x)


def test_wrapped_cpu_scalar_tensors():
    x = torch.randn(7)
    check_repeated(lambda a, c: a * torch.tensor(2.0 + c), x)
    check_repeated(lambda a, c: torch.tensor(c - 1.0) + a, x)


def test_type_promotion_and_reduced_precision():
    i, f = torch.arange(12).reshape(3, 4), torch.randn(3, 4)
    check_repeated(lambda a, b, c: a + b, i, f)
    check_repeated(lambda a, c: a * 2.5, i)
    check_repeated(lambda a, c: a / 3, i)
    check_repeated(lambda a, b, c: a + b, f.bfloat16(), f.bfloat16())
    check_repeated(lambda a, c: a * 0.1, f.half())


def test_in_place_out_and_relu():
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    check_repeated(lambda a, b, c: a.add_(b, alpha=c + 2), x, y)
    check_repeated(lambda a, c: a.mul_(0.5 * c), x)
    check_repeated(lambda a, b, c: torch.mul(a, b, out=torch.empty_like(a)), x, y)
    check_repeated(lambda a, c: a.relu(), x)
    check_repeated(lambda a, c: a.relu_(), x)
    check_repeated(lambda a, c: (a - 5).relu(), torch.arange(10))


def test_views_read_and_write_at_each_offset():
    base = torch.randn(6, 8)
    tpu = base.to("tpu")
    before = prepared_runs()
    for i in range(6):  # row i: offset 8 * i, a run-time operand
        torch.testing.assert_close((tpu[i] * 2).cpu(), base[i] * 2)
        tpu[i].add_(i)
        base[i].add_(i)
    for j in range(1, 8):  # column j: strided, offset j
        torch.testing.assert_close((tpu[:, j] + tpu[:, 0]).cpu(), base[:, j] + base[:, 0])
    torch.testing.assert_close(tpu.cpu(), base)
    # Rows 0 (offset 0) and 1 (the first non-zero offset) lower, rows 2-5 run prepared;
    # column 1 lowers, columns 2-7 run prepared.
    assert prepared_runs() - before == 4 + 4 + 6


def test_broadcasting_and_aliasing():
    x, y = torch.randn(4, 1), torch.randn(1, 5)
    check_repeated(lambda a, b, c: a + b, x, y)
    check_repeated(lambda a, c: a + a, x)
    # Same metadata as a + a, but two storages: must not run a + a's program.
    a, b = torch.randn(4, 1), torch.randn(4, 1)
    ta, tb = a.to("tpu"), b.to("tpu")
    torch.testing.assert_close((ta + ta).cpu(), a + a)
    torch.testing.assert_close((ta + tb).cpu(), a + b)
    torch.testing.assert_close((tb + tb).cpu(), b + b)
    check_repeated(lambda a, c: a.add_(a), x)


def test_reductions():
    x = torch.randn(5, 6, 7)
    check_repeated(lambda a, c: a.sum(), x)
    check_repeated(lambda a, c: a.sum(dim=1), x)
    check_repeated(lambda a, c: a.sum(dim=(0, 2), keepdim=True), x)
    check_repeated(lambda a, c: a.mean(dim=-1), x)
    check_repeated(lambda a, c: a.sum(dtype=torch.float64), x)
    check_repeated(lambda a, c: a.sum(), torch.arange(30).reshape(5, 6))
    # Same input metadata, another reduced dim: another program.
    t = x.to("tpu")
    torch.testing.assert_close(t.sum(dim=0).cpu(), x.sum(dim=0))
    torch.testing.assert_close(t.sum(dim=2).cpu(), x.sum(dim=2))


def test_another_device_gets_its_result_there():
    x = torch.randn(9)
    for device in ("tpu:0", "tpu:1", "tpu:0", "tpu:1"):
        t = x.to(device)
        out = t * 3
        assert out.device == torch.device(device)
        torch.testing.assert_close(out.cpu(), x * 3)


def test_errors_are_still_raised():
    i, f = torch.arange(4, device="tpu"), torch.ones(4, device="tpu")
    i.add_(i)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.add_(f)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(4, device="tpu:0") + torch.ones(4, device="tpu:1")
    with pytest.raises(RuntimeError, match="bool"):
        torch.ones(3, dtype=torch.bool, device="tpu").relu()


def test_debug_mode_lowers_every_call():
    x = torch.randn(16)
    with torch_tpu.eager_mode("debug"):
        before = torch_tpu.metrics.snapshot()
        for c in range(3):
            torch.testing.assert_close((x.to("tpu") * (c + 1)).cpu(), x * (c + 1))
        after = torch_tpu.metrics.snapshot()
    assert after["prepared_runs"] == before["prepared_runs"]
    assert after["prepared_records"] == before["prepared_records"]


def prepared_records() -> int:
    return torch_tpu.metrics.snapshot()["prepared_records"]


def adamw_like_step(p, g, m, v, step):
    """The per-parameter ops of torch.optim.AdamW (foreach=False), on views of one buffer."""
    p.mul_(1 - 0.01 * 0.1)
    m.lerp_(g, 0.1)
    v.mul_(0.999).addcmul_(g, g, value=0.001)
    denom = (v.sqrt() / (1 - 0.999**step) ** 0.5).add_(1e-8)
    p.addcdiv_(m, denom, value=-0.01 / (1 - 0.9**step))
    return p.clamp(-0.5, 0.5).where(g > 0, p * 2)


def test_defer_and_fuse_records_repeated_calls_without_lowering():
    """defer_and_fuse keeps each prepared op's function text: an equal later call is
    recorded into the pending graph without lowering. Scalars, view offsets and the
    inputs change from step to step; every step matches the CPU, and the steps after the
    first record their ops prepared (the first lowers them)."""
    torch.manual_seed(0)
    state = torch.randn(4, 3, 8)  # rows: p, m, v (views of one buffer per parameter)
    state[:, 2].abs_()
    grads = torch.randn(6, 4, 8)
    expected, actual = state.clone(), state.to("tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        counts = []
        for step in range(1, 7):
            before = prepared_records()
            outs = []
            for i in range(4):
                (pe, me, ve), (pa, ma, va) = expected[i], actual[i]
                g = grads[step - 1, i]
                ce = adamw_like_step(pe, g, me, ve, step)
                ca = adamw_like_step(pa, g.to("tpu"), ma, va, step)
                outs.append((ca, ce))
            torch_tpu.sync()
            counts.append(prepared_records() - before)
            for ca, ce in outs:
                torch.testing.assert_close(ca.cpu(), ce)
            torch.testing.assert_close(actual.cpu(), expected)
    # Step 1 lowers parameter 0's ops and records parameters 1-3 prepared (row i is at
    # another offset, a run-time operand); later steps record every op prepared.
    assert counts[0] > 0
    assert counts[1] > counts[0]
    assert counts[2:] == [counts[1]] * 4


def test_defer_and_fuse_prepared_ops_keep_aliasing_and_dtypes_apart():
    a, b = torch.randn(5), torch.randn(5)
    ta, tb = a.to("tpu"), b.to("tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        results = [ta + ta, ta + tb, tb + tb, ta.addcmul(ta, tb), ta.addcmul(tb, tb)]
        ti = torch.arange(5, device="tpu")
        results += [ti * 2.5, ti + ti, (ti + 1) * 2]
        for r in results[:3]:  # the same calls again, now prepared
            r.add_(ta)
    expected = [a + a, a + b, b + b, a.addcmul(a, b), a.addcmul(b, b)]
    ei = torch.arange(5)
    expected += [ei * 2.5, ei + ei, (ei + 1) * 2]
    for e in expected[:3]:
        e.add_(a)
    for r, e in zip(results, expected):
        assert r.dtype == e.dtype
        torch.testing.assert_close(r.cpu(), e)


def test_switched_off_every_call_lowers():
    code = (
        "import torch, torch_tpu\n"
        "x = torch.randn(8)\n"
        "for c in range(3):\n"
        "    torch.testing.assert_close((x.to('tpu') * c).cpu(), x * c)\n"
        "print(torch_tpu.metrics.snapshot()['prepared_runs'])\n"
    )
    env = dict(os.environ, TORCH_TPU_PREPARED_OPS="0", TORCH_TPU_EAGER_MODE="strict")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0"


def test_scalar_buffers_are_shared_by_value_and_stay_exact():
    """Scalar operands come from a table of device buffers keyed by value: a value seen
    before reuses its buffer, and more distinct values than the table holds (it is
    cleared when full) still give exact results, in every dtype's own bytes."""
    x = torch.arange(16, dtype=torch.float32)
    xi = torch.arange(16, dtype=torch.int32)
    tx, txi = x.to("tpu"), xi.to("tpu")
    for step in range(700):  # more than the table's 512 entries
        value = step * 0.25 - 40
        torch.testing.assert_close((tx * value).cpu(), x * value, rtol=0, atol=0)
        if step % 50 == 0:  # an int32 1 and a float32 1.0 are different operands
            torch.testing.assert_close((txi + step).cpu(), xi + step, rtol=0, atol=0)
            torch.testing.assert_close((tx + step).cpu(), x + step, rtol=0, atol=0)
    # Back to the first values after the table was cleared.
    torch.testing.assert_close((tx * -40.0).cpu(), x * -40.0, rtol=0, atol=0)


def test_a_long_chain_of_small_ops_keeps_its_inputs_until_they_ran():
    """Small executions keep their inputs alive in batches (checked together, not one by
    one); a chain longer than a batch, whose intermediates are dropped at once, still
    computes every step from the right inputs, and large ones do too."""
    for n in (128, 1 << 18):  # 512 bytes, and 1 MiB: past the batch's byte bound
        x = torch.randn(n)
        expected, actual = x.clone(), x.to("tpu")
        for step in range(40):
            expected = (expected * 0.5 + step).relu()
            actual = (actual * 0.5 + step).relu()
        torch.tpu.synchronize()
        torch.testing.assert_close(actual.cpu(), expected)


def test_matrix_products_with_changing_alpha_and_beta():
    """mm, addmm, bmm and baddbmm are prepared; alpha and beta travel as operands, except
    the values the lowering leaves out (alpha 1, beta 0 or 1), which are part of the
    signature, so a call with beta 0 never runs a program that reads self."""
    a, b, c = torch.randn(5, 4), torch.randn(4, 3), torch.randn(5, 3)
    check_repeated(lambda x, y, n: x @ y, a, b)
    check_repeated(lambda s, x, y, n: torch.addmm(s, x, y, beta=0.5 + n, alpha=2.5 - n), c, a, b)
    ba, bb, bc = torch.randn(2, 5, 4), torch.randn(2, 4, 3), torch.randn(2, 5, 3)
    check_repeated(lambda x, y, n: torch.bmm(x, y), ba, bb)
    check_repeated(lambda s, x, y, n: torch.baddbmm(s, x, y, beta=n + 0.25), bc, ba, bb)
    nan_self = torch.full((5, 3), float("nan"))
    ta, tb, tn = a.to("tpu"), b.to("tpu"), nan_self.to("tpu")
    for beta, alpha in [(1.5, 2.0), (0, 2.0), (1, 1), (0, 1), (1.5, 2.0), (0, 2.0)]:
        expected = torch.addmm(nan_self, a, b, beta=beta, alpha=alpha)
        torch.testing.assert_close(
            torch.addmm(tn, ta, tb, beta=beta, alpha=alpha).cpu(), expected, equal_nan=True
        )


def test_matmul_precision_is_part_of_the_signature():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    ta, tb = a.to("tpu"), b.to("tpu")
    previous = torch.get_float32_matmul_precision()
    try:
        for setting in ("highest", "medium", "highest", "medium"):
            torch.set_float32_matmul_precision(setting)
            before = torch_tpu.metrics.snapshot()["compiles"]
            torch.testing.assert_close((ta @ tb).cpu(), a @ b)
            torch.testing.assert_close((ta @ tb).cpu(), a @ b)
            compiled = torch_tpu.metrics.snapshot()["compiles"] - before
            # a setting's first call compiles its program; nothing compiles after
            assert compiled <= 1
    finally:
        torch.set_float32_matmul_precision(previous)


def test_normalization_softmax_and_activations_run_prepared():
    """Each case is one op, so every call after the first runs prepared (check_repeated
    counts them); eps and the activations' scalars change value from call to call."""
    F = torch.nn.functional
    x, w, b = torch.randn(4, 3, 5), torch.randn(5), torch.randn(5)
    check_repeated(
        lambda a, w, b, c: torch.native_layer_norm(a, (5,), w, b, 1e-5 * (c + 1))[0], x, w, b
    )
    check_repeated(
        lambda a, c: torch.native_layer_norm(a, (3, 5), None, None, 1e-3 * (c + 1))[2], x
    )
    out, mean, rstd = torch.native_layer_norm(x, (5,), w, b, 1e-5)
    check_repeated(
        lambda g, a, m, r, w, b, c: torch.cat(
            [
                t.flatten()
                for t in torch.ops.aten.native_layer_norm_backward(
                    g, a, (5,), m, r, w, b, [True, True, True]
                )
            ]
        ),
        torch.randn_like(x),
        x,
        mean,
        rstd,
        w,
        b,
        rtol=1e-5,  # sums over rows of values the calls scale up to 256x
        atol=1e-4,
    )
    check_repeated(lambda a, c: torch.softmax(a, 1), x)
    check_repeated(lambda a, c: torch.log_softmax(a, -1), x)
    y = torch.softmax(x, -1)
    check_repeated(
        lambda g, y, c: torch.ops.aten._softmax_backward_data(g, y, -1, torch.float32), x, y
    )
    check_repeated(
        lambda g, y, c: torch.ops.aten._log_softmax_backward_data(g, y, 2, torch.float32), x, y
    )
    # gelu's two approximations are two programs, never one served for the other
    for approximate in ("none", "tanh", "none"):
        check_repeated(lambda a, c: F.gelu(a, approximate=approximate), x)
        check_repeated(
            lambda g, a, c: torch.ops.aten.gelu_backward(g, a, approximate=approximate),
            x,
            x.flip(0),
            atol=5e-5,  # the two approximations differ by 1e-3 here
            rtol=1e-5,
        )
    check_repeated(lambda a, c: F.leaky_relu(a, 0.1 * (c + 1)), x)
    check_repeated(lambda a, c: F.softplus(a, beta=c + 1, threshold=2.0 + c), x)
    check_repeated(lambda a, c: F.hardtanh(a, -c - 0.5, c + 0.5), x)
    for is_result in (False, True, False):
        check_repeated(
            lambda g, a, c: torch.ops.aten.elu_backward(g, 1.0 + c, 1.0, 0.5, is_result, a),
            x,
            x.abs(),
        )


def test_fill_zero_and_copy_run_prepared():
    base = torch.randn(6, 8)
    check_repeated(lambda a, c: a.fill_(c + 0.5), base)
    check_repeated(lambda a, c: a[1:3].fill_(c - 2.0), base)
    check_repeated(lambda a, c: torch.arange(6).reshape(2, 3).to(a.device).fill_(c + 7), base)
    check_repeated(lambda a, c: a[:, c + 1].zero_(), base)  # offsets 1-4: non-zero each time
    check_repeated(lambda a, c: a.t()[c + 1].copy_(a[c + 1, :6]), base)
    check_repeated(
        lambda a, c: torch.empty(6, 8, dtype=torch.float64, device=a.device).copy_(a), base
    )
    check_repeated(lambda a, c: torch.zeros(3, 8, device=a.device).copy_(a[c]), base)


def test_defer_and_fuse_records_layer_norm_and_gelu_prepared():
    F = torch.nn.functional
    x, w = torch.randn(6, 16), torch.randn(16)
    tx, tw = x.to("tpu"), w.to("tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        counts, results = [], []
        for step in range(3):
            before = prepared_records()
            results.append(
                F.gelu(F.layer_norm(tx * (step + 1), (16,), tw, None, 1e-5 * (step + 1)))
            )
            counts.append(prepared_records() - before)
        torch_tpu.sync()
    for step, r in enumerate(results):
        expected = F.gelu(F.layer_norm(x * (step + 1), (16,), w, None, 1e-5 * (step + 1)))
        torch.testing.assert_close(r.cpu(), expected)
    assert counts[1:] == [3, 3]  # mul, native_layer_norm, gelu


def test_cat_runs_prepared():
    """cat's parts (any number, empty ones included) and their dtypes are in the signature."""
    a, b, c = torch.randn(3, 4), torch.randn(2, 4), torch.randn(5, 4)
    check_repeated(lambda x, y, z, i: torch.cat([x, y, z]), a, b, c)
    check_repeated(lambda x, y, z, i: torch.cat([x.t(), z.t()], dim=1), a, b, c)
    check_repeated(lambda x, y, z, i: torch.cat([x, y[:0], y]), a, b, c)
    check_repeated(lambda x, y, z, i: torch.cat([x, y.double(), x]), a, b, c, per_call=2)
    # A different number of parts is another signature, never served the first's program.
    check_repeated(lambda x, y, z, i: torch.cat([x] * (i % 2 + 1)), a, b, c, expect_prepared=False)


def test_arange_runs_prepared_with_new_start_and_step():
    x = torch.zeros(1)

    def floats(t, i):
        step = 0.5 * (i + 1)
        return torch.arange(3.0 * i, 3.0 * i + 8 * step, step, device=t.device) + t

    check_repeated(floats, x, per_call=2)  # arange and the add
    check_repeated(lambda t, i: torch.arange(i, i + 8, device=t.device) + t.long(), x, per_call=3)
    check_repeated(
        lambda t, i: torch.arange(9 - i, -7 - i, -2, device=t.device) * t.long(), x, per_call=3
    )


def test_nll_loss_and_its_target_check_run_prepared():
    """Cross entropy's nll_loss forward, backward and target check are prepared; a bad target
    in a later, prepared call still raises the CPU's IndexError."""
    logits, target = torch.randn(6, 5), torch.tensor([0, 4, 2, 1, 3, 2])

    def loss_and_grad(x, i):  # the target is not an argument: check_repeated scales those
        x = x.clone().requires_grad_()
        t = target.to(x.device)
        loss = torch.nn.functional.cross_entropy(x, t, ignore_index=i % 3, reduction="mean")
        loss.backward()
        return torch.cat([loss.detach().reshape(1), x.grad.flatten()])

    # 8 ops per call: the nll_loss forward, its target check and backward among them
    check_repeated(loss_and_grad, logits, per_call=8)
    check_repeated(
        lambda x, i: torch.nn.functional.nll_loss(
            x.log_softmax(1), target.to(x.device), reduction="none"
        ),
        logits,
        per_call=3,  # log_softmax, nll_loss and its target check
    )
    bad = target.clone()
    bad[3] = 5
    with pytest.raises(IndexError, match="out of bounds"):
        torch.nn.functional.cross_entropy(logits.to("tpu"), bad.to("tpu")).item()


def test_index_select_embedding_and_the_bounds_check_run_prepared():
    """index_select, its bounds check and embedding's backward are prepared; an index out of
    range in a later, prepared call still raises the CPU's IndexError."""
    table, idx = torch.randn(7, 4), torch.tensor([3, 0, 6, 3])
    check_repeated(lambda w, i: w.index_select(0, idx.to(w.device)), table, per_call=2)
    check_repeated(lambda w, i: w.index_select(1, (idx % 4).to(w.device)), table, per_call=2)

    def embedding_grad(w, i):  # padding_idx changes value each call: a run-time operand
        w = w.clone().requires_grad_()
        torch.nn.functional.embedding(idx.to(w.device), w, padding_idx=i % 3).sum().backward()
        return w.grad

    check_repeated(embedding_grad, table, per_call=7)
    with pytest.raises(IndexError, match="index out of range"):
        table.to("tpu").index_select(0, torch.tensor([3, 0, 7, 3], device="tpu")).cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_pow_by_a_scalar_matches_the_cpus_formulas_as_the_exponent_changes(dtype):
    # The CPU computes x ** 2, ** 3, ** -2 and ** -1 (float and double; bfloat16 for -1) by
    # x * x, x * x * x, 1 / (x * x) and 1 / x, not pow(): tpu does the same (to the bit), and
    # an exponent going from a special value to an ordinary one and back takes the right
    # program each time (the special ones are part of the prepared signature).
    x = torch.cat([torch.randn(200) * 30, torch.tensor([0.0, -0.0, 1e-30, 1e30, float("inf")])])
    x = x.to(dtype)
    exact = dtype in (torch.float32, torch.float64)
    for exponent in (2, 2.0, 2.5, 3, -2, -1, -1.0, 2.7, 2, 0.5, 3.0):
        expected = x**exponent
        got = (x.to("tpu") ** exponent).cpu()
        special = exponent in (2, 3, -2, -1) if exact else exponent == -1 and dtype != torch.float16
        if special:
            assert torch.equal(got, expected), exponent
        else:  # pow(): within a few roundings (half types round a float32 pow)
            tol = {} if exact else dict(rtol=3e-2, atol=1e-5)
            torch.testing.assert_close(got, expected, equal_nan=True, **tol)


def test_pow_by_two_runs_without_xla_power_in_place_and_out(strict, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    x = torch.randn(3, 41)  # a shape of this test alone
    a = x.to("tpu")
    torch.testing.assert_close((a**2).cpu(), x**2, rtol=0, atol=0)
    b = a.clone()
    b.pow_(3)
    torch.testing.assert_close(b.cpu(), x**3, rtol=0, atol=0)
    out = torch.empty_like(a)
    torch.pow(a, -2, out=out)
    torch.testing.assert_close(out.cpu(), x**-2, rtol=0, atol=0)
    texts = [p.read_text() for p in sorted(tmp_path.glob("*.mlir"))]
    powers = [t for t in texts if "aten__pow" in t or "stablehlo.power" in t]
    assert texts and not any("stablehlo.power" in t for t in texts), powers
    # An ordinary exponent still lowers to power.
    torch.testing.assert_close((a**2.5).cpu(), x**2.5, equal_nan=True)
    texts = [p.read_text() for p in sorted(tmp_path.glob("*.mlir"))]
    assert any("stablehlo.power" in t for t in texts)
