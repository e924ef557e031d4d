"""3-d pooling and padding, adaptive max pooling (1-d to 3-d) and 3-d adaptive average
pooling on tpu, as torch.nn's modules reach them, against PyTorch's CPU kernels: values,
the indices max pooling returns, and gradients."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401

TPU = "tpu"


def compare(fn, shape, *, dtype=torch.float32, seed=0, ties=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, dtype=dtype, generator=g)
    if ties:
        x = x.round()
    results = {}
    for device in ("cpu", TPU):
        t = x.detach().to(device).requires_grad_()
        out = fn(t)
        values = out[0] if isinstance(out, tuple) else out
        upstream = torch.randn(values.shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
        values.backward(upstream.to(device))
        results[device] = ([o.detach().cpu() for o in out] if isinstance(out, tuple)
                           else [out.detach().cpu()], t.grad.cpu())  # fmt: skip
    (cpu_out, cpu_grad), (tpu_out, tpu_grad) = results["cpu"], results[TPU]
    for a, b in zip(tpu_out, cpu_out):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tpu_grad, cpu_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), dilation=(1, 1, 2)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
], ids=str)  # fmt: skip
def test_max_pool3d(native, kwargs):
    compare(lambda t: F.max_pool3d(t, return_indices=True, **kwargs), (2, 3, 7, 8, 9))


def test_max_pool3d_unbatched_ties_and_nan(native):
    compare(lambda t: F.max_pool3d(t, 2, return_indices=True), (2, 4, 4, 6), ties=True)
    x = torch.randn(1, 1, 4, 4, 4)
    x[0, 0, 1, 1, 1] = float("nan")
    got = F.max_pool3d(x.to(TPU), 2, return_indices=True)
    want = F.max_pool3d(x, 2, return_indices=True)
    torch.testing.assert_close(got[0].cpu(), want[0], equal_nan=True)
    assert torch.equal(got[1].cpu(), want[1])


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, divisor_override=3),
], ids=str)  # fmt: skip
def test_avg_pool3d(native, kwargs):
    compare(lambda t: F.avg_pool3d(t, **kwargs), (2, 3, 7, 8, 9))


@pytest.mark.parametrize("fn, shape", [
    (lambda t: F.adaptive_max_pool1d(t, 4, return_indices=True), (2, 3, 10)),
    (lambda t: F.adaptive_max_pool2d(t, (3, 5), return_indices=True), (2, 3, 10, 7)),
    (lambda t: F.adaptive_max_pool2d(t, 1, return_indices=True), (3, 6, 6)),
    (lambda t: F.adaptive_max_pool3d(t, (2, 3, 4), return_indices=True), (2, 2, 5, 7, 9)),
    (lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), (2, 2, 5, 7, 9)),
    (lambda t: F.adaptive_avg_pool3d(t, 1), (2, 5, 6, 7)),
], ids=["max1d", "max2d", "max2d_global_unbatched", "max3d", "avg3d", "avg3d_global"])  # fmt: skip
def test_adaptive_pooling(native, fn, shape):
    compare(fn, shape)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("pad", [(1, 1, 1, 1, 1, 1), (2, 0, 1, 3, 0, 2)], ids=str)
def test_pad3d(native, mode, pad):
    compare(lambda t: F.pad(t, pad, mode=mode), (2, 3, 4, 5, 6))
    compare(lambda t: F.pad(t, pad, mode=mode), (3, 4, 5, 6))


def test_modules_and_errors(native):
    for module, shape in [
        (torch.nn.MaxPool3d(2), (1, 2, 4, 4, 4)),
        (torch.nn.AvgPool3d(2), (1, 2, 4, 4, 4)),
        (torch.nn.AdaptiveMaxPool2d(2), (1, 2, 5, 5)),
        (torch.nn.ReflectionPad3d(1), (1, 2, 3, 3, 3)),
        (torch.nn.ReplicationPad3d(2), (1, 2, 3, 3, 3)),
    ]:
        compare(module, shape)
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(torch.zeros(1, 1, 2, 2, 2, device=TPU), (2, 2, 0, 0, 0, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool3d(torch.zeros(1, 1, 4, 4, 4, device=TPU), 2, padding=2)
