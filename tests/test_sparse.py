"""Sparse COO tensors on tpu, each checked against PyTorch on the CPU: construction and the
accessors, to_dense/coalesce/round trips, sparse gradients of nn.Embedding and
nn.EmbeddingBag (accumulated over two backward passes), SparseAdam, and bad input."""

import pytest
import torch
from torch import nn

TPU = "tpu"


def same(actual: torch.Tensor, expected: torch.Tensor, **tolerance) -> None:
    assert actual.device.type == TPU
    torch.testing.assert_close(actual.cpu(), expected, **tolerance)


def coo(device: str) -> torch.Tensor:
    # Duplicate coordinates (0, 2) twice: uncoalesced, as sparse gradients are.
    indices = torch.tensor([[0, 1, 0, 3], [2, 0, 2, 1]])
    values = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    return torch.sparse_coo_tensor(indices, values, (4, 3, 2), device=device)


def test_a_sparse_tensor_lives_on_tpu_with_the_cpus_structure():
    cpu, tpu = coo("cpu"), coo(TPU)
    assert tpu.is_sparse and tpu.layout == torch.sparse_coo and tpu.device.type == TPU
    assert (tpu.sparse_dim(), tpu.dense_dim(), tpu._nnz()) == (2, 1, 4)
    assert tpu.shape == cpu.shape and tpu.is_coalesced() == cpu.is_coalesced() is False
    assert tpu._indices().device.type == TPU and tpu._values().device.type == TPU
    same(tpu._indices(), cpu._indices())
    same(tpu._values(), cpu._values())
    same(tpu.to_dense(), cpu.to_dense())
    coalesced = tpu.coalesce()
    assert coalesced.is_coalesced() and coalesced.device.type == TPU
    same(coalesced.indices(), cpu.coalesce().indices())
    same(coalesced.values(), cpu.coalesce().values())
    back = tpu.cpu()
    assert back.is_sparse and back.device.type == "cpu"
    torch.testing.assert_close(back.to_dense(), cpu.to_dense())


def test_sparse_arithmetic_matches_the_cpu():
    cpu, tpu = coo("cpu"), coo(TPU)
    same((tpu + tpu).to_dense(), (cpu + cpu).to_dense())
    same((tpu * 3).to_dense(), (cpu * 3).to_dense())
    dense = torch.arange(24.0).reshape(4, 3, 2)
    same(dense.to(TPU) + tpu, dense + cpu)
    in_place = dense.to(TPU)
    in_place.add_(tpu, alpha=2)
    same(in_place, dense.clone().add_(cpu, alpha=2))
    same(torch.zeros_like(tpu).to_dense(), torch.zeros_like(cpu).to_dense())


@pytest.mark.parametrize("padding_idx", [None, 0, -2])
def test_embedding_sparse_gradient_is_the_cpus(padding_idx):
    torch.manual_seed(0)
    cpu = nn.Embedding(10, 5, padding_idx=padding_idx, sparse=True)
    tpu = nn.Embedding(10, 5, padding_idx=padding_idx, sparse=True).to(TPU)
    tpu.load_state_dict(cpu.state_dict())
    indices = torch.tensor([[0, 2, 8, 5], [4, 8, 0, 2]])
    for _ in range(2):  # the second backward adds a sparse gradient to a sparse gradient
        upstream = torch.randn(2, 4, 5)
        cpu(indices).backward(upstream)
        tpu(indices.to(TPU)).backward(upstream.to(TPU))
    assert tpu.weight.grad.is_sparse and tpu.weight.grad.device.type == TPU
    same(tpu.weight.grad.to_dense(), cpu.weight.grad.to_dense())


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_sparse_gradient_is_the_cpus(mode):
    torch.manual_seed(0)
    cpu = nn.EmbeddingBag(10, 3, mode=mode, sparse=True)
    tpu = nn.EmbeddingBag(10, 3, mode=mode, sparse=True).to(TPU)
    tpu.load_state_dict(cpu.state_dict())
    inputs, offsets = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 3, 6])
    weights = torch.rand(8) if mode == "sum" else None
    expected = cpu(inputs, offsets, per_sample_weights=weights)
    actual = tpu(inputs.to(TPU), offsets.to(TPU),
                 per_sample_weights=None if weights is None else weights.to(TPU))  # fmt: skip
    same(actual, expected)
    upstream = torch.randn_like(expected)
    expected.backward(upstream)
    actual.backward(upstream.to(TPU))
    assert tpu.weight.grad.is_sparse
    same(tpu.weight.grad.to_dense(), cpu.weight.grad.to_dense())


def test_sparse_adam_steps_as_on_the_cpu():
    torch.manual_seed(0)
    cpu = nn.Embedding(12, 4, sparse=True)
    tpu = nn.Embedding(12, 4, sparse=True).to(TPU)
    tpu.load_state_dict(cpu.state_dict())
    optimizers = [torch.optim.SparseAdam(m.parameters(), lr=0.1) for m in (cpu, tpu)]
    for step in range(3):
        indices = torch.randint(0, 12, (6,))
        for module, optimizer, device in zip((cpu, tpu), optimizers, ("cpu", TPU)):
            optimizer.zero_grad()
            module(indices.to(device)).pow(2).sum().backward()
            optimizer.step()
    same(tpu.weight.detach(), cpu.weight.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("index, words", [(5, "size is 3 but found index 5"),
                                          (-1, "found negative index -1")])  # fmt: skip
def test_an_index_out_of_range_is_refused_as_on_the_cpu(index, words):
    indices, values = torch.tensor([[0, index]]), torch.tensor([1.0, 2.0])
    for device in ("cpu", TPU):
        with pytest.raises(RuntimeError, match=words):
            torch.sparse_coo_tensor(indices, values, (3,), device=device, check_invariants=True)
