"""Lazy conj() and neg views as operands and outputs, against the CPU.

PyTorch lets its matrix products (mm, addmm, bmm, baddbmm, with their out= and in-place
forms) past its conjugate and negative fallbacks: a kernel sees `x.mH` with the conj bit
set over x's storage. Reading the storage alone gave `A @ A.mH` that was not Hermitian, so
every Hermitian positive-definite test matrix failed Cholesky. And an out= tensor that is
a conj() view lost the result of an op run by the CPU fallback."""

import pytest
import torch

import torch_tpu  # noqa: F401

torch.manual_seed(0)
X = torch.randn(2, 3, 3, dtype=torch.complex64)
Y = torch.randn(2, 3, 3, dtype=torch.complex64)

PRODUCTS = {
    "bmm of mH": lambda x, y: x @ y.mH,
    "mm of conj": lambda x, y: x[0] @ y[0].conj(),
    "mm of a neg view": lambda x, y: x[0].real @ y[0].conj().imag,
    "addmm with conj self": lambda x, y: torch.addmm(x[0].conj(), x[0], y[0].mH),
    "baddbmm of mH": lambda x, y: torch.baddbmm(x.conj(), x.mH, y, beta=0.5, alpha=2),
    "addmm_ into a conj view": lambda x, y: x[0].clone().conj().addmm_(x[0], y[0]),
    "mm out= a conj view": lambda x, y: torch.mm(x[0], y[0], out=torch.zeros_like(x[0]).conj()),
    "bmm out= a neg view": lambda x, y: torch.bmm(
        x.real, y.real, out=torch.zeros_like(x).conj().imag
    ),
    "matmul of 1-d conj": lambda x, y: x[0, 0].conj() @ y[0],
    "einsum of conj": lambda x, y: torch.einsum("bij,bkj->bik", x, y.conj()),
}


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_products_of_conj_and_neg_views_equal_the_cpus(name):
    f = PRODUCTS[name]
    expected = f(X, Y).resolve_conj().resolve_neg()
    got = f(X.to("tpu"), Y.to("tpu")).cpu().resolve_conj().resolve_neg()
    torch.testing.assert_close(got, expected)


def test_hermitian_positive_definite_matrices_factorize():
    # PyTorch's own test helper: A @ A.mH + I.
    from torch.testing._internal.common_utils import random_hermitian_pd_matrix

    a = random_hermitian_pd_matrix(4, 3, dtype=torch.complex128, device="tpu")
    torch.testing.assert_close(a, a.mH)
    lower = torch.linalg.cholesky(a)
    torch.testing.assert_close(lower @ lower.mH, a)


def test_an_out_that_is_a_conj_view_receives_a_cpu_fallbacks_result():
    a = torch.triu(torch.randn(3, 3, dtype=torch.complex128)) + 3 * torch.eye(3)
    b = torch.randn(3, 2, dtype=torch.complex128)
    expected = torch.linalg.solve_triangular(a, b, upper=True)
    out = torch.zeros(3, 2, dtype=torch.complex128, device="tpu").conj()
    torch.linalg.solve_triangular(a.to("tpu"), b.to("tpu"), upper=True, out=out)
    assert out.is_conj()
    torch.testing.assert_close(out.cpu().resolve_conj(), expected)


@pytest.mark.parametrize("bit", ["conj", "neg"])
def test_copy_from_and_resize_writes_through_the_bits(bit):
    source = torch.randn(3, 2, dtype=torch.float64)
    if bit == "conj":
        source = source.to(torch.complex128) * (1 + 2j)
        dst = torch.zeros(3, 2, dtype=torch.complex128, device="tpu").conj()
    else:
        dst = torch.zeros(3, 2, dtype=torch.complex128, device="tpu").conj().imag
    torch.ops.aten._copy_from_and_resize(source, dst)
    torch.testing.assert_close(dst.cpu().resolve_conj().resolve_neg(), source)


@pytest.mark.parametrize("beta", [0, 0.0, False])
def test_a_zero_beta_ignores_nan_in_self(beta):
    m1, m2 = torch.randn(3, 2, 2), torch.randn(3, 2, 2)
    nan = torch.full((3, 2, 2), float("nan"))
    for out in (None, torch.full((3, 2, 2), float("nan"))):
        on_tpu = None if out is None else out.to("tpu")
        got = torch.baddbmm(nan.to("tpu"), m1.to("tpu"), m2.to("tpu"), beta=beta, out=on_tpu)
        torch.testing.assert_close(got.cpu(), torch.bmm(m1, m2))
        got = torch.addmm(nan[0].to("tpu"), m1[0].to("tpu"), m2[0].to("tpu"), beta=beta)
        torch.testing.assert_close(got.cpu(), m1[0] @ m2[0])


def test_baddbmm_self_of_another_dtype_is_refused_as_on_the_cpu():
    batch = torch.rand(1, 2, 2)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="Input dtypes must be the same, got: input long"):
            torch.baddbmm(batch.long().to(device), batch.to(device), batch.to(device), beta=0.0)


@pytest.mark.parametrize("fn", [torch.dot, torch.vdot])
def test_dot_and_vdot_equal_the_cpus_and_refuse_what_it_refuses(fn):
    a, b = torch.randn(5, dtype=torch.complex64), torch.randn(5, dtype=torch.complex64)
    for x, y in ((a, b), (a.conj(), b), (a, b.conj()), (a.real, b.real)):
        torch.testing.assert_close(fn(x.to("tpu"), y.to("tpu")).cpu(), fn(x, y))
    bad = [
        (a, b.to(torch.complex128), "dot : expected both vectors to have same dtype, but found "
         "ComplexFloat and ComplexDouble"),
        (a.reshape(1, 5), b, "1D tensors expected, but got 2D and 1D tensors"),
        (a[:3], b, "inconsistent tensor size"),
    ]  # fmt: skip
    for x, y, message in bad:
        for device in ("cpu", "tpu"):
            with pytest.raises(RuntimeError, match=message):
                fn(x.to(device), y.to(device))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        fn(a, b.to("tpu"))


def test_addr_checks_beta_and_alpha_as_the_cpu():
    s, v = torch.randn(3, 3), torch.randn(3)
    si, vi = torch.ones(3, 3, dtype=torch.long), torch.ones(3, dtype=torch.long)
    cases = [
        ((s, v, v), {"beta": True}, "Boolean beta only supported for Boolean results."),
        ((s, v, v), {"alpha": True}, "Boolean alpha only supported for Boolean results."),
        ((si, vi, vi), {"beta": 2.0}, "argument beta must not be a floating point number."),
        ((si, vi, vi), {"alpha": 0.5}, "argument alpha must not be a floating point number."),
    ]
    for args, kwargs, message in cases:
        for device in ("cpu", "tpu"):
            with pytest.raises(RuntimeError, match=message):
                torch.addr(*(t.to(device) for t in args), **kwargs)
    b, vb = torch.ones(3, 3, dtype=torch.bool), torch.tensor([True, False, True])
    for args, kwargs in (((s, v, v), {"beta": 0.5, "alpha": 2}), ((b, vb, vb), {"beta": False})):
        got = torch.addr(*(t.to("tpu") for t in args), **kwargs)
        torch.testing.assert_close(got.cpu(), torch.addr(*args, **kwargs))
