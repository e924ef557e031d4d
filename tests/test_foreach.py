"""The elementwise _foreach_ ops an optimizer step calls run as one program over the whole
list (csrc/aten/foreach.cpp), not one per tensor. Each index must compute exactly what the
per-tensor op computes on tpu (bit for bit), and match PyTorch on the CPU, for PyTorch's own
foreach OpInfo samples; lists the program does not serve (mixed dtypes, integers, aliasing)
keep the per-tensor loop; torch.optim's foreach optimizers match the CPU step after step."""

import copy

import pytest
import torch
from torch.testing._internal.common_methods_invocations import (
    foreach_binary_op_db,
    foreach_other_op_db,
    foreach_pointwise_op_db,
    foreach_unary_op_db,
)

import torch_tpu

NATIVE = ("add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "sqrt", "zero")
FOREACH_OPINFOS = [
    op
    for op in foreach_binary_op_db
    + foreach_pointwise_op_db
    + foreach_other_op_db
    + foreach_unary_op_db
    if op.name.removeprefix("_foreach_") in NATIVE
]
TOLERANCE = {
    torch.float32: dict(rtol=1.3e-6, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.int64: dict(rtol=0, atol=0),
}


def executions() -> int:
    return torch_tpu.metrics.snapshot()["executions"]


def _at(arg, i):
    """Argument `arg` of a foreach call as the per-tensor op of index i takes it."""
    return arg[i] if isinstance(arg, (list, tuple)) else arg


def per_tensor(name: str, tensors, args, kwargs):
    """What the loop over the per-tensor ops gives (on the tensors' own device)."""
    out = []
    for i, x in enumerate(tensors):
        a = [_at(arg, i) for arg in args]
        if name in ("add", "sub"):
            out.append(getattr(torch, name)(x, a[0], **kwargs))
        elif name in ("mul", "div"):
            out.append(getattr(torch, name)(x, a[0]))
        elif name in ("addcmul", "addcdiv"):
            value = a[2] if len(a) > 2 else kwargs.get("value", 1)
            if "scalars" in kwargs:  # a list, or a 1-D tensor, of one value per index
                value = kwargs["scalars"][i]
                value = value.item() if isinstance(value, torch.Tensor) else value
            out.append(getattr(torch, name)(x, a[0], a[1], value=value))
        elif name == "lerp":
            out.append(torch.lerp(x, a[0], a[1]))
        elif name == "sqrt":
            out.append(torch.sqrt(x))
        else:
            out.append(torch.zeros_like(x))
    return out


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return [_to(v, device) for v in value]
    return value


def _compare(got, want, dtype, scale=0.0, roundings=None):
    """Within the dtype's tolerance of `want`, and within a few roundings of the largest
    operand (`scale`): a sum's error is an ulp of its operands, not of the result. With
    `roundings` only those count: XLA may contract a * b + c into one fused multiply-add in one
    program and not in another, which moves a result by an ulp of the product."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0
        if roundings is None:
            tolerance = dict(TOLERANCE.get(dtype, {}))
            tolerance["atol"] = max(tolerance.get("atol", 0), 2 * eps * scale)
        else:
            tolerance = dict(rtol=roundings * eps, atol=roundings * eps * scale)
        torch.testing.assert_close(g.cpu(), w.cpu(), equal_nan=True, **tolerance)


def _largest(values) -> float:
    found = [v.abs().max().item() for v in values if isinstance(v, torch.Tensor) and v.numel()]
    found += [abs(v) for v in values if isinstance(v, (int, float))]
    return max(found, default=0.0)


@pytest.mark.parametrize("op", FOREACH_OPINFOS, ids=lambda op: op.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("variant", ["functional", "in_place"])
def test_opinfo_samples_match_the_per_tensor_ops_and_the_cpu(op, dtype, variant):
    name = op.name.removeprefix("_foreach_")
    fn = op.op if variant == "functional" else op.inplace_variant
    if fn is None:
        pytest.skip(f"{op.name} has no {variant} variant")  # _foreach_zero is in-place only
    checked = 0
    for sample in op.sample_inputs("cpu", dtype):
        if not sample.input or sample.input[0].numel() == 0:
            continue
        args, kwargs = list(sample.args), dict(sample.kwargs)
        try:
            want_inputs = [t.clone() for t in sample.input]
            want = fn(want_inputs, *args, **kwargs)
        except (RuntimeError, TypeError) as cpu_error:
            with pytest.raises(type(cpu_error)):
                fn(_to(sample.input, "tpu"), *_to(args, "tpu"), **kwargs)
            continue
        tensors = _to(sample.input, "tpu")
        tpu_args = _to(args, "tpu")
        loop = per_tensor(name, [t.clone() for t in tensors], tpu_args, kwargs)
        got = fn(tensors, *tpu_args, **kwargs)
        if variant == "in_place":
            got, want = tensors, want_inputs
        flat = [
            *sample.input,
            *(a for arg in args for a in (arg if isinstance(arg, list) else [arg])),
        ]
        scale = _largest(flat + list(kwargs.values()))
        _compare(got, want, dtype, scale)
        _compare(got, loop, dtype, scale, roundings=4)
        checked += 1
    assert checked > 0


@pytest.fixture
def strict():
    with torch_tpu.eager_mode("strict"):
        yield


def _tensors(n, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    return [torch.randn(3 + i % 4, 5, dtype=dtype) for i in range(n)]


def test_one_program_per_call_in_strict_mode(strict):
    params, grads = _tensors(20), _tensors(20, seed=1)
    tpu_params, tpu_grads = _to(params, "tpu"), _to(grads, "tpu")
    torch.tpu.synchronize()
    before = executions()
    torch._foreach_addcdiv_(tpu_params, tpu_grads, tpu_grads, [0.1 * i for i in range(20)])
    torch._foreach_mul_(tpu_params, 0.9)
    torch.tpu.synchronize()
    assert executions() - before == 2
    torch._foreach_addcdiv_(params, grads, grads, [0.1 * i for i in range(20)])
    torch._foreach_mul_(params, 0.9)
    _compare(tpu_params, params, torch.float32)


def test_a_long_list_runs_in_chunks(strict):
    xs, ys = _tensors(300), _tensors(300, seed=2)
    tpu_xs, tpu_ys = _to(xs, "tpu"), _to(ys, "tpu")
    torch.tpu.synchronize()
    before = executions()
    got = torch._foreach_lerp(tpu_xs, tpu_ys, 0.3)
    torch.tpu.synchronize()
    assert executions() - before == 3  # 128 + 128 + 44
    _compare(got, torch._foreach_lerp(xs, ys, 0.3), torch.float32)


@pytest.mark.parametrize(
    "case", ["mixed_dtypes", "integers", "crossed_aliases", "repeated_self", "partial_overlap"]
)
def test_lists_one_program_cannot_serve_keep_the_loop(case, strict):
    """Each such list runs the per-tensor ops (one program per tensor) and gives the loop's
    results, aliasing included: x_1 += x_0 must see x_0 already updated."""
    xs = _tensors(4)
    others = _tensors(4, seed=3)
    if case == "mixed_dtypes":
        others[2] = others[2].double()
    elif case == "integers":
        xs = [(x * 10).long() for x in xs]
        others = [(o * 10).long() for o in others]
    tpu_xs, tpu_others = _to(xs, "tpu"), _to(others, "tpu")
    if case == "crossed_aliases":  # [a, b] += [b, a]
        xs = [torch.randn(3, 5), torch.randn(3, 5)]
        tpu_xs = _to(xs, "tpu")
        others, tpu_others = [xs[1], xs[0]], [tpu_xs[1], tpu_xs[0]]
    elif case == "repeated_self":
        xs, tpu_xs = [xs[0], xs[0]], [tpu_xs[0], tpu_xs[0]]
        others, tpu_others = [others[0], others[0] * 2], [tpu_others[0], tpu_others[0] * 2]
    elif case == "partial_overlap":
        base = torch.randn(6, 5)
        tpu_base = base.to("tpu")
        # The per-tensor op refuses a partly overlapping operand, on the CPU as on tpu.
        for x, other in ((base[:3], base[1:4]), (tpu_base[:3], tpu_base[1:4])):
            with pytest.raises(RuntimeError, match="single memory location"):
                torch._foreach_add_([x], [other], alpha=2)
        return
    torch.tpu.synchronize()
    before = executions()
    torch._foreach_add_(tpu_xs, tpu_others, alpha=2)
    torch.tpu.synchronize()
    assert executions() - before == len(tpu_xs)
    torch._foreach_add_(xs, others, alpha=2)
    _compare(tpu_xs, xs, xs[0].dtype)


def test_views_and_shared_scalars_run_as_one_program(strict):
    """Non-contiguous views of separate storages, the same tensor passed twice as operands
    (grad * grad), and a Python scalar shared by every index."""
    base = torch.randn(8, 6)
    grads = [torch.randn(6, 3), torch.randn(3)]
    params = [base.t()[:, 1:7:2], torch.randn(3)]
    cpu_params = [p.clone() for p in params]
    tpu_base = base.to("tpu")
    tpu_params = [tpu_base.t()[:, 1:7:2], params[1].to("tpu")]
    tpu_grads = _to(grads, "tpu")
    torch.tpu.synchronize()
    before = executions()
    torch._foreach_addcmul_(tpu_params, tpu_grads, tpu_grads, value=-0.5)
    torch.tpu.synchronize()
    assert executions() - before == 1
    torch._foreach_addcmul_(cpu_params, grads, grads, value=-0.5)
    _compare(tpu_params, cpu_params, torch.float32)
    base.t()[:, 1:7:2] = cpu_params[0]
    torch.testing.assert_close(tpu_base.cpu(), base)  # written through the view


def test_bad_lists_raise_the_cpu_error_class():
    xs, ys = _tensors(3), _tensors(2)
    for call in (
        lambda a, b: torch._foreach_add_(a, b),  # lengths differ
        lambda a, b: torch._foreach_mul_(a, [1.0, 2.0]),  # scalar list too short
        lambda a, b: torch._foreach_addcdiv_(a, a, a[:2], 0.5),
        lambda a, b: torch._foreach_add_(a, [2.0]),  # one scalar is not a list of three
        lambda a, b: torch._foreach_lerp_(a, a, []),
        lambda a, b: torch._foreach_add_([torch.ones(1, device=a[0].device).expand(3)], 1.0),
    ):
        with pytest.raises(RuntimeError) as cpu_error:
            call(xs, ys)
        with pytest.raises(type(cpu_error.value)):
            call(_to(xs, "tpu"), _to(ys, "tpu"))


@pytest.mark.parametrize(
    "optimizer,options",
    [
        (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
        (torch.optim.Adam, dict(lr=1e-2, amsgrad=False)),
        (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
        (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    ],
)
@pytest.mark.parametrize("eager", ["strict", "defer_and_fuse"])
def test_foreach_optimizers_match_the_cpu_and_run_prepared(optimizer, options, eager):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    on_tpu = copy.deepcopy(model).to("tpu")
    cpu_opt = optimizer(model.parameters(), foreach=True, **options)
    tpu_opt = optimizer(on_tpu.parameters(), foreach=True, **options)
    steady_ops = steady_prepared = 0
    tier_ups = torch_tpu.metrics.snapshot()["tier_ups"]
    with torch_tpu.eager_mode(eager):
        for step in range(5):
            x = torch.randn(5, 8)
            for m, opt, device in ((model, cpu_opt, "cpu"), (on_tpu, tpu_opt, "tpu")):
                opt.zero_grad()
                m(x.to(device)).square().sum().backward()
                before = torch_tpu.metrics.snapshot()
                opt.step()
            after = torch_tpu.metrics.snapshot()
            prepared = sum(after[k] - before[k] for k in ("prepared_runs", "prepared_records"))
            ops = sum(after["native_ops"].values()) - sum(before["native_ops"].values())
            # After the first step (which also creates the state) one op per foreach call
            # (AdamW's step is 8, SGD's at most 4), none per parameter.
            if step >= 1:
                assert 1 <= ops <= 8
            if step >= 2:
                steady_ops, steady_prepared = steady_ops + ops, steady_prepared + prepared
            for cpu_param, tpu_param in zip(model.parameters(), on_tpu.parameters()):
                torch.testing.assert_close(tpu_param.cpu(), cpu_param, rtol=2e-5, atol=2e-5)
    # From the third step on the foreach ops run their kept programs. An op whose quick
    # program was replaced by the optimized one (a tier-up, after 16 runs in the whole
    # process) lowers once more, at its next call, to find the new program.
    tier_ups = torch_tpu.metrics.snapshot()["tier_ups"] - tier_ups
    assert steady_prepared + tier_ups >= steady_ops, (steady_prepared, tier_ups, steady_ops)


def test_out_overloads_write_their_out_lists():
    xs, outs = _tensors(3), [torch.empty(3 + i % 4, 5) for i in range(3)]
    tpu_xs, tpu_outs = _to(xs, "tpu"), [torch.empty_like(o, device="tpu") for o in outs]
    for op, args in (
        (torch.ops.aten._foreach_add.Scalar_out, (1.5,)),
        (torch.ops.aten._foreach_mul.List_out, (xs,)),
        (torch.ops.aten._foreach_div.ScalarList_out, ([2.0, 4.0, 8.0],)),
    ):
        op(xs, *args, out=outs)
        op(tpu_xs, *_to(list(args), "tpu"), out=tpu_outs)
        _compare(tpu_outs, outs, torch.float32)


def test_zero_writes_a_never_written_list_in_one_program(strict):
    tensors = [torch.empty(4, 3, device="tpu") for _ in range(5)]
    torch.tpu.synchronize()
    before = executions()
    torch._foreach_zero_(tensors)
    torch.tpu.synchronize()
    assert executions() - before == 1
    assert all(t.cpu().eq(0).all() for t in tensors)
