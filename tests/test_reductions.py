"""Reductions and sorting on tpu compared with CPU PyTorch: sum/mean/prod, amax/amin, max/min
(values and first indices), argmax/argmin, var/std (+ _mean), vector norms, logsumexp, any/all,
cumsum/cumprod, sort/argsort/topk. Covers dtypes, dims, keepdim, dtype=, out=, in-place, NaN
and ties, empty and 0-d inputs, error types, autograd, native dispatch and PyTorch's OpInfo
reference inputs."""

import sys
import types
import unittest
import warnings

import pytest
import torch
import torch.utils._pytree as pytree

import torch_tpu

TPU = "tpu"
NAN = float("nan")
INF = float("inf")

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int32, torch.int64, torch.uint8]
REAL = FLOATS + INTS + [torch.bool]

# (rtol, atol) per dtype for a reduction of a few dozen elements
TOL = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 2e-2),
    torch.complex64: (1e-5, 1e-5),
}

DIMS = [None, 0, -1, (0, 2), (1,), (0, 1, 2)]


def make(shape, dtype, seed=0, low=None, high=None, exclude_zero=False):
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return torch.testing.make_tensor(
            shape, dtype=dtype, device="cpu", low=low, high=high, exclude_zero=exclude_zero
        )
    finally:
        torch.random.set_rng_state(state)


def to_tpu(tree):
    return pytree.tree_map(lambda x: x.to(TPU) if isinstance(x, torch.Tensor) else x, tree)


def assert_matches(actual, expected, rtol=None, atol=None):
    """actual (tpu) equals expected (cpu): device, dtype, shape and values (NaN == NaN)."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_matches(a, e, rtol, atol)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    assert actual.device.type == TPU, f"result on {actual.device}, expected tpu"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != cpu {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    if rtol is None:
        rtol, atol = TOL.get(expected.dtype, (0, 0))
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol, equal_nan=True)


def raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def assert_same_error(cpu_fn, tpu_fn):
    cpu_err = raised(cpu_fn)
    assert cpu_err is not None, "test premise: CPU raises"
    tpu_err = raised(tpu_fn)
    assert tpu_err is not None, f"tpu did not raise; CPU raised {cpu_err!r}"
    assert type(tpu_err) is type(cpu_err), f"tpu raised {tpu_err!r}, CPU raised {cpu_err!r}"
    return tpu_err


def same(fn, *inputs, **tol):
    """fn on CPU inputs and on their tpu copies give the same result (or the same error)."""
    if raised(lambda: fn(*inputs)) is not None:
        assert_same_error(lambda: fn(*inputs), lambda: fn(*to_tpu(inputs)))
        return
    assert_matches(fn(*to_tpu(inputs)), fn(*inputs), **tol)


# ---------------------------------------------------------------------------------------
# sum, mean, prod
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", DIMS, ids=repr)
@pytest.mark.parametrize("dtype", FLOATS + [torch.complex64], ids=str)
def test_mean(dtype, dim):
    a = make((3, 4, 5), dtype, seed=1)
    same(lambda x: x.mean() if dim is None else x.mean(dim), a)
    same(lambda x: torch.mean(x, dim, keepdim=True), a)


@pytest.mark.parametrize(
    "src,dtype",
    [
        (torch.int64, torch.float32),
        (torch.bool, torch.float64),
        (torch.float16, torch.float32),
        (torch.float32, torch.float64),
        (torch.float32, torch.complex64),
    ],
    ids=str,
)
def test_mean_dtype_arg(src, dtype):
    a = make((4, 6), src, seed=2)
    same(lambda x: x.mean(dtype=dtype), a)
    same(lambda x: x.mean(1, dtype=dtype), a)


def test_mean_half_precision_sums_in_float32():
    # 4096 float16 values near 100 sum to far beyond float16's range: the CPU sums in float32
    a = torch.full((4096,), 100.0, dtype=torch.float16) + make((4096,), torch.float16, seed=3)
    same(lambda x: x.mean(), a)
    same(lambda x: x.to(torch.bfloat16).reshape(64, 64).mean(0), a)


def test_mean_out_and_errors():
    a = make((3, 4), torch.float32, seed=4)
    i = make((3, 4), torch.int64, seed=4)
    out = torch.empty(0, device=TPU)
    assert torch.mean(a.to(TPU), 1, out=out) is out
    assert_matches(out, a.mean(1))
    out64 = torch.empty(0, dtype=torch.float64, device=TPU)  # a wider out computes in its dtype
    assert_matches(
        torch.mean(a.to(TPU), 0, out=out64),
        torch.mean(a, 0, out=torch.empty(0, dtype=torch.float64)),
    )
    same(
        lambda x: torch.mean(
            x, dtype=torch.float64, out=torch.empty(0, dtype=torch.float64, device=x.device)
        ),
        a,
    )
    assert_same_error(lambda: i.mean(), lambda: i.to(TPU).mean())  # integer input raises
    assert_same_error(lambda: a.mean(dtype=torch.int64), lambda: a.to(TPU).mean(dtype=torch.int64))
    assert_same_error(
        lambda: torch.mean(a, 0, dtype=torch.float64, out=torch.empty(0)),
        lambda: torch.mean(a.to(TPU), 0, dtype=torch.float64, out=torch.empty(0, device=TPU)),
    )
    assert_same_error(
        lambda: torch.mean(a, 0, out=torch.empty(0, dtype=torch.int64)),
        lambda: torch.mean(a.to(TPU), 0, out=torch.empty(0, dtype=torch.int64, device=TPU)),
    )
    assert_same_error(lambda: a.mean(2), lambda: a.to(TPU).mean(2))


def test_mean_empty_and_scalar():
    e = torch.empty(0, 3)
    same(lambda x: x.mean(), e)  # nan
    same(lambda x: x.mean(0), e)
    same(lambda x: x.mean(1), e)
    same(lambda x: x.mean(), torch.tensor(2.5))
    same(lambda x: x.mean(0), torch.tensor(2.5))


@pytest.mark.parametrize("dtype", REAL + [torch.int8, torch.complex64], ids=str)
def test_prod(dtype):
    a = make((3, 4, 2), dtype, seed=5, low=-3, high=3)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype in (torch.float16, torch.bfloat16) else {}
    same(lambda x: x.prod(), a, **tol)  # integers and bool give int64
    same(lambda x: x.prod(1), a, **tol)
    same(lambda x: x.prod(-1, keepdim=True), a, **tol)


def test_prod_dtype_out_and_edges():
    a = make((3, 4), torch.float32, seed=6, low=-2, high=2)
    same(lambda x: x.prod(dtype=torch.float64), a)
    same(lambda x: x.prod(0, dtype=torch.float64), a)
    same(lambda x: x.to(torch.int8).prod(1, dtype=torch.int16), a)
    out = torch.empty(0, dtype=torch.int32, device=TPU)
    i = make((3, 4), torch.int64, seed=7, low=-4, high=4)
    assert torch.prod(i.to(TPU), 0, out=out) is out  # out's dtype wins
    assert_matches(out, torch.prod(i, 0, out=torch.empty(0, dtype=torch.int32)))
    assert_same_error(
        lambda: torch.prod(a, 0, dtype=torch.float64, out=torch.empty(0)),
        lambda: torch.prod(a.to(TPU), 0, dtype=torch.float64, out=torch.empty(0, device=TPU)),
    )
    same(lambda x: x.prod(), torch.empty(0))  # 1
    same(lambda x: x.prod(0), torch.empty(0, 3))
    same(lambda x: x.prod(0), torch.tensor(3.0))
    # int64 products wrap like the CPU's
    same(lambda x: x.prod(), torch.tensor([2**40, 2**40, 3]))


def test_sum_integer_results_are_int64():
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.bool):
        a = make((5, 3), dtype, seed=8)
        assert a.to(TPU).sum().dtype == torch.int64
        same(lambda x: x.sum(0), a)


# ---------------------------------------------------------------------------------------
# amax/amin, max/min, argmax/argmin
# ---------------------------------------------------------------------------------------

NAN_ROWS = torch.tensor(
    [[1.0, NAN, 3.0, NAN], [2.0, 2.0, 1.0, 0.0], [-INF, -INF, -INF, -INF], [INF, 5.0, INF, -1.0]]
)


@pytest.mark.parametrize("dim", [(), 0, -1, (0, 2), (0, 1, 2)], ids=repr)
@pytest.mark.parametrize("dtype", REAL + [torch.int8], ids=str)
def test_amax_amin(dtype, dim):
    a = make((3, 4, 5), dtype, seed=9)
    same(lambda x: x.amax(dim), a)
    same(lambda x: x.amin(dim, keepdim=True), a)


@pytest.mark.parametrize("dtype", REAL, ids=str)
def test_max_min_full(dtype):
    a = make((4, 7), dtype, seed=10)
    same(lambda x: x.max(), a)
    same(lambda x: x.min(), a)
    same(lambda x: torch.max(x, out=torch.empty(0, dtype=x.dtype, device=x.device)), a)
    same(lambda x: torch.min(x, out=torch.empty(0, dtype=torch.float64, device=x.device)), a)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1], ids=repr)
@pytest.mark.parametrize("dtype", REAL + [torch.int16], ids=str)
def test_max_min_dim(dtype, dim, keepdim):
    # small value ranges make many ties: the first index wins, as on the CPU
    a = make((6, 9), dtype, seed=11, low=-3, high=3)
    same(lambda x: tuple(x.max(dim, keepdim)), a)
    same(lambda x: tuple(x.min(dim, keepdim)), a)
    if dtype != torch.bool:
        same(lambda x: x.argmax(dim, keepdim), a)
        same(lambda x: x.argmin(dim, keepdim), a)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nan_propagates_and_first_index_wins(dtype):
    a = NAN_ROWS.to(dtype)
    for fn in (
        lambda x: x.max(),
        lambda x: x.min(),
        lambda x: x.amax(1),
        lambda x: x.amin(0),
        lambda x: tuple(x.max(1)),
        lambda x: tuple(x.min(1)),
        lambda x: tuple(x.max(0)),
        lambda x: x.argmax(1),
        lambda x: x.argmin(1),
        lambda x: x.argmax(),
        lambda x: x.argmin(),
    ):
        same(fn, a)


def test_argmax_flattened_keepdim_and_scalar():
    a = make((3, 4, 2), torch.float32, seed=12)
    same(lambda x: x.argmax(), a)
    same(lambda x: x.argmin(keepdim=True), a)
    same(lambda x: x[:, 1:].argmax(), a)  # non-contiguous
    s = torch.tensor(3.0)
    for fn in (
        lambda x: x.argmax(),
        lambda x: x.argmax(0),
        lambda x: x.argmin(-1, True),
        lambda x: tuple(x.max(0)),
        lambda x: x.amax(0),
        lambda x: x.max(),
    ):
        same(fn, s)
    same(lambda x: x.argmax(), torch.tensor([1, 3, 3, 2]))
    same(lambda x: x.argmin(), torch.tensor([3.0, 1.0, 1.0, 3.0]))


def test_arg_extreme_out_variants():
    a = make((4, 5), torch.float32, seed=13, low=-2, high=2)
    ta = a.to(TPU)
    values, indices = torch.empty(0, device=TPU), torch.empty(0, dtype=torch.int64, device=TPU)
    result = torch.max(ta, 1, out=(values, indices))
    assert result[0] is values and result[1] is indices
    assert_matches((values, indices), tuple(torch.max(a, 1)))
    values.resize_(0), indices.resize_(0)  # reusing an out of another shape: empty it first
    torch.min(ta, 0, keepdim=True, out=(values, indices))
    assert_matches((values, indices), tuple(torch.min(a, 0, keepdim=True)))
    out = torch.empty(0, dtype=torch.int64, device=TPU)
    assert torch.argmax(ta, 1, out=out) is out
    assert_matches(out, a.argmax(1))
    torch.argmin(ta, out=out.resize_(0))
    assert_matches(out, a.argmin())
    amax_out = torch.empty(0, device=TPU)
    assert torch.amax(ta, (0, 1), out=amax_out) is amax_out
    assert_matches(amax_out, a.amax((0, 1)))
    torch.amin(ta, 1, keepdim=True, out=amax_out.resize_(0))
    assert_matches(amax_out, a.amin(1, keepdim=True))


def test_extreme_errors():
    a = make((2, 3), torch.float32, seed=14)
    e = torch.empty(0, 3)
    c = make((3,), torch.complex64, seed=14)
    b = torch.tensor([True, False])
    cases = [
        lambda x: x.max(),
        lambda x: x.amax(),
        lambda x: x.amax(0),
        lambda x: x.max(0),
        lambda x: x.argmax(),
        lambda x: x.argmax(0),
        lambda x: x.argmin(),
    ]
    for fn in cases:
        assert_same_error(lambda: fn(e), lambda: fn(e.to(TPU)))
    for fn in [
        lambda x: x.max(),
        lambda x: x.amax(),
        lambda x: x.amin(),
        lambda x: x.max(0),
        lambda x: x.argmax(),
    ]:
        assert_same_error(lambda: fn(c), lambda: fn(c.to(TPU)))
    assert_same_error(lambda: b.argmax(), lambda: b.to(TPU).argmax())
    assert_same_error(lambda: a.amax(2), lambda: a.to(TPU).amax(2))
    assert_same_error(lambda: a.max(5), lambda: a.to(TPU).max(5))
    assert_same_error(
        lambda: torch.amax(a, 1, out=torch.empty(0, dtype=torch.float64)),
        lambda: torch.amax(a.to(TPU), 1, out=torch.empty(0, dtype=torch.float64, device=TPU)),
    )
    assert_same_error(
        lambda: torch.max(a, 1, out=(torch.empty(0), torch.empty(0, dtype=torch.int32))),
        lambda: torch.max(
            a.to(TPU),
            1,
            out=(torch.empty(0, device=TPU), torch.empty(0, dtype=torch.int32, device=TPU)),
        ),
    )
    assert_same_error(
        lambda: torch.argmax(a, 1, out=torch.empty(0, dtype=torch.int32)),
        lambda: torch.argmax(a.to(TPU), 1, out=torch.empty(0, dtype=torch.int32, device=TPU)),
    )
    # a zero-size tensor reduced along a non-empty dim is fine
    same(lambda x: tuple(x.max(1)), e)
    same(lambda x: x.amax(1), e)
    same(lambda x: x.argmax(1), e)


# ---------------------------------------------------------------------------------------
# any/all
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", REAL + [torch.complex64], ids=str)
def test_any_all(dtype):
    a = make((3, 4, 2), dtype, seed=15, low=-1, high=2)
    for fn in (
        lambda x: x.any(),
        lambda x: x.all(),
        lambda x: x.any(1),
        lambda x: x.all(-1, keepdim=True),
        lambda x: torch.any(x, dim=(0, 2)),
        lambda x: torch.all(x, dim=()),  # an empty dim list reduces nothing
        lambda x: torch.any(x, dim=None, keepdim=True),
    ):
        same(fn, a)  # uint8 input gives uint8, everything else bool


def test_any_all_nan_empty_and_out():
    a = torch.tensor([[0.0, NAN], [0.0, 0.0], [1.0, -0.0]])
    same(lambda x: x.any(1), a)  # NaN is true
    same(lambda x: x.all(1), a)
    e = torch.empty(0, 3)
    same(lambda x: x.any(), e)
    same(lambda x: x.all(), e)
    same(lambda x: x.all(0), e)
    # (not NaN here: with a uint8 out the CPU's result for NaN depends on its code path)
    a = torch.tensor([[0.0, 2.5], [0.0, 0.0], [1.0, -0.0]])
    ta = a.to(TPU)
    for dtype in (torch.bool, torch.uint8):
        out = torch.empty(0, dtype=dtype, device=TPU)
        assert torch.any(ta, 1, out=out) is out
        assert_matches(out, torch.any(a, 1, out=torch.empty(0, dtype=dtype)))
        torch.all(ta, out=out.resize_(0))
        assert_matches(out, torch.all(a, out=torch.empty(0, dtype=dtype)))
        torch.all(ta, dim=(0, 1), keepdim=True, out=out.resize_(0))
        assert_matches(out, torch.all(a, dim=(0, 1), keepdim=True, out=torch.empty(0, dtype=dtype)))
    assert_same_error(
        lambda: torch.any(a, 0, out=torch.empty(0)),
        lambda: torch.any(ta, 0, out=torch.empty(0, device=TPU)),
    )


# ---------------------------------------------------------------------------------------
# var/std
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("correction", [None, 0, 2, 0.5], ids=repr)
@pytest.mark.parametrize("dim", DIMS, ids=repr)
@pytest.mark.parametrize("dtype", FLOATS + [torch.complex64], ids=str)
def test_var_std(dtype, dim, correction):
    a = make((3, 4, 5), dtype, seed=16)
    kw = {"dim": dim, "correction": correction}
    same(lambda x: torch.var(x, **kw), a)
    same(lambda x: torch.std(x, **kw, keepdim=True), a)
    same(lambda x: torch.var_mean(x, **kw), a)
    same(lambda x: torch.std_mean(x, **kw, keepdim=True), a)


def test_var_legacy_overloads_and_out():
    a = make((4, 6), torch.float32, seed=17)
    same(lambda x: x.var(), a)
    same(lambda x: x.std(1, unbiased=False), a)
    same(lambda x: torch.var(x, 0, True, keepdim=True), a)
    same(lambda x: torch.var_mean(x, 1, unbiased=True), a)
    for dtype in (torch.float32, torch.float64):
        out = torch.empty(0, dtype=dtype, device=TPU)
        assert torch.var(a.to(TPU), 0, out=out) is out
        assert_matches(out, torch.var(a, 0, out=torch.empty(0, dtype=dtype)))
        torch.std(a.to(TPU), 1, correction=0, keepdim=True, out=out.resize_(0))
        assert_matches(
            out, torch.std(a, 1, correction=0, keepdim=True, out=torch.empty(0, dtype=dtype))
        )


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
def test_var_edge_cases():
    one = torch.tensor([1.5])
    with pytest.warns(UserWarning, match="degrees of freedom"):
        result = one.to(TPU).var()
    assert_matches(result, one.var())  # 0/0: nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        two = torch.tensor([1.0, 2.0])
        same(lambda x: x.var(correction=2), two)  # x/0: inf
        same(lambda x: x.std(correction=5), two)
        same(lambda x: x.var(), torch.empty(0))
        same(lambda x: torch.var_mean(x, 0), torch.empty(0, 3))
    same(lambda x: x.var(0), torch.empty(2, 0))
    i = torch.arange(6)
    assert_same_error(lambda: i.var(), lambda: i.to(TPU).var())
    assert_same_error(lambda: i.std(0), lambda: i.to(TPU).std(0))
    a = make((3,), torch.float32, seed=18)
    assert_same_error(
        lambda: torch.std(a, 0, out=torch.empty(0, dtype=torch.int64)),
        lambda: torch.std(a.to(TPU), 0, out=torch.empty(0, dtype=torch.int64, device=TPU)),
    )


# ---------------------------------------------------------------------------------------
# linalg.vector_norm, norm
# ---------------------------------------------------------------------------------------

ORDS = [2, 1, 0, 3, 0.5, -1, -2.5, INF, -INF]


@pytest.mark.parametrize("ord", ORDS, ids=repr)
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64], ids=str
)
def test_vector_norm(dtype, ord):
    a = make((3, 4, 5), dtype, seed=19)
    a[0, 0, 0] = 0  # zeros matter for ord 0 and negative orders
    same(lambda x: torch.linalg.vector_norm(x, ord), a)
    same(lambda x: torch.linalg.vector_norm(x, ord, dim=1), a)
    same(lambda x: torch.linalg.vector_norm(x, ord, dim=(0, 2), keepdim=True), a)


def test_vector_norm_dtype_out_and_norm():
    a = make((4, 5), torch.float16, seed=20)
    same(lambda x: torch.linalg.vector_norm(x, dtype=torch.float32), a)
    same(lambda x: torch.linalg.vector_norm(x, 3, 1, dtype=torch.float64), a)
    f = make((4, 5), torch.float32, seed=21)
    out = torch.empty(0, device=TPU)
    assert torch.linalg.vector_norm(f.to(TPU), 2, 1, out=out) is out
    assert_matches(out, torch.linalg.vector_norm(f, 2, 1))
    same(lambda x: x.norm(), f)
    same(lambda x: x.norm(dim=1), f)
    same(lambda x: torch.norm(x, 1, dim=0, keepdim=True), f)
    same(lambda x: torch.norm(x, p=3, dim=[]), f)
    same(lambda x: torch.norm(x, INF), f)
    same(lambda x: torch.norm(x, 2, 1, dtype=torch.float64), f)
    same(lambda x: torch.norm(x, p="fro", dim=1), f)
    out = torch.empty(0, device=TPU)
    assert torch.norm(f.to(TPU), 2, 1, out=out) is out
    assert_matches(out, torch.norm(f, 2, 1))


def test_vector_norm_special_values_and_errors():
    same(lambda x: torch.linalg.vector_norm(x, INF), torch.tensor([NAN, 1.0]))
    same(lambda x: torch.linalg.vector_norm(x, -INF), torch.tensor([NAN, 1.0]))
    same(lambda x: torch.linalg.vector_norm(x, 2), torch.tensor([INF, 1.0]))
    same(lambda x: torch.linalg.vector_norm(x), torch.empty(0))
    same(lambda x: torch.linalg.vector_norm(x, INF, dim=1), torch.empty(0, 3))
    f = make((3,), torch.float32, seed=22)
    for fn, x in [
        (lambda x: torch.linalg.vector_norm(x, INF), torch.empty(0)),
        (lambda x: torch.linalg.vector_norm(x, -1), torch.empty(0, 3)),
        (lambda x: torch.linalg.vector_norm(x, INF, dim=0), torch.empty(0, 3)),
        (lambda x: torch.linalg.vector_norm(x), torch.arange(3)),
        (lambda x: torch.linalg.vector_norm(x, dtype=torch.float16), f),
        (lambda x: torch.linalg.vector_norm(x, dtype=torch.complex64), f),
        (lambda x: torch.linalg.vector_norm(x, dtype=torch.int64), f),
        (lambda x: torch.linalg.vector_norm(x, dtype=torch.float32), f.to(torch.complex64)),
        (
            lambda x: torch.linalg.vector_norm(
                x, out=torch.empty(0, dtype=torch.float64, device=x.device)
            ),
            f,
        ),
    ]:
        assert_same_error(lambda: fn(x), lambda: fn(x.to(TPU)))


def test_vector_norm_order_is_a_runtime_operand():
    a = make((16,), torch.float32, seed=23).to(TPU)
    torch.linalg.vector_norm(a, 3.0).cpu()
    torch_tpu.metrics.reset()
    for ord in (4.0, 1.5, -3.0):
        assert_matches(torch.linalg.vector_norm(a, ord), torch.linalg.vector_norm(a.cpu(), ord))
    assert torch_tpu.metrics.snapshot()["compiles"] == 0


# ---------------------------------------------------------------------------------------
# logsumexp
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, -1, (0, 2), (0, 1, 2)], ids=repr)
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool, torch.complex64], ids=str)
def test_logsumexp(dtype, dim):
    a = make((3, 4, 5), dtype, seed=24)
    same(lambda x: torch.logsumexp(x, dim), a)  # integer inputs give the default float dtype
    same(lambda x: torch.logsumexp(x, dim, keepdim=True), a)


def test_logsumexp_special_values_out_and_errors():
    a = torch.tensor([[1.0, INF], [-INF, -INF], [INF, INF], [NAN, 1.0], [1000.0, 1000.0]])
    same(lambda x: torch.logsumexp(x, 1), a)
    same(lambda x: torch.logsumexp(x, 0), torch.empty(0, 3))  # -inf
    same(lambda x: torch.logsumexp(x, ()), torch.tensor(2.0))
    same(lambda x: torch.logsumexp(x, (), keepdim=True), a[:2, :1])
    f = make((3, 4), torch.float32, seed=25)
    out = torch.empty(0, dtype=torch.float64, device=TPU)
    assert torch.logsumexp(f.to(TPU), 1, out=out) is out
    assert_matches(out, torch.logsumexp(f, 1, out=torch.empty(0, dtype=torch.float64)))
    assert_same_error(lambda: torch.logsumexp(f, ()), lambda: torch.logsumexp(f.to(TPU), ()))
    assert_same_error(
        lambda: torch.logsumexp(f, 1, out=torch.empty(0, dtype=torch.int64)),
        lambda: torch.logsumexp(f.to(TPU), 1, out=torch.empty(0, dtype=torch.int64, device=TPU)),
    )


# ---------------------------------------------------------------------------------------
# cumsum, cumprod
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dim", [0, 1, -1], ids=repr)
@pytest.mark.parametrize("dtype", REAL + [torch.int8, torch.complex64], ids=str)
def test_cumulative(op, dtype, dim):
    a = make((5, 7, 3), dtype, seed=26, low=-2, high=2)
    same(lambda x: getattr(x, op)(dim), a)  # integers and bool give int64


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_cumulative_dtype_out_in_place(op):
    fn = getattr(torch, op)
    a = make((4, 6), torch.float32, seed=27, low=-2, high=2)
    same(lambda x: fn(x, 1, dtype=torch.float64), a)
    same(lambda x: fn(x.to(torch.int32), 0, dtype=torch.int16), a)
    same(lambda x: fn(x, 0, dtype=torch.int64), a)
    out = torch.empty(0, device=TPU)
    assert fn(a.to(TPU), 1, out=out) is out
    assert_matches(out, fn(a, 1))
    i = make((4, 6), torch.int64, seed=28, low=-3, high=3)
    out = torch.empty(0, device=TPU)  # out's dtype wins over the integer default
    fn(i.to(TPU), 0, out=out)
    assert_matches(out, fn(i, 0, out=torch.empty(0)))
    strided = torch.empty(6, 4, device=TPU).t()  # a non-contiguous out of the right shape
    fn(a.to(TPU), 1, out=strided)
    assert_matches(strided, fn(a, 1))
    # in-place: on the tensor, on a view (writes through), on int32 (wraps like the CPU)
    t, c = a.to(TPU), a.clone()
    assert getattr(t, op + "_")(1) is t
    getattr(c, op + "_")(1)
    assert_matches(t, c)
    t, c = a.to(TPU), a.clone()
    getattr(t[1:, ::2], op + "_")(0)
    getattr(c[1:, ::2], op + "_")(0)
    assert_matches(t, c)
    big = torch.full((40,), 2**20, dtype=torch.int32)
    t, c = big.to(TPU), big.clone()
    getattr(t, op + "_")(0)
    getattr(c, op + "_")(0)
    assert_matches(t, c)
    for bad in (
        lambda x: fn(x, 0, dtype=torch.float64, out=torch.empty(0, device=x.device)),
        lambda x: getattr(x, op + "_")(0, dtype=torch.float64),
        lambda x: fn(x, 2),
    ):
        assert_same_error(lambda: bad(a), lambda: bad(a.to(TPU)))


def test_cumulative_edges_and_precision():
    for op in ("cumsum", "cumprod"):
        same(lambda x: getattr(x, op)(0), torch.tensor(3.0))
        same(lambda x: getattr(x, op)(-1), torch.tensor(3.0))
        same(lambda x: getattr(x, op)(1), torch.empty(2, 0))
        same(lambda x: getattr(x, op)(0), torch.tensor([INF, -INF, 1.0, NAN, 2.0]))
        same(lambda x: getattr(x, op)(0), torch.tensor([True, True, False, True]))
    # long scans: float32 stays accurate, each float16 output is rounded once from float32
    a = make((3, 5000), torch.float32, seed=29)
    same(lambda x: x.cumsum(1), a, rtol=1e-4, atol=1e-3)
    h = torch.tensor([65504.0, 65504.0, -65504.0, 1.0], dtype=torch.float16)
    same(lambda x: x.cumsum(0), h)
    p = torch.tensor([300.0, 300.0, 0.001], dtype=torch.float16)
    same(lambda x: x.cumprod(0), p, rtol=1e-3, atol=0)
    w = 1 + make((2, 300), torch.float32, seed=30, low=-0.01, high=0.01)
    same(lambda x: x.cumprod(1), w, rtol=1e-5, atol=0)


# ---------------------------------------------------------------------------------------
# sort, argsort, topk
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1], ids=repr)
@pytest.mark.parametrize("dtype", REAL + [torch.int8], ids=str)
def test_sort_is_stable(dtype, dim, descending):
    # few distinct values: many ties, kept in their original order as by the CPU's stable sort
    a = make((7, 33), dtype, seed=31, low=-3, high=3)
    ta = a.to(TPU)
    expected = torch.sort(a, dim=dim, descending=descending, stable=True)
    assert_matches(
        tuple(torch.sort(ta, dim=dim, descending=descending, stable=True)), tuple(expected)
    )
    # stable=False may order ties any way; this backend keeps them stable too
    assert_matches(tuple(torch.sort(ta, dim, descending)), tuple(expected))
    assert_matches(torch.argsort(ta, dim=dim, descending=descending, stable=True), expected.indices)
    assert_matches(torch.argsort(ta, dim=dim, descending=descending), expected.indices)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_sort_nan_inf_and_signed_zero(dtype):
    a = torch.tensor([[1.0, NAN, -INF, 3.0, NAN, INF, -0.0, 0.0, -1.0]]).to(dtype)
    for descending in (False, True):  # NaN is largest: last ascending, first descending
        same(lambda x: tuple(torch.sort(x, 1, descending, stable=True)), a)
        same(lambda x: tuple(torch.topk(x, 4, largest=descending)), a[:, :6])


def test_sort_out_scalar_empty_large_and_errors():
    a = make((5, 8), torch.float32, seed=32)
    ta = a.to(TPU)
    values, indices = torch.empty(0, device=TPU), torch.empty(0, dtype=torch.int64, device=TPU)
    result = torch.sort(ta, 0, out=(values, indices))
    assert result[0] is values and result[1] is indices
    assert_matches((values, indices), tuple(torch.sort(a, 0)))
    torch.sort(ta, stable=True, descending=True, out=(values, indices))
    assert_matches((values, indices), tuple(torch.sort(a, stable=True, descending=True)))
    same(lambda x: tuple(x.sort()), torch.tensor(3.0))
    same(lambda x: tuple(x.sort(0)), torch.empty(0, 3))
    same(lambda x: x.argsort(), torch.empty(0))
    same(lambda x: x.t().sort(1).indices, a)  # non-contiguous input
    big = make((20000,), torch.float32, seed=33)
    same(lambda x: tuple(x.sort(stable=True)), big)
    same(lambda x: x.msort(), a)
    c = make((3,), torch.complex64, seed=34)
    assert_same_error(lambda: c.sort(), lambda: c.to(TPU).sort())
    assert_same_error(lambda: a.sort(2), lambda: ta.sort(2))
    assert_same_error(
        lambda: torch.sort(
            a, out=(torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.int64))
        ),
        lambda: torch.sort(
            ta,
            out=(
                torch.empty(0, dtype=torch.float64, device=TPU),
                torch.empty(0, dtype=torch.int64, device=TPU),
            ),
        ),
    )


def check_topk(x, k, dim=-1, largest=True, sorted=True):
    """Values as on the CPU; indices as the stable order's, lowest index first among ties (the
    CPU's partial sort may pick other tied positions, with the same values)."""
    values, indices = torch.topk(x.to(TPU), k, dim, largest, sorted)
    if x.dim() == 0:
        assert_matches((values, indices), tuple(torch.topk(x, k, dim, largest, sorted)))
        return
    stable = torch.sort(x, dim=dim, descending=largest, stable=True)
    assert_matches(
        (values, indices), (stable.values.narrow(dim, 0, k), stable.indices.narrow(dim, 0, k))
    )
    if sorted:
        assert_matches(values, torch.topk(x, k, dim, largest).values)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64, torch.uint8], ids=str)
def test_topk(dtype, largest):
    a = make((6, 17), dtype, seed=35, low=-4, high=4)
    for k, dim in ((1, 1), (5, -1), (17, 1), (0, 1), (3, 0), (6, 0)):
        check_topk(a, k, dim, largest)
    check_topk(a, 4, 1, largest, sorted=False)  # returned sorted anyway


def test_topk_out_scalar_and_errors():
    a = make((4, 9), torch.float32, seed=36)
    ta = a.to(TPU)
    values, indices = torch.empty(0, device=TPU), torch.empty(0, dtype=torch.int64, device=TPU)
    result = torch.topk(ta, 3, out=(values, indices))
    assert result[0] is values and result[1] is indices
    assert_matches((values, indices), tuple(torch.topk(a, 3)))
    check_topk(torch.tensor(3.0), 1)
    check_topk(torch.tensor(3.0), 0)
    for k in (-1, 10):
        assert_same_error(lambda: torch.topk(a, k), lambda: torch.topk(ta, k))
    assert_same_error(
        lambda: torch.topk(torch.tensor(3.0), 2),
        lambda: torch.topk(torch.tensor(3.0, device=TPU), 2),
    )
    c = make((3,), torch.complex64, seed=37)
    assert_same_error(lambda: c.topk(1), lambda: c.to(TPU).topk(1))
    assert_same_error(
        lambda: torch.topk(
            a, 2, out=(torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.int64))
        ),
        lambda: torch.topk(
            ta,
            2,
            out=(
                torch.empty(0, dtype=torch.float64, device=TPU),
                torch.empty(0, dtype=torch.int64, device=TPU),
            ),
        ),
    )


# ---------------------------------------------------------------------------------------
# isin
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8], ids=str
)
def test_isin(dtype, invert):
    elements = make((3, 5), dtype, seed=41, low=0, high=6)
    test = make((4,), dtype, seed=42, low=0, high=6)
    same(lambda e, t: torch.isin(e, t, invert=invert), elements, test)
    same(lambda e: torch.isin(e, 3, invert=invert), elements)
    same(lambda t: torch.isin(3, t, invert=invert), test)


def test_isin_promotion_empty_nan_out_and_errors():
    # promoted to the common dtype: 257 is not a uint8 1, 2.5 is not an int 2
    same(torch.isin, torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([257, 2]))
    same(torch.isin, torch.tensor([1, 2]), torch.tensor([1.0, 2.5]))
    same(lambda t: torch.isin(2.5, t), torch.tensor([1, 2]))
    same(torch.isin, torch.tensor([1.0, float("nan")]), torch.tensor([float("nan"), 1.0]))
    same(lambda e, t: torch.isin(e, t, invert=True), torch.tensor([[1.0, 2.0]]), torch.tensor([]))
    same(torch.isin, torch.tensor([]), torch.tensor([1.0]))
    same(torch.isin, torch.tensor(4), torch.tensor([[4, 5]]))
    out = torch.empty(0, dtype=torch.bool, device=TPU)
    result = torch.isin(torch.tensor([1, 5], device=TPU), torch.tensor([5], device=TPU), out=out)
    assert result is out and out.cpu().tolist() == [False, True]
    same(torch.isin, torch.tensor([True]), torch.tensor([True]))
    same(torch.isin, torch.tensor([1j]), torch.tensor([1j]))
    same(lambda e: torch.isin(e, True), torch.tensor([1]))


# ---------------------------------------------------------------------------------------
# autograd
# ---------------------------------------------------------------------------------------

GRAD_CASES = {
    "mean": lambda t: t.mean(1, keepdim=True),
    "prod": lambda t: t.prod(),
    "prod_dim": lambda t: t.prod(1),
    "prod_with_zero": lambda t: (t * (t > 0)).prod(1),
    "amax": lambda t: t.amax(1),
    "amin": lambda t: t.amin((0, 1)),
    "max": lambda t: t.max(),
    "max_dim": lambda t: t.max(1).values,
    "min_dim": lambda t: t.min(0).values,
    "var": lambda t: t.var(1),
    "std": lambda t: t.std(),
    "var_mean": lambda t: sum(torch.var_mean(t, 1)),
    "std_mean": lambda t: sum(torch.std_mean(t, 0, correction=0)),
    "vector_norm": lambda t: torch.linalg.vector_norm(t, dim=1),
    "vector_norm_3": lambda t: torch.linalg.vector_norm(t, 3, dim=0),
    "vector_norm_inf": lambda t: torch.linalg.vector_norm(t, INF, dim=1),
    "logsumexp": lambda t: t.logsumexp(1),
    "cumsum": lambda t: t.cumsum(1),
    "cumprod": lambda t: t.cumprod(1),
    "sort": lambda t: t.sort(1).values,
    "topk": lambda t: t.topk(2, 1).values,
}


@pytest.mark.filterwarnings("ignore::UserWarning")  # backward ops of other families may fall back
@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_backward_matches_cpu(name):
    x = make((4, 5), torch.float64, seed=38)
    x[1, 2] = x[1, 3]  # a tie
    fn = GRAD_CASES[name]
    cpu = x.clone().requires_grad_()
    fn(cpu).sum().backward()
    tpu = x.to(TPU).requires_grad_()
    fn(tpu).sum().backward()
    assert_matches(tpu.grad, cpu.grad)


# ---------------------------------------------------------------------------------------
# native, not CPU fallback
# ---------------------------------------------------------------------------------------

NATIVE = {
    "aten::mean": lambda x: x.mean(),
    "aten::mean.dim": lambda x: x.mean(1),
    "aten::mean.out": lambda x: torch.mean(x, 1, out=torch.empty(0, device=TPU)),
    "aten::prod": lambda x: x.prod(),
    "aten::prod.dim_int": lambda x: x.prod(1),
    "aten::amax": lambda x: x.amax(1),
    "aten::amin": lambda x: x.amin(),
    "aten::max": lambda x: x.max(),
    "aten::min": lambda x: x.min(),
    "aten::max.dim": lambda x: x.max(1),
    "aten::min.dim": lambda x: x.min(0),
    "aten::max.dim_max": lambda x: torch.max(
        x, 1, out=(torch.empty(0, device=TPU), torch.empty(0, dtype=torch.long, device=TPU))
    ),
    "aten::argmax": lambda x: x.argmax(),
    "aten::argmin": lambda x: x.argmin(1),
    "aten::any": lambda x: x.any(),
    "aten::all.dim": lambda x: x.all(1),
    "aten::any.dims": lambda x: x.any((0, 1)),
    "aten::var.correction": lambda x: x.var(1),
    "aten::std.correction": lambda x: x.std(),
    "aten::var_mean.correction": lambda x: torch.var_mean(x, 1),
    "aten::std_mean.correction": lambda x: torch.std_mean(x),
    "aten::linalg_vector_norm": lambda x: torch.linalg.vector_norm(x, 3),
    "aten::norm.ScalarOpt_dim": lambda x: torch.norm(x, 2, 1),
    "aten::logsumexp": lambda x: x.logsumexp(1),
    "aten::cumsum": lambda x: x.cumsum(1),
    "aten::cumsum_": lambda x: x.cumsum_(0),
    "aten::cumprod": lambda x: x.cumprod(0),
    "aten::sort.stable": lambda x: x.sort(stable=True),
    "aten::sort.values_stable": lambda x: torch.sort(
        x, out=(torch.empty(0, device=TPU), torch.empty(0, dtype=torch.long, device=TPU))
    ),
    "aten::topk": lambda x: x.topk(2),
    "aten::isin.Tensor_Tensor": lambda x: torch.isin(x, x[0]),
    "aten::isin.Tensor_Scalar": lambda x: torch.isin(x, 0.5),
    "aten::isin.Scalar_Tensor": lambda x: torch.isin(0.5, x),
}


@pytest.mark.parametrize("name", list(NATIVE))
def test_native_does_not_fall_back(name):
    x = make((4, 6), torch.float32, seed=39).to(TPU)
    torch_tpu.metrics.reset()
    NATIVE[name](x)
    torch.tpu.synchronize()
    snap = torch_tpu.metrics.snapshot()
    assert snap["cpu_fallbacks"] == {}, snap["cpu_fallbacks"]
    assert snap["native_ops"], snap
    assert name in torch_tpu.coverage()


def test_argsort_is_composite_over_sort():
    x = make((4, 6), torch.float32, seed=40).to(TPU)
    torch_tpu.metrics.reset()
    torch.argsort(x, 1)
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == {}


# ---------------------------------------------------------------------------------------
# PyTorch's OpInfo reference inputs (which include extreme values and non-contiguous inputs)
# ---------------------------------------------------------------------------------------


def _load_op_db():
    try:
        import expecttest  # noqa: F401
    except ImportError:  # common_utils only needs expecttest.TestCase as a base class
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stub
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


OPINFO_NAMES = [
    "mean", "prod", "amax", "amin", "max.reduction_no_dim", "max.reduction_with_dim",
    "min.reduction_no_dim", "min.reduction_with_dim", "argmax", "argmin", "var", "std",
    "var_mean", "std_mean", "linalg.vector_norm", "norm", "logsumexp", "any", "all", "cumsum",
    "cumprod", "sort", "argsort", "topk", "msort",
]  # fmt: skip
OPINFO_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64]
OPINFO_TOL = {
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (3e-2, 3e-2),
    torch.complex64: (1e-5, 1e-4),
}


def _opinfo_cases():
    cases = []
    for info in _load_op_db():
        full = info.name + ("." + info.variant_test_name if info.variant_test_name else "")
        if full not in OPINFO_NAMES:
            continue
        for dtype in OPINFO_DTYPES:
            if dtype in info.supported_dtypes("cpu"):
                cases.append(pytest.param(info, dtype, id=f"{full}-{dtype}"))
    return cases


def _stable_reference(name, sample):
    """What sort/argsort/topk give here: the CPU's stable order (with stable=False the CPU may
    order ties any way)."""
    x, args, kwargs = sample.input, sample.args, sample.kwargs

    def arg(i, key, default):
        return kwargs.get(key, args[i] if len(args) > i else default)

    if name == "topk":
        k, dim, largest = args[0], arg(1, "dim", -1), arg(2, "largest", True)
        if x.dim() == 0:
            return tuple(torch.topk(x, k))
        ref = torch.sort(x, dim=dim, descending=largest, stable=True)
        return ref.values.narrow(dim, 0, k), ref.indices.narrow(dim, 0, k)
    ref = torch.sort(x, dim=arg(0, "dim", -1), descending=arg(1, "descending", False), stable=True)
    return tuple(ref) if name == "sort" else ref.indices


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("info,dtype", _opinfo_cases())
def test_opinfo_reference_inputs(info, dtype):
    failures = []
    samples = list(info.reference_inputs("cpu", dtype, requires_grad=False))
    assert samples, "OpInfo produced no samples"
    for i, sample in enumerate(samples):
        args = (sample.input, *sample.args)
        try:
            expected_err = raised(lambda: info.op(*args, **sample.kwargs))
            t_args, t_kwargs = to_tpu((args, sample.kwargs))
            if expected_err is not None:
                err = raised(lambda: info.op(*t_args, **t_kwargs))
                assert type(err) is type(expected_err), f"tpu raised {err!r}, CPU {expected_err!r}"
                continue
            expected = info.op(*args, **sample.kwargs)
            actual = info.op(*t_args, **t_kwargs)
            if info.name in ("sort", "argsort", "topk"):
                assert_matches(
                    tuple(actual) if isinstance(actual, tuple) else actual,
                    _stable_reference(info.name, sample),
                )
                if info.name == "topk" and sample.kwargs.get("sorted", True):
                    assert_matches(actual[0], expected[0])
            else:  # tolerance by result dtype (logsumexp of integers is float)
                result_dtype = pytree.tree_leaves(expected)[0].dtype
                assert_matches(
                    tuple(actual) if isinstance(actual, tuple) else actual,
                    tuple(expected) if isinstance(expected, tuple) else expected,
                    *OPINFO_TOL.get(result_dtype, (None, None)),
                )
        except Exception as e:  # noqa: BLE001  (collect all samples, then report)
            failures.append(f"sample {i} {sample.summary()}: {type(e).__name__}: {str(e)[:300]}")
    assert not failures, f"{len(failures)}/{len(samples)} samples differ from CPU:\n" + "\n".join(
        failures[:8]
    )
