"""`module.to("tpu")` moves parameters in place, as it does for CUDA: the same Parameter
objects (so tied weights stay tied and an optimizer built before the move keeps working),
their gradients moved with them, and `param.data = t` across the CPU and tpu."""

import pytest
import torch

import torch_tpu  # noqa: F401

TPU = "tpu"


class Tied(torch.nn.Module):
    """An embedding and an output layer sharing one weight, as language models do."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.out = torch.nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, ids):
        return self.out(self.embed(ids))


def test_to_keeps_parameter_objects_and_back():
    model = torch.nn.Linear(3, 2)
    weight, bias = model.weight, model.bias
    model.to(TPU)
    assert model.weight is weight and model.bias is bias
    assert weight.device.type == TPU and weight.requires_grad
    model.to("cpu")
    assert model.weight is weight and weight.device.type == "cpu"


def test_tied_weights_stay_tied_and_train_like_cpu():
    torch.manual_seed(0)
    cpu = Tied()
    tpu = Tied()
    tpu.load_state_dict(cpu.state_dict())
    tpu.to(TPU)
    assert tpu.out.weight is tpu.embed.weight
    assert len(list(tpu.parameters())) == 1

    ids = torch.tensor([[1, 2, 2], [7, 1, 0]])
    cpu(ids).square().sum().backward()
    tpu(ids.to(TPU)).square().sum().backward()
    # one gradient holding both uses' contributions
    torch.testing.assert_close(tpu.embed.weight.grad.cpu(), cpu.embed.weight.grad)


def test_optimizer_built_before_the_move_updates_the_tpu_parameters():
    torch.manual_seed(0)
    cpu = torch.nn.Linear(4, 3)
    tpu = torch.nn.Linear(4, 3)
    tpu.load_state_dict(cpu.state_dict())
    cpu_opt = torch.optim.SGD(cpu.parameters(), lr=0.1)
    tpu_opt = torch.optim.SGD(tpu.parameters(), lr=0.1)
    tpu.to(TPU)
    x = torch.randn(5, 4)
    for model, opt, inp in ((cpu, cpu_opt, x), (tpu, tpu_opt, x.to(TPU))):
        model(inp).sum().backward()
        opt.step()
    assert tpu.weight.device.type == TPU
    torch.testing.assert_close(tpu.weight.cpu(), cpu.weight)
    torch.testing.assert_close(tpu.bias.cpu(), cpu.bias)


def test_gradient_moves_with_its_parameter():
    model = torch.nn.Linear(2, 2)
    model(torch.ones(1, 2)).sum().backward()
    expected = model.weight.grad.clone()
    model.to(TPU)
    assert model.weight.grad.device.type == TPU
    torch.testing.assert_close(model.weight.grad.cpu(), expected)


def test_set_data_across_devices():
    p = torch.nn.Parameter(torch.zeros(2))
    p.data = torch.arange(3.0, device=TPU)
    assert p.device.type == TPU and p.shape == (3,)
    assert p.cpu().tolist() == [0.0, 1.0, 2.0]
    p.data = torch.ones(1)
    assert p.device.type == "cpu"


def test_set_data_with_a_sparse_tensor_still_fails_as_on_cpu():
    sparse = torch.eye(2).to_sparse()
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        torch.zeros(2, 2).data = sparse
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        torch.zeros(2, 2, device=TPU).data = sparse
