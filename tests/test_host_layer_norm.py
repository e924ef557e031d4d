"""Layer norm on the CPU platform run by PyTorch's CPU kernels: float32 layer norm with weight
and bias, weight alone or neither becomes a custom call of torch_tpu's host layer-norm kernels,
forward and backward, whose results are the CPU's to the bit. A bias without a weight, other
dtypes, and host kernels switched off keep the XLA program, which matches within tolerance."""

import platform

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

pytestmark = pytest.mark.skipif(
    torch_tpu.platform() != "cpu" or platform.machine() != "x86_64",
    reason="host layer-norm kernels serve the CPU platform on x86 builds of PyTorch",
)


@pytest.fixture
def one_thread():
    # The weight and bias gradients are sums over rows that PyTorch's CPU kernel splits by
    # thread: its bits depend on the thread count. XLA's workers run the kernel on one thread,
    # so the CPU reference does too.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def norm_and_grads(x, shape, weight, bias, eps=1e-5):
    x_, weight_, bias_ = (
        t.detach().requires_grad_() if t is not None else None for t in (x, weight, bias)
    )
    inputs = [t for t in (x_, weight_, bias_) if t is not None]
    y = F.layer_norm(x_, shape, weight_, bias_, eps)
    grad = torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(y.device)
    return (y, *torch.autograd.grad(y, inputs, grad))


def dumped(tmp_path):
    return [p.read_text() for p in sorted(tmp_path.glob("*.mlir"))]


def operands(x_shape, norm_shape, affine, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(x_shape, generator=g) * 3 + 1).to(dtype)
    weight = (
        torch.randn(norm_shape, generator=g).to(dtype) if affine in ("both", "weight") else None
    )
    bias = torch.randn(norm_shape, generator=g).to(dtype) if affine in ("both", "bias") else None
    return x, weight, bias


def on_tpu(*tensors):
    return [t.to("tpu") if t is not None else None for t in tensors]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize(
    "x_shape,norm_shape", [((16, 32, 64), (64,)), ((7, 5), (5,)), ((3, 4, 6), (4, 6))]
)
def test_results_are_the_cpus_to_the_bit(one_thread, mode, affine, x_shape, norm_shape):
    x, weight, bias = operands(x_shape, norm_shape, affine)
    expected = norm_and_grads(x, norm_shape, weight, bias, eps=1e-3)
    with torch_tpu.eager_mode(mode):
        got = [t.cpu() for t in norm_and_grads(*on_tpu(x), norm_shape, *on_tpu(weight, bias), 1e-3)]
    assert len(got) == len(expected)
    for g_, e in zip(got, expected):
        assert g_.shape == e.shape
        assert torch.equal(g_, e)


def test_saved_statistics_are_the_cpus(one_thread):
    x, weight, bias = operands((6, 10), (10,), "both", seed=3)
    expected = torch.native_layer_norm(x, (10,), weight, bias, 1e-5)
    got = torch.native_layer_norm(*on_tpu(x), (10,), *on_tpu(weight, bias), 1e-5)
    for g_, e in zip(got, expected):
        assert g_.shape == e.shape
        assert torch.equal(g_.cpu(), e)


def test_programs_call_the_kernel_in_both_directions(strict, one_thread, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    x, weight, bias = operands((9, 13), (13,), "both")  # shapes of this test alone
    norm_and_grads(*on_tpu(x), (13,), *on_tpu(weight, bias))
    calls = [t for t in dumped(tmp_path) if "host_layer_norm" in t]
    assert len(calls) == 2
    assert '"torch_tpu.host_layer_norm"' in calls[0]
    assert '"torch_tpu.host_layer_norm_backward"' in calls[1]
    assert all("stablehlo.reduce" not in t for t in calls)  # no reduction of XLA's left


CASES = ["bias alone", "float64", "bfloat16", "host kernels off"]


@pytest.mark.parametrize("case", CASES)
def test_other_cases_keep_the_xla_program_and_match_cpu(strict, tmp_path, monkeypatch, case):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    dtype = {"float64": torch.float64, "bfloat16": torch.bfloat16}.get(case, torch.float32)
    n = 11 + CASES.index(case)  # programs of each case's own
    affine = "bias" if case == "bias alone" else "both"
    x, weight, bias = operands((5, n), (n,), affine, seed=2, dtype=dtype)
    expected = norm_and_grads(x, (n,), weight, bias)
    if case == "host kernels off":
        torch_tpu._C._set_host_matmul_enabled(False)
    try:
        got = norm_and_grads(*on_tpu(x), (n,), *on_tpu(weight, bias))
    finally:
        torch_tpu._C._set_host_matmul_enabled(True)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    for g_, e in zip(got, expected):
        torch.testing.assert_close(g_.cpu(), e, **tol)
    texts = dumped(tmp_path)
    assert texts and not any("host_layer_norm" in t for t in texts)


def test_compiled_block_replays_with_the_kernel(one_thread):
    norm = torch.nn.LayerNorm(12)
    torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(norm.bias)
    x = torch.randn(4, 6, 12)

    def step(module, x):
        module.zero_grad()
        y = torch.nn.functional.gelu(module(x) + x)
        y.square().sum().backward()
        return y, module.weight.grad, module.bias.grad

    expected = step(norm, x)
    device_norm = torch.nn.LayerNorm(12).to("tpu")
    device_norm.load_state_dict(norm.state_dict())
    compiled = torch.compile(step, backend="tpu")
    for _ in range(3):
        got = compiled(device_norm, x.to("tpu"))
        for g_, e in zip(got, expected):
            torch.testing.assert_close(g_.cpu(), e)


def test_an_empty_input_gives_empty_results():
    x = torch.empty(0, 8, device="tpu", requires_grad=True)
    norm = torch.nn.LayerNorm(8).to("tpu")
    y = norm(x)
    y.sum().backward()
    assert y.shape == (0, 8)
    assert torch.equal(norm.weight.grad.cpu(), torch.zeros(8))
