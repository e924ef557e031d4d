"""Indexing and shape ops against PyTorch CPU: index_select, gather, scatter*,
index_add, advanced indexing (index / index_put_), masked_select, nonzero, embedding,
cat/stack, flip, roll, tril/triu and padding — values, dtypes, out=/in-place,
gradients, error classes, and native coverage (no CPU fallback)."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-9, 10, shape, generator=g).to(dtype)


def tpu(t):
    return t.to("tpu")


def on(t, x):
    """`t` on the device of `x`."""
    return t.to(x.device)


def check(actual, expected, exact=True):
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    got = actual.cpu()
    if exact or not expected.dtype.is_floating_point:
        assert torch.equal(got, expected), (got, expected)
    else:
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)


def same_error(cpu_fn, tpu_fn):
    with pytest.raises(Exception) as cpu:
        cpu_fn()
    with pytest.raises(Exception) as dev:
        tpu_fn()
    assert type(dev.value) is type(cpu.value), (cpu.value, dev.value)


def grads(fn, *inputs):
    """Gradients of sum(fn(*inputs) * w) on CPU and tpu."""
    cpu_in = [x.clone().requires_grad_() for x in inputs]
    dev_in = [tpu(x).requires_grad_() for x in inputs]
    out = fn(*cpu_in)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    expected = torch.autograd.grad((out * w).sum(), cpu_in)
    actual = torch.autograd.grad((fn(*dev_in) * tpu(w)).sum(), dev_in)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- index_select


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(native, dtype, dim):
    x = make((4, 5, 6), dtype)
    idx = torch.tensor([3, 0, 0, 2])
    check(tpu(x).index_select(dim, tpu(idx)), x.index_select(dim, idx))
    idx32 = idx.int()
    check(tpu(x).index_select(dim, tpu(idx32)), x.index_select(dim, idx32))


def test_index_select_shapes_and_out(native):
    x = make((4, 6), torch.float32)
    xt = x.t()  # non-contiguous
    idx = torch.tensor([5, 1])
    check(tpu(xt).index_select(0, tpu(idx)), xt.index_select(0, idx))
    check(tpu(x).index_select(1, tpu(torch.tensor(2))), x.index_select(1, torch.tensor(2)))
    s = torch.tensor(3.0)
    check(tpu(s).index_select(0, tpu(torch.tensor([0]))), s.index_select(0, torch.tensor([0])))
    e = torch.tensor([], dtype=torch.long)
    check(tpu(x).index_select(0, tpu(e)), x.index_select(0, e))
    out = tpu(torch.empty(0))
    torch.index_select(tpu(x), 1, tpu(idx), out=out)
    check(out, x.index_select(1, idx))


def test_index_select_errors():
    x = make((3, 4), torch.float32)
    for dim, bad in [(0, [3]), (0, [-1]), (1, [4]), (1, [-1])]:
        i = torch.tensor(bad)
        same_error(lambda: x.index_select(dim, i), lambda: tpu(x).index_select(dim, tpu(i)))
    same_error(
        lambda: x.index_select(2, torch.tensor([0])),
        lambda: tpu(x).index_select(2, tpu(torch.tensor([0]))),
    )
    f = torch.tensor([0.0])
    same_error(lambda: x.index_select(0, f), lambda: tpu(x).index_select(0, tpu(f)))


def test_index_select_grad_and_embedding(native):
    grads(lambda x: x.index_select(1, on(torch.tensor([2, 0, 2]), x)), make((3, 4), torch.float32))
    w = make((10, 3), torch.float32)
    idx = torch.tensor([[1, 2, 1], [9, 0, 1]])
    check(F.embedding(tpu(idx), tpu(w)), F.embedding(idx, w))
    for padding_idx, scale in [(None, False), (1, False), (None, True), (1, True)]:
        grads(
            lambda w: F.embedding(on(idx, w), w, padding_idx=padding_idx, scale_grad_by_freq=scale),
            w,
        )
    bad = torch.tensor([10])
    same_error(lambda: F.embedding(bad, w), lambda: F.embedding(tpu(bad), tpu(w)))


# ---------------------------------------------------------------- gather / scatter


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(native, dtype, dim):
    x = make((4, 5), dtype)
    idx = torch.randint(0, x.shape[dim], (3, 4), generator=torch.Generator().manual_seed(2))
    check(tpu(x).gather(dim, tpu(idx)), x.gather(dim, idx))
    out = tpu(torch.empty(0, dtype=dtype))
    torch.gather(tpu(x), dim, tpu(idx), out=out)
    check(out, x.gather(dim, idx))


def test_gather_special(native):
    s = torch.tensor(2.5)
    check(tpu(s).gather(0, tpu(torch.tensor(0))), s.gather(0, torch.tensor(0)))
    x = make((4, 5), torch.float32).t()
    idx = torch.tensor([[0, 3], [1, 1]])
    check(tpu(x).gather(1, tpu(idx)), x.gather(1, idx))
    e = torch.empty(0, 5, dtype=torch.long)
    check(tpu(x).gather(0, tpu(e)), x.gather(0, e))
    grads(lambda x: x.gather(1, on(idx, x)), make((3, 4), torch.float32))


def test_gather_errors():
    x = make((3, 4), torch.float32)
    for bad in [[[4]], [[-1]]]:
        i = torch.tensor(bad)
        same_error(lambda: x.gather(1, i), lambda: tpu(x).gather(1, tpu(i)))
    i = torch.tensor([[0]], dtype=torch.int16)
    same_error(lambda: x.gather(1, i), lambda: tpu(x).gather(1, tpu(i)))
    i = torch.tensor([[3, 0]], dtype=torch.int32)
    check(tpu(x).gather(1, tpu(i)), x.gather(1, i))
    i = torch.zeros(5, 1, dtype=torch.long)
    same_error(lambda: x.gather(1, i), lambda: tpu(x).gather(1, tpu(i)))


def _perm_index(shape, size, dim, seed=3):
    """Distinct indices along `dim` (so replace-scatter is deterministic)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.stack(
        [torch.randperm(size, generator=g)[: shape[dim]] for _ in range(shape[1 - dim])]
    )
    return idx if dim == 1 else idx.t().contiguous()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter(native, dtype, dim):
    x = make((5, 6), dtype)
    d = dim % 2
    shape = (3, 4) if d == 0 else (4, 3)
    idx = _perm_index(shape, x.shape[d], d)
    src = make((5, 6), dtype, seed=4)
    check(tpu(x).scatter(dim, tpu(idx), tpu(src)), x.scatter(dim, idx, src))
    check(tpu(x).scatter(dim, tpu(idx), 1), x.scatter(dim, idx, 1))
    y = tpu(x)
    y.scatter_(dim, tpu(idx), tpu(src))
    check(y, x.clone().scatter_(dim, idx, src))
    out = tpu(torch.empty(0, dtype=dtype))
    torch.scatter(tpu(x), dim, tpu(idx), tpu(src), out=out)
    check(out, x.scatter(dim, idx, src))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_scatter_add_and_reduce(native, dtype):
    x = make((4, 5), dtype)
    idx = torch.tensor([[0, 1, 0, 3, 3], [0, 0, 0, 2, 1]])
    src = make((2, 5), dtype, seed=5)
    exact = dtype != torch.bfloat16
    check(tpu(x).scatter_add(0, tpu(idx), tpu(src)), x.scatter_add(0, idx, src), exact)
    y = tpu(x)
    y.scatter_add_(0, tpu(idx), tpu(src))
    check(y, x.clone().scatter_add_(0, idx, src), exact)
    for reduce in ["add", "multiply"]:
        check(
            tpu(x).scatter(0, tpu(idx), tpu(src), reduce=reduce),
            x.scatter(0, idx, src, reduce=reduce),
            exact,
        )
        check(
            tpu(x).scatter(0, tpu(idx), 2, reduce=reduce),
            x.scatter(0, idx, 2, reduce=reduce),
            exact,
        )
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            expected = x.scatter_reduce(0, idx, src, reduce, include_self=include_self)
            check(
                tpu(x).scatter_reduce(0, tpu(idx), tpu(src), reduce, include_self=include_self),
                expected,
                exact,
            )
            y = tpu(x)
            y.scatter_reduce_(0, tpu(idx), tpu(src), reduce, include_self=include_self)
            check(y, expected, exact)


def test_scatter_grads_and_errors(native):
    idx = torch.tensor([[0, 1, 2], [2, 0, 1]])
    src = make((2, 3), torch.float32)
    f = lambda x, s: x.scatter(1, on(idx, x), s)  # noqa: E731
    grads(f, make((2, 4), torch.float32), src)
    g = lambda x, s: x.scatter_add(1, on(idx, x), s)  # noqa: E731
    grads(g, make((2, 4), torch.float32), src)
    torch_tpu._C._set_fallback_mode("warn")
    x = make((2, 4), torch.float32)
    for bad in [[[4]], [[-1]]]:
        i = torch.tensor(bad)
        same_error(lambda: x.scatter(1, i, 1.0), lambda: tpu(x).scatter(1, tpu(i), 1.0))
    i = torch.tensor([[0]])
    same_error(
        lambda: x.scatter(1, i, src.long()), lambda: tpu(x).scatter(1, tpu(i), tpu(src.long()))
    )
    same_error(
        lambda: x.scatter(1, i, src, reduce="max"),
        lambda: tpu(x).scatter(1, tpu(i), tpu(src), reduce="max"),
    )


# ---------------------------------------------------------------- index_add


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_add(native, dtype):
    x = make((5, 3), dtype)
    idx = torch.tensor([4, 0, 4, -0])
    src = make((4, 3), dtype, seed=6)
    exact = dtype != torch.bfloat16
    check(tpu(x).index_add(0, tpu(idx), tpu(src)), x.index_add(0, idx, src), exact)
    check(
        tpu(x).index_add(0, tpu(idx), tpu(src), alpha=2), x.index_add(0, idx, src, alpha=2), exact
    )
    y = tpu(x)
    y.index_add_(0, tpu(idx), tpu(src))
    check(y, x.clone().index_add_(0, idx, src), exact)
    src1 = make((5, 2), dtype, seed=7)
    idx1 = torch.tensor([2, 2])
    check(tpu(x).index_add(1, tpu(idx1), tpu(src1)), x.index_add(1, idx1, src1), exact)
    bad = torch.tensor([5, 0, 0, 0])
    same_error(lambda: x.index_add(0, bad, src), lambda: tpu(x).index_add(0, tpu(bad), tpu(src)))


# ---------------------------------------------------------------- advanced indexing


def _index_cases():
    i = torch.tensor([2, -1, 0])
    j = torch.tensor([[1], [-4]])
    return [
        ("tensor", lambda t: (i,)),
        ("neg", lambda t: (slice(None), i)),
        ("two", lambda t: (i, slice(None), i)),  # non-adjacent: batch dims first
        ("adjacent", lambda t: (slice(None), i, j)),
        ("none", lambda t: (None, i, None, slice(1, 3))),
        ("ellipsis", lambda t: (Ellipsis, i)),
        ("mask", lambda t: (t.sum(-1) > 0 if t.dtype != torch.bool else t.any(-1),)),
        ("mask2", lambda t: (torch.tensor([True, False, True, True]),)),
        ("mask_mid", lambda t: (slice(None), torch.tensor([True, False, False, True, True]))),
        ("scalar", lambda t: (torch.tensor(1), slice(None), torch.tensor([0, 3]))),
        ("empty", lambda t: (torch.tensor([], dtype=torch.long),)),
        ("int32", lambda t: (i.int(),)),
    ]


def _to_dev(key):
    return tuple(tpu(k) if isinstance(k, torch.Tensor) else k for k in key)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _index_cases(), ids=lambda c: c[0])
def test_index(native, dtype, case):
    x = make((4, 5, 6), dtype)
    key = case[1](x)
    check(tpu(x)[_to_dev(key)], x[key])


def test_index_non_contiguous_and_errors():
    x = make((6, 5), torch.float32).t()
    i = torch.tensor([0, 5])
    check(tpu(x)[:, i], x[:, i])
    y = make((5, 2), torch.float32)
    for bad in [torch.tensor([5]), torch.tensor([-6])]:
        same_error(lambda: y[bad], lambda: tpu(y)[tpu(bad)])
    same_error(
        lambda: x[torch.ones(4, dtype=torch.bool)],
        lambda: tpu(x)[tpu(torch.ones(4, dtype=torch.bool))],
    )
    same_error(lambda: x[i, i, i], lambda: tpu(x)[tpu(i), tpu(i), tpu(i)])
    f = torch.tensor([0.0])
    same_error(lambda: x[f], lambda: tpu(x)[tpu(f)])


def test_index_grad(native):
    i = torch.tensor([2, 0, 2])
    grads(lambda x: x[on(i, x)], make((3, 4), torch.float32))
    m = torch.tensor([[True, False, True, True], [False, False, True, False], [True] * 4])
    grads(lambda x: x[on(m, x)], make((3, 4), torch.float32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(native, dtype, accumulate):
    if accumulate and dtype == torch.bool:
        pytest.skip("bool accumulate is an or on both")
    x = make((4, 5, 6), dtype)
    exact = dtype != torch.bfloat16
    # distinct targets unless accumulating; None stands for a full slice
    keys = [
        [torch.tensor([2, -1, 0])],
        [None, torch.tensor([1, 3])],
        [torch.tensor([0, 1]), None, torch.tensor([5, -6])],
        [x.sum(-1) > 0 if dtype != torch.bool else x.any(-1)],
    ]
    if accumulate:
        keys.append([torch.tensor([1, 1, 1])])
        keys.append([None, torch.tensor([[0, 0], [4, 0]])])
    for key in keys:
        shape = torch.ops.aten.index(x, key).shape
        for v in [make(shape, dtype, seed=8), make(shape[-1:], dtype, seed=9), make((), dtype)]:
            expected = torch.ops.aten.index_put_(x.clone(), key, v, accumulate)
            dev_key = [None if k is None else tpu(k) for k in key]
            got = torch.ops.aten.index_put_(tpu(x), dev_key, tpu(v), accumulate)
            check(got, expected, exact)
    # x[idx] = v and x[mask] = scalar
    y, z = tpu(x), x.clone()
    y[tpu(torch.tensor([1, 3]))] = tpu(make((), dtype))
    z[torch.tensor([1, 3])] = make((), dtype)
    check(y, z)
    m = make((4, 5, 6), torch.bool, seed=10)
    y[tpu(m)] = 1
    z[m] = 1
    check(y, z)


def test_index_put_view_and_errors(native):
    base = make((6, 6), torch.float32)
    dev = tpu(base)
    view = dev[1:5, ::2]
    view[tpu(torch.tensor([0, 3]))] = tpu(torch.tensor(7.0))
    ref = base.clone()
    ref[1:5, ::2][torch.tensor([0, 3])] = 7.0
    check(dev, ref)
    grads(
        lambda x, v: x.index_put((on(torch.tensor([0, 2]), x),), v, accumulate=True),
        make((3, 4), torch.float32),
        make((2, 4), torch.float32),
    )
    torch_tpu._C._set_fallback_mode("warn")
    x = make((3, 4), torch.float32)
    for bad, v in [
        (torch.tensor([3]), torch.tensor(1.0)),
        (torch.tensor([0]), torch.ones(2, 4)),
        (torch.tensor([0]), torch.tensor(1)),
    ]:
        same_error(
            lambda: x.clone().index_put_((bad,), v), lambda: tpu(x).index_put_((tpu(bad),), tpu(v))
        )


# ---------------------------------------------------------------- masked_select / nonzero


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_select_and_nonzero(native, dtype):
    x = make((3, 4), dtype)
    m = make((3, 4), torch.bool, seed=11)
    check(tpu(x).masked_select(tpu(m)), x.masked_select(m))
    check(tpu(x).masked_select(tpu(m[0])), x.masked_select(m[0]))  # broadcast mask
    check(tpu(x).nonzero(), x.nonzero())
    check(tpu(x.t()).nonzero(), x.t().nonzero())
    check(tpu(torch.zeros(0, 3, dtype=dtype)).nonzero(), torch.zeros(0, 3, dtype=dtype).nonzero())
    check(tpu(x[0, 0]).nonzero(), x[0, 0].nonzero())
    out = tpu(torch.empty(0, dtype=torch.long))
    torch.nonzero(tpu(x), out=out)
    check(out, x.nonzero())
    same_error(lambda: x.masked_select(m.int()), lambda: tpu(x).masked_select(tpu(m.int())))


def test_one_hot(native):
    i = torch.tensor([[0, 3], [2, 2]])
    check(F.one_hot(tpu(i), 5), F.one_hot(i, 5))


# ---------------------------------------------------------------- cat / stack


@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_stack(native, dtype):
    a, b = make((2, 3), dtype), make((4, 3), dtype, seed=1)
    check(torch.cat([tpu(a), tpu(b)]), torch.cat([a, b]))
    check(torch.cat([tpu(a.t()), tpu(b.t())], -1), torch.cat([a.t(), b.t()], -1))
    check(torch.stack([tpu(a), tpu(a)], 1), torch.stack([a, a], 1))
    check(torch.stack([tpu(a[0, 0]), tpu(a[1, 1])]), torch.stack([a[0, 0], a[1, 1]]))
    out = tpu(torch.empty(0, dtype=dtype))
    torch.cat([tpu(a), tpu(b)], out=out)
    check(out, torch.cat([a, b]))
    e = torch.empty(0, 3, dtype=dtype)
    check(torch.cat([tpu(e), tpu(a), tpu(e)]), torch.cat([e, a, e]))


def test_cat_promotion_legacy_and_errors(native):
    a, b = make((2, 3), torch.int64), make((2, 3), torch.bfloat16)
    legacy = torch.tensor([])
    for tensors in [[a, b], [a, legacy, b.float()], [legacy, legacy], [a.bool(), a]]:
        check(torch.cat([tpu(t) for t in tensors]), torch.cat(tensors))
    grads(
        lambda x, y: torch.cat([x, y], 1), make((2, 3), torch.float32), make((2, 1), torch.float32)
    )
    grads(
        lambda x, y: torch.stack([x, y], 0),
        make((2, 3), torch.float32),
        make((2, 3), torch.float32),
    )
    for bad, dim in [
        ([a, make((3, 2), torch.int64)], 0),
        ([a, a], 2),
        ([a[0, 0]], 0),
        ([a, a[0]], 0),
    ]:
        same_error(lambda: torch.cat(bad, dim), lambda: torch.cat([tpu(t) for t in bad], dim))


# ---------------------------------------------------------------- flip / roll / repeat / tri


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_roll_repeat(native, dtype):
    x = make((3, 4, 5), dtype)
    for dims in [(0,), (-1, 1), (0, 1, 2), ()]:
        check(tpu(x).flip(dims), x.flip(dims))
    check(tpu(x.transpose(0, 2)).flip(0), x.transpose(0, 2).flip(0))
    for shifts, dims in [(1, 0), ((2, -7), (1, -1)), (3, None), (-13, None), (0, 2)]:
        check(tpu(x).roll(shifts, dims), x.roll(shifts, dims))
    check(tpu(x[:, 1]).roll(2), x[:, 1].roll(2))
    check(tpu(x).repeat(2, 1, 1, 3), x.repeat(2, 1, 1, 3))
    same_error(lambda: x.flip(0, 0), lambda: tpu(x).flip(0, 0))
    same_error(lambda: x.roll((1, 2), (0,)), lambda: tpu(x).roll((1, 2), (0,)))


def test_flip_roll_grad(native):
    grads(lambda x: x.flip(1).roll(1, 0), make((3, 4), torch.float32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("diagonal", [0, 1, -2, 9])
def test_tril_triu(native, dtype, diagonal):
    x = make((2, 4, 5), dtype)
    for op in ["tril", "triu"]:
        expected = getattr(x, op)(diagonal)
        check(getattr(tpu(x), op)(diagonal), expected)
        check(
            getattr(tpu(x.transpose(1, 2)), op)(diagonal), getattr(x.transpose(1, 2), op)(diagonal)
        )
        y = tpu(x)
        getattr(y, op + "_")(diagonal)
        check(y, expected)
        out = tpu(torch.empty(0, dtype=dtype))
        getattr(torch, op)(tpu(x), diagonal, out=out)
        check(out, expected)


def test_tri_grad_and_errors(native):
    grads(lambda x: x.tril(-1) + x.triu(1), make((4, 4), torch.float32))
    torch_tpu._C._set_fallback_mode("warn")
    v = make((3,), torch.float32)
    same_error(lambda: v.tril(), lambda: tpu(v).tril())


# ---------------------------------------------------------------- padding


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_constant_pad(native, dtype):
    x = make((2, 3, 4), dtype)
    for pad in [(1, 2), (0, 1, 2, 0), (-1, 2), (1, 1, 1, 1, 1, 1), (-2, -2)]:
        check(F.pad(tpu(x), pad, value=3), F.pad(x, pad, value=3))
    check(F.pad(tpu(x.transpose(0, 2)), (1, 1)), F.pad(x.transpose(0, 2), (1, 1)))
    e = torch.empty(0, 2, dtype=dtype)
    check(F.pad(tpu(e), (1, 1, 1, 0)), F.pad(e, (1, 1, 1, 0)))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_reflect_replicate_pad(native, mode, dtype):
    if dtype == torch.int64 and mode == "reflect":
        pytest.skip("no CPU kernel")
    if dtype == torch.int64:
        pytest.skip("no CPU kernel for replicate on int64 either")
    for shape, pad in [
        ((2, 5), (2, 3)),
        ((2, 3, 5), (4, 1)),
        ((3, 4, 5), (1, 2, 3, 0)),
        ((2, 3, 4, 5), (2, 2, 1, 3)),
        ((2, 3, 5), (-1, 2)),
    ]:
        x = make(shape, dtype)
        check(F.pad(tpu(x), pad, mode=mode), F.pad(x, pad, mode=mode))
    x = make((2, 3, 4, 5), dtype).transpose(2, 3)
    check(F.pad(tpu(x), (1, 1, 1, 1), mode=mode), F.pad(x, (1, 1, 1, 1), mode=mode))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "constant"])
def test_pad_grad(native, mode):
    grads(lambda x: F.pad(x, (2, 3), mode=mode), make((2, 3, 5), torch.float32))
    grads(lambda x: F.pad(x, (2, 1, 3, 2), mode=mode), make((2, 4, 5), torch.float32))
    grads(lambda x: F.pad(x, (1, 1, 1, 1), mode=mode), make((1, 2, 4, 5), torch.float32))


def test_pad_errors():
    x = make((1, 3, 4), torch.float32)
    same_error(
        lambda: F.pad(x, (4, 0), mode="reflect"), lambda: F.pad(tpu(x), (4, 0), mode="reflect")
    )
    same_error(
        lambda: F.pad(x, (-3, -1), mode="replicate"),
        lambda: F.pad(tpu(x), (-3, -1), mode="replicate"),
    )
    v = make((5,), torch.float32)
    same_error(
        lambda: torch.ops.aten.reflection_pad1d(v, [1, 1]),
        lambda: torch.ops.aten.reflection_pad1d(tpu(v), [1, 1]),
    )
    same_error(lambda: torch.constant_pad_nd(x, (1,)), lambda: torch.constant_pad_nd(tpu(x), (1,)))
    same_error(
        lambda: torch.constant_pad_nd(x, (-3, -2)), lambda: torch.constant_pad_nd(tpu(x), (-3, -2))
    )


def test_coverage():
    names = set(torch_tpu.coverage())
    for op in [
        "index_select",
        "gather.out",
        "scatter.src_out",
        "scatter_reduce.two_out",
        "scatter_add.out",
        "index.Tensor",
        "_index_put_impl_",
        "masked_select",
        "nonzero",
        "embedding_dense_backward",
        "index_add.out",
        "cat.out",
        "flip",
        "roll",
        "tril.out",
        "triu_",
        "constant_pad_nd",
        "reflection_pad1d",
        "reflection_pad2d_backward",
        "replication_pad1d_backward.grad_input",
        "replication_pad2d",
    ]:
        assert "aten::" + op in names, op


def test_index_copy_into_a_view_writes_through_and_matches_the_cpu():
    # vLLM's KV-cache write: index_copy_ into a permuted view of a bigger buffer.
    base = torch.zeros(6, 2, 4)
    rows = torch.arange(24.0).view(3, 2, 4)
    index = torch.tensor([4, 0, 2])
    expected = base.clone()
    expected.permute(1, 0, 2).permute(1, 0, 2).index_copy_(0, index, rows)
    on_tpu = base.to("tpu")
    on_tpu.permute(1, 0, 2).permute(1, 0, 2).index_copy_(0, index.to("tpu"), rows.to("tpu"))
    assert torch.equal(on_tpu.cpu(), expected)
    column = torch.zeros(4, 3, device="tpu")
    column.t().index_copy_(0, torch.tensor([1], device="tpu"), torch.ones(1, 4, device="tpu"))
    assert torch.equal(column.cpu(), torch.zeros(4, 3).index_fill_(1, torch.tensor([1]), 1.0))


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.zeros(3, 4, device=d).index_copy_(
            0, torch.tensor([[0]], device=d), torch.ones(1, 4, device=d)
        ),
        lambda d: torch.zeros(3, 4, device=d).index_copy_(
            0, torch.tensor([0], device=d), torch.ones(1, 4, device=d, dtype=torch.long)
        ),
        lambda d: torch.zeros(3, 4, device=d).index_copy_(
            0, torch.tensor([0, 1, 2], device=d), torch.ones(2, 4, device=d)
        ),
        lambda d: torch.zeros(3, 4, device=d).index_copy_(
            0, torch.tensor([5], device=d), torch.ones(1, 4, device=d)
        ),
        lambda d: torch.zeros(3, 4, device=d).index_copy_(
            0, torch.tensor([0], dtype=torch.int32, device=d), torch.ones(1, 4, device=d)
        ),
        lambda d: torch.zeros(3, 4, 5, device=d).index_copy_(
            0, torch.tensor([0], device=d), torch.ones(1, 4, 6, device=d)
        ),
        lambda d: torch.zeros(3, device=d).index_copy_(
            0, torch.tensor([0, 1], device=d), torch.tensor(1.0, device=d)
        ),
    ],
)
def test_index_copy_errors_match_the_cpu(call):
    with pytest.raises((RuntimeError, IndexError)) as on_cpu:
        call("cpu")
    with pytest.raises(type(on_cpu.value)) as on_tpu:
        call("tpu")
    assert str(on_tpu.value) == str(on_cpu.value)
