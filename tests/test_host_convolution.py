"""Convolutions on the CPU platform run by PyTorch's CPU convolution: float32 convolutions
(1-, 2- and 3-d; strided, padded, dilated, grouped, transposed) become custom calls of
torch_tpu's host convolution kernels, forward and backward, and match PyTorch's CPU results.
Other dtypes, empty tensors and host kernels switched off keep XLA's convolution."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

pytestmark = pytest.mark.skipif(
    torch_tpu.platform() != "cpu", reason="host convolution kernels serve the CPU platform"
)

# (input shape, weight shape, keyword arguments, transposed)
CASES = {
    "2d": ((4, 3, 9, 9), (5, 3, 3, 3), dict(padding=1), False),
    "2d strided dilated": ((2, 4, 11, 10), (6, 4, 3, 2), dict(stride=2, dilation=(2, 1)), False),
    "2d grouped": ((3, 6, 7, 7), (9, 2, 3, 3), dict(groups=3, padding=(1, 2)), False),
    "1d": ((2, 3, 17), (4, 3, 5), dict(stride=3, padding=2), False),
    "3d": ((2, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(padding=1), False),
    "2d transposed": ((2, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, output_padding=1), True),
    "1d transposed grouped": ((2, 4, 7), (4, 3, 3), dict(groups=2, padding=1), True),
}


def convolve(x, weight, bias, kwargs, transposed):
    fn = {
        (3, False): F.conv1d,
        (4, False): F.conv2d,
        (5, False): F.conv3d,
        (3, True): F.conv_transpose1d,
        (4, True): F.conv_transpose2d,
    }[(x.dim(), transposed)]
    return fn(x, weight, bias, **kwargs)


def conv_and_grads(x, weight, bias, kwargs, transposed, grads_of=("x", "weight", "bias")):
    leaves = {"x": x, "weight": weight, "bias": bias}
    leaves = {
        k: (t.detach().requires_grad_(k in grads_of) if t is not None else None)
        for k, t in leaves.items()
    }
    y = convolve(leaves["x"], leaves["weight"], leaves["bias"], kwargs, transposed)
    grad = torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(y.device)
    wanted = [leaves[k] for k in grads_of if leaves[k] is not None]
    return (y, *torch.autograd.grad(y, wanted, grad))


def dumped(tmp_path):
    return [p.read_text() for p in sorted(tmp_path.glob("*.mlir"))]


def on_tpu(*tensors):
    return [t.to("tpu") if t is not None else None for t in tensors]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_results_match_the_cpu(mode, bias, case):
    x_shape, w_shape, kwargs, transposed = CASES[case]
    if transposed:  # the output's channels are weight.size(1) x groups
        out_channels = w_shape[1] * kwargs.get("groups", 1)
    else:
        out_channels = w_shape[0]
    g = torch.Generator().manual_seed(0)
    x, weight = torch.randn(x_shape, generator=g), torch.randn(w_shape, generator=g)
    b = torch.randn(out_channels, generator=g) if bias else None
    expected = conv_and_grads(x, weight, b, kwargs, transposed)
    with torch_tpu.eager_mode(mode):
        got = [t.cpu() for t in conv_and_grads(*on_tpu(x, weight, b), kwargs, transposed)]
    assert len(got) == len(expected)
    for g_, e in zip(got, expected):
        assert g_.shape == e.shape
        torch.testing.assert_close(g_, e, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("grads_of", [("weight",), ("weight", "bias"), ("x",), ("bias",)])
def test_only_the_asked_for_gradients_are_computed(strict, grads_of):
    # A network's first layer: its input needs no gradient, so the backward asks only for the
    # weight's and bias's, and the kernel returns just those.
    g = torch.Generator().manual_seed(4)
    x, weight, b = (torch.randn(s, generator=g) for s in ((2, 3, 8, 8), (4, 3, 3, 3), (4,)))
    expected = conv_and_grads(x, weight, b, dict(padding=1), False, grads_of)
    got = conv_and_grads(*on_tpu(x, weight, b), dict(padding=1), False, grads_of)
    assert len(got) == len(expected) == 1 + len(grads_of)
    for g_, e in zip(got, expected):
        torch.testing.assert_close(g_.cpu(), e, rtol=1e-5, atol=1e-4)


def test_programs_call_the_kernel_in_both_directions(strict, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    g = torch.Generator().manual_seed(1)
    x, weight, b = (torch.randn(s, generator=g) for s in ((3, 2, 13, 7), (3, 2, 2, 2), (3,)))
    conv_and_grads(*on_tpu(x, weight, b), {}, False)
    calls = [t for t in dumped(tmp_path) if "host_convolution" in t]
    assert len(calls) == 2
    assert '"torch_tpu.host_convolution"' in calls[0]
    assert '"torch_tpu.host_convolution_backward"' in calls[1]
    assert all("stablehlo.convolution" not in t for t in calls)


OTHER = ["float64", "bfloat16", "host kernels off", "empty batch"]


@pytest.mark.parametrize("case", OTHER)
def test_other_cases_keep_xlas_convolution_and_match_cpu(strict, tmp_path, monkeypatch, case):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    dtype = {"float64": torch.float64, "bfloat16": torch.bfloat16}.get(case, torch.float32)
    n = 6 + OTHER.index(case)  # programs of each case's own
    g = torch.Generator().manual_seed(2)
    batch = 0 if case == "empty batch" else 2
    x = torch.randn(batch, 3, n, n, generator=g).to(dtype)
    weight = torch.randn(4, 3, 3, 3, generator=g).to(dtype)
    expected = F.conv2d(x, weight)
    if case == "host kernels off":
        torch_tpu._C._set_host_matmul_enabled(False)
    try:
        got = F.conv2d(x.to("tpu"), weight.to("tpu"))
    finally:
        torch_tpu._C._set_host_matmul_enabled(True)
    tol = dict(rtol=2e-2, atol=5e-2) if dtype == torch.bfloat16 else {}
    assert got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, **tol)
    assert not any("host_convolution" in t for t in dumped(tmp_path))


def test_compiled_cnn_step_matches_the_cpu():
    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 4, 3, stride=2),
            torch.nn.Flatten(),
            torch.nn.Linear(4 * 3 * 3, 5),
        )

    images = torch.randn(6, 3, 8, 8)

    def step(net, images):
        net.zero_grad()
        loss = net(images).square().mean()
        loss.backward()
        return loss, [p.grad for p in net.parameters()]

    cpu_net = model()
    expected_loss, expected_grads = step(cpu_net, images)
    tpu_net = model().to("tpu")
    compiled = torch.compile(step, backend="tpu")
    for _ in range(3):
        loss, grads = compiled(tpu_net, images.to("tpu"))
        torch.testing.assert_close(loss.cpu(), expected_loss, rtol=1e-5, atol=1e-5)
        for g_, e in zip(grads, expected_grads):
            torch.testing.assert_close(g_.cpu(), e, rtol=1e-5, atol=1e-5)


def test_a_cpu_autocast_region_leaves_the_kernel_in_float32(strict):
    # The kernel calls PyTorch's CPU convolution through the dispatcher, on whichever thread
    # runs the program (XLA may run a small one inline, on this thread): a CPU autocast region
    # around tpu code must not recast it (run_kernel's KernelScope excludes autocast).
    g = torch.Generator().manual_seed(5)
    x, weight = torch.randn(2, 3, 10, 10, generator=g), torch.randn(4, 3, 3, 3, generator=g)
    expected = F.conv2d(x, weight)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = F.conv2d(x.to("tpu"), weight.to("tpu"))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
