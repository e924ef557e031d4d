"""Autograd on tpu tensors gives CPU's gradients: mm/relu/sum, and a small MLP training step."""

import copy

import pytest
import torch

import torch_tpu  # noqa: F401

TPU = "tpu"


def close(actual, expected, rtol=1e-5, atol=1e-5):
    assert actual is not None and expected is not None
    assert actual.device.type == TPU, actual.device
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol)


def leaves(seed, *shapes, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=dtype) for s in shapes]


@pytest.mark.parametrize(
    "shapes", [((4, 3), (3, 5)), ((1, 7), (7, 2)), ((8, 16), (16, 8))], ids=str
)
def test_matmul_relu_sum_backward(shapes):
    a_cpu, b_cpu = (t.requires_grad_() for t in leaves(0, *shapes))
    a = a_cpu.detach().to(TPU).requires_grad_()
    b = b_cpu.detach().to(TPU).requires_grad_()
    assert a.is_leaf and b.is_leaf

    loss_cpu = (a_cpu @ b_cpu).relu().sum()
    loss_cpu.backward()
    loss = (a @ b).relu().sum()
    assert loss.requires_grad and loss.grad_fn is not None
    loss.backward()

    close(loss.detach(), loss_cpu.detach())
    close(a.grad, a_cpu.grad)
    close(b.grad, b_cpu.grad)


def test_gradient_accumulates_across_backward_calls():
    a_cpu, b_cpu = (t.requires_grad_() for t in leaves(1, (3, 4), (4, 2)))
    a = a_cpu.detach().to(TPU).requires_grad_()
    b = b_cpu.detach().to(TPU).requires_grad_()
    for _ in range(2):
        (a_cpu @ b_cpu).relu().sum().backward()
        (a @ b).relu().sum().backward()
    close(a.grad, a_cpu.grad)
    close(b.grad, b_cpu.grad)


def test_elementwise_backward():
    # add/sub/mul/div with broadcasting: gradients reduce over broadcast dims (sum.dim_IntList)
    x_cpu, y_cpu, z_cpu = (t.requires_grad_() for t in leaves(2, (3, 4), (4,), (3, 1)))
    x, y, z = (t.detach().to(TPU).requires_grad_() for t in (x_cpu, y_cpu, z_cpu))

    def f(x, y, z):
        return ((x * y - z) / (y * y + 1.0) + 2.0 * x).relu().sum()

    f(x_cpu, y_cpu, z_cpu).backward()
    f(x, y, z).backward()
    close(x.grad, x_cpu.grad)
    close(y.grad, y_cpu.grad)
    close(z.grad, z_cpu.grad)


def test_torch_autograd_grad():
    a_cpu, b_cpu = (t.requires_grad_() for t in leaves(3, (5, 3), (3, 3)))
    a, b = (t.detach().to(TPU).requires_grad_() for t in (a_cpu, b_cpu))
    ga_cpu, gb_cpu = torch.autograd.grad((a_cpu @ b_cpu).relu().sum(), (a_cpu, b_cpu))
    ga, gb = torch.autograd.grad((a @ b).relu().sum(), (a, b))
    close(ga, ga_cpu)
    close(gb, gb_cpu)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def test_mlp_forward_backward_sgd_matches_cpu():
    torch.manual_seed(0)
    model_cpu = MLP()
    model = copy.deepcopy(model_cpu).to(TPU)
    for p in model.parameters():
        assert p.device.type == TPU
    x_cpu, target_cpu = leaves(4, (6, 8), (6, 4))
    x, target = x_cpu.to(TPU), target_cpu.to(TPU)

    opt_cpu = torch.optim.SGD(model_cpu.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    for step in range(3):
        for m, o, xx, tt in ((model_cpu, opt_cpu, x_cpu, target_cpu), (model, opt, x, target)):
            o.zero_grad()
            loss = ((m(xx) - tt) * (m(xx) - tt)).sum() / xx.shape[0]
            loss.backward()
            if m is model:
                loss_tpu = loss.detach()
                grads = {n: p.grad for n, p in m.named_parameters()}
            else:
                loss_cpu = loss.detach()
                grads_cpu = {n: p.grad.clone() for n, p in m.named_parameters()}
            o.step()
        close(loss_tpu, loss_cpu, rtol=1e-4, atol=1e-4)
        for name in grads_cpu:
            close(grads[name], grads_cpu[name], rtol=1e-4, atol=1e-4)
        for (name, p_cpu), p in zip(model_cpu.named_parameters(), model.parameters()):
            close(p.detach(), p_cpu.detach(), rtol=1e-4, atol=1e-4)
    # training moved the weights
    assert not torch.equal(model_cpu.fc1.weight.detach(), MLP().fc1.weight.detach())


def test_mlp_with_mse_loss_and_momentum():
    torch.manual_seed(1)
    model_cpu = MLP()
    model = copy.deepcopy(model_cpu).to(TPU)
    opt_cpu = torch.optim.SGD(model_cpu.parameters(), lr=0.05, momentum=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x_cpu, target_cpu = leaves(5, (4, 8), (4, 4))
    for _ in range(2):
        opt_cpu.zero_grad()
        torch.nn.functional.mse_loss(model_cpu(x_cpu), target_cpu).backward()
        opt_cpu.step()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x_cpu.to(TPU)), target_cpu.to(TPU)).backward()
        opt.step()
    for p_cpu, p in zip(model_cpu.parameters(), model.parameters()):
        close(p.detach(), p_cpu.detach(), rtol=1e-4, atol=1e-4)


def test_process_exits_cleanly_after_backward():
    # backward() on tpu tensors starts the autograd engine's per-device threads; a script
    # that ends right after it must still exit with status 0 (not abort in the threads'
    # start-up during interpreter shutdown). The failure is a race, so run a few at once.
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}
    env.update(
        TORCH_TPU_CPU_FALLBACK="silent", PYTHONPATH=root + os.pathsep + env.get("PYTHONPATH", "")
    )
    code = (
        "import torch, torch_tpu\n"
        "a = torch.randn(3, 3).to('tpu').requires_grad_()\n"
        "(a @ a).relu().sum().backward()\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    bad = [(rc, err[-300:]) for rc, err in results if rc != 0]
    assert not bad, f"{len(bad)}/4 processes exited abnormally: {bad}"
