"""Training-mode batch norm on the CPU platform run by PyTorch's CPU kernels: float32 batch
norm (with or without weight and bias, with or without running statistics) becomes a custom
call of torch_tpu's host batch-norm kernels, forward and backward, and matches PyTorch's CPU
results, running statistics included. Evaluation mode, other dtypes and host kernels switched
off keep XLA's program."""

import pytest
import torch
import torch.nn as nn

import torch_tpu

pytestmark = pytest.mark.skipif(
    torch_tpu.platform() != "cpu", reason="host batch-norm kernels serve the CPU platform"
)

LAYERS = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}


def pair(shape, affine, track, dtype=torch.float32):
    torch.manual_seed(0)
    cpu = LAYERS[len(shape)](shape[1], affine=affine, track_running_stats=track).to(dtype)
    if affine:
        nn.init.normal_(cpu.weight)
        nn.init.normal_(cpu.bias)
    tpu = LAYERS[len(shape)](shape[1], affine=affine, track_running_stats=track).to(dtype)
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu.to("tpu")


def step(layer, x, grad):
    x = x.detach().requires_grad_()
    y = layer(x)
    y.backward(grad)
    grads = [x.grad] + ([layer.weight.grad, layer.bias.grad] if layer.affine else [])
    stats = [layer.running_mean, layer.running_var] if layer.track_running_stats else []
    return [y, *grads, *stats]


def dumped(tmp_path):
    return [p.read_text() for p in sorted(tmp_path.glob("*.mlir"))]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("affine,track", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("shape", [(8, 4, 5, 5), (6, 3, 7), (5, 2), (4, 3, 2, 2, 2)])
def test_training_matches_the_cpu_running_statistics_included(mode, affine, track, shape):
    cpu, tpu = pair(shape, affine, track)
    g = torch.Generator().manual_seed(1)
    with torch_tpu.eager_mode(mode):
        for _ in range(2):  # the second step starts from updated running statistics
            x = torch.randn(shape, generator=g) * 2 + 1
            grad = torch.randn(shape, generator=g)
            expected = step(cpu, x, grad)
            got = step(tpu, x.to("tpu"), grad.to("tpu"))
            assert len(got) == len(expected)
            for g_, e in zip(got, expected):
                torch.testing.assert_close(g_.cpu(), e, rtol=1e-5, atol=1e-5)
        if track:
            assert tpu.num_batches_tracked.item() == cpu.num_batches_tracked.item() == 2


def test_programs_call_the_kernel_in_both_directions(strict, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    cpu, tpu = pair((3, 5, 9), True, True)  # shapes of this test alone
    step(tpu, torch.randn(3, 5, 9, device="tpu"), torch.randn(3, 5, 9, device="tpu"))
    calls = [t for t in dumped(tmp_path) if "host_batch_norm" in t]
    assert len(calls) == 2
    assert '"torch_tpu.host_batch_norm"' in calls[0]
    assert '"torch_tpu.host_batch_norm_backward"' in calls[1]
    assert all("stablehlo.reduce" not in t for t in calls)


OTHER = ["evaluation", "float64", "host kernels off"]


@pytest.mark.parametrize("case", OTHER)
def test_other_cases_keep_the_xla_program_and_match_cpu(strict, tmp_path, monkeypatch, case):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    dtype = torch.float64 if case == "float64" else torch.float32
    n = 11 + OTHER.index(case)  # programs of each case's own
    cpu, tpu = pair((4, 3, n), True, True, dtype)
    if case == "evaluation":
        cpu.eval()
        tpu.eval()
    x = torch.randn(4, 3, n, dtype=dtype)
    if case == "host kernels off":
        torch_tpu._C._set_host_matmul_enabled(False)
    try:
        got = tpu(x.to("tpu"))
    finally:
        torch_tpu._C._set_host_matmul_enabled(True)
    torch.testing.assert_close(got.cpu(), cpu(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tpu.running_var.cpu(), cpu.running_var)
    assert not any("host_batch_norm" in t for t in dumped(tmp_path))


def test_compiled_training_step_matches_the_cpu():
    cpu, tpu = pair((6, 4, 3, 3), True, True)

    def train_step(layer, x):
        layer.zero_grad()
        y = layer(x)
        y.square().mean().backward()
        return y, layer.weight.grad, layer.bias.grad

    compiled = torch.compile(train_step, backend="tpu")
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        x = torch.randn(6, 4, 3, 3, generator=g)
        expected = train_step(cpu, x)
        got = compiled(tpu, x.to("tpu"))
        for g_, e in zip(got, expected):
            torch.testing.assert_close(g_.cpu(), e, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tpu.running_mean.cpu(), cpu.running_mean)
    torch.testing.assert_close(tpu.running_var.cpu(), cpu.running_var)
