"""Fractional max pooling (nn.FractionalMaxPool2d/3d) on tpu against PyTorch's CPU kernel:
window starts drawn from the random samples in the input's dtype, values, the flat indices
(first maximum on ties, last NaN in a window), gradients, out= variants, the modules, and
every argument check's exception and message."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401

TPU = "tpu"
POOL = {2: torch.ops.aten.fractional_max_pool2d, 3: torch.ops.aten.fractional_max_pool3d}


def samples_for(shape, spatial, dtype, seed=1, extra_batch=0):
    batch = shape[0] if len(shape) == spatial + 2 else 1
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch + extra_batch, shape[-spatial - 1], spatial, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16],
                         ids=str)  # fmt: skip
@pytest.mark.parametrize("shape,kernel,out", [
    ((2, 3, 8, 9), (2, 3), (4, 5)),
    ((3, 10, 7), (3, 2), (5, 3)),  # no batch dimension
    ((1, 1, 8, 9), (5, 6), (4, 4)),  # the pools just fit
    ((2, 2, 17, 5), (2, 2), (1, 4)),  # one window: it starts at in - pool
    ((1, 2, 6, 7, 8), (2, 3, 2), (4, 4, 5)),
    ((2, 6, 7, 9), (1, 2, 3), (3, 5, 6)),  # no batch dimension, 3-d
], ids=str)  # fmt: skip
def test_values_indices_and_gradients_match_the_cpu(native, dtype, shape, kernel, out):
    spatial = len(kernel)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(dtype)
    samples = samples_for(shape, spatial, dtype, extra_batch=1)  # more samples than planes
    upstream = None
    results = {}
    for device in ("cpu", TPU):
        t = x.detach().clone().to(device).requires_grad_()
        values, indices = POOL[spatial](t, list(kernel), list(out), samples.to(device))
        if upstream is None:
            upstream = torch.randn(values.shape, generator=g).to(dtype)
        values.backward(upstream.to(device))
        results[device] = (values.detach().cpu(), indices.cpu(), t.grad.cpu())
    for tpu_result, cpu_result in zip(results[TPU], results["cpu"]):
        torch.testing.assert_close(tpu_result, cpu_result, rtol=0, atol=0)


@pytest.mark.parametrize("spatial", [2, 3])
def test_ties_and_nan_windows_pick_the_cpus_index(native, spatial):
    shape = (2, 3, 9, 8) if spatial == 2 else (2, 3, 6, 7, 6)
    x = torch.randint(0, 3, shape).float()  # many ties
    x.view(-1)[::7] = float("nan")
    x.view(-1)[3::11] = float("-inf")
    samples = samples_for(shape, spatial, torch.float32)
    kernel, out = ([3, 2], [4, 5]) if spatial == 2 else ([2, 3, 2], [3, 3, 4])
    cpu = POOL[spatial](x, kernel, out, samples)
    tpu = POOL[spatial](x.to(TPU), kernel, out, samples.to(TPU))
    torch.testing.assert_close(tpu[0].cpu(), cpu[0], rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(tpu[1].cpu(), cpu[1], rtol=0, atol=0)


def test_out_variants_and_the_modules(native):
    x = torch.randn(2, 3, 10, 12)
    samples = samples_for(x.shape, 2, torch.float32)
    values = torch.empty(0, device=TPU)
    indices = torch.empty(0, dtype=torch.long, device=TPU)
    torch.ops.aten.fractional_max_pool2d.output(
        x.to(TPU), [2, 2], [5, 6], samples.to(TPU), output=values, indices=indices
    )
    expected = torch.ops.aten.fractional_max_pool2d(x, [2, 2], [5, 6], samples)
    torch.testing.assert_close(values.cpu(), expected[0], rtol=0, atol=0)
    torch.testing.assert_close(indices.cpu(), expected[1], rtol=0, atol=0)
    grad = torch.empty(0, device=TPU)
    torch.ops.aten.fractional_max_pool2d_backward.grad_input(
        torch.ones(2, 3, 5, 6, device=TPU), x.to(TPU), [2, 2], [5, 6], indices, grad_input=grad
    )
    cpu_grad = torch.ops.aten.fractional_max_pool2d_backward(
        torch.ones(2, 3, 5, 6), x, [2, 2], [5, 6], expected[1]
    )
    torch.testing.assert_close(grad.cpu(), cpu_grad, rtol=0, atol=0)
    # the modules draw their samples on the device; shapes as the CPU's
    pool2d = torch.nn.FractionalMaxPool2d(3, output_ratio=0.5, return_indices=True)
    y, where = pool2d(torch.randn(2, 4, 16, 14, device=TPU))
    assert y.shape == (2, 4, 8, 7) and where.dtype == torch.long
    pool3d = torch.nn.FractionalMaxPool3d(2, output_size=(3, 4, 5))
    assert pool3d(torch.randn(1, 2, 6, 8, 9, device=TPU)).shape == (1, 2, 3, 4, 5)
    # each output is the maximum of the input at its index
    flat = torch.randn(2, 4, 16, 14)
    y, where = pool2d(flat.to(TPU))
    assert torch.equal(y.cpu(), flat.flatten(2).gather(2, where.cpu().flatten(2)).view(y.shape))


BAD_CALLS = {
    "3-d samples of another dtype": (2, (2, 3, 8, 9), [2, 2], [4, 4], (2, 3, 2), torch.float64),
    "samples of 2 dimensions": (2, (2, 3, 8, 9), [2, 2], [4, 4], (2, 3), torch.float32),
    "too few sample rows": (2, (2, 3, 8, 9), [2, 2], [4, 4], (1, 3, 2), torch.float32),
    "samples of other channels": (2, (2, 3, 8, 9), [2, 2], [4, 4], (2, 1, 2), torch.float32),
    "3 samples per plane in 2-d": (2, (2, 3, 8, 9), [2, 2], [4, 4], (2, 3, 3), torch.float32),
    "pool height too large": (2, (2, 3, 8, 9), [6, 2], [4, 4], (2, 3, 2), torch.float32),
    "pool width too large": (2, (2, 3, 8, 9), [2, 7], [4, 4], (2, 3, 2), torch.float32),
    "a 2-d input": (2, (8, 9), [2, 2], [4, 4], (2, 3, 2), torch.float32),
    "one kernel size": (2, (2, 3, 8, 9), [2], [4, 4], (2, 3, 2), torch.float32),
    "3-d pool time too large": (3, (1, 2, 5, 6, 7), [2, 2, 2], [4, 4, 4], (1, 2, 3), torch.float32),
    "3-d pool height too large": (
        3,
        (1, 2, 6, 7, 8),
        [2, 4, 2],
        [4, 4, 4],
        (1, 2, 3),
        torch.float32,
    ),
    "3-d 2 samples per plane": (3, (1, 2, 6, 7, 8), [2, 2, 2], [4, 4, 4], (1, 2, 2), torch.float32),
    "3-d a 2-d input": (3, (8, 9), [2, 2, 2], [4, 4, 4], (1, 2, 3), torch.float32),
    "3-d two kernel sizes": (3, (1, 2, 6, 7, 8), [2, 2], [4, 4, 4], (1, 2, 3), torch.float32),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_arguments_raise_as_on_the_cpu(case):
    spatial, shape, kernel, out, samples_shape, samples_dtype = BAD_CALLS[case]
    x = torch.randn(shape)
    samples = torch.rand(samples_shape).to(samples_dtype)
    with pytest.raises(Exception) as cpu:
        POOL[spatial](x, kernel, out, samples)
    with pytest.raises(Exception) as tpu:
        POOL[spatial](x.to(TPU), kernel, out, samples.to(TPU))
    assert tpu.type is cpu.type
    assert str(tpu.value) == str(cpu.value)


def test_integer_input_is_refused_as_on_the_cpu():
    x = torch.randint(0, 9, (1, 2, 8, 9))
    samples = torch.rand(1, 2, 2).long()
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        POOL[2](x, [2, 2], [4, 4], samples)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        POOL[2](x.to(TPU), [2, 2], [4, 4], samples.to(TPU))


def test_functional_with_output_ratio_matches_the_cpu_given_the_same_samples(native):
    x = torch.randn(3, 5, 13, 11)
    samples = samples_for(x.shape, 2, torch.float32)
    cpu = F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.6), _random_samples=samples)
    tpu = F.fractional_max_pool2d(
        x.to(TPU), 2, output_ratio=(0.5, 0.6), _random_samples=samples.to(TPU)
    )
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=0, atol=0)
