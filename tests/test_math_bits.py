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
