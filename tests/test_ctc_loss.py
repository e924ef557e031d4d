"""nn.CTCLoss / F.ctc_loss on tpu (aten::_ctc_loss and its backward as tpu kernels),
against PyTorch's CPU kernel: losses and gradients, padded and concatenated targets, every
reduction, empty targets, inputs shorter than the batch's longest, impossible alignments
with and without zero_infinity, float64, a blank other than 0, and the argument checks."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401

TPU = "tpu"


def compare(T, B, C, input_lengths, target_lengths, *, concatenated=False, reduction="mean",
            zero_infinity=False, dtype=torch.float32, blank=0, lengths_as_tensors=True):  # fmt: skip
    g = torch.Generator().manual_seed(T * 100 + B * 10 + C)
    log_probs = torch.randn(T, B, C, dtype=dtype, generator=g).log_softmax(2)
    labels = [c for c in range(C) if c != blank]
    targets = torch.tensor(labels)[torch.randint(0, len(labels), (B, max(target_lengths)), generator=g)]
    targets[0, 1 : target_lengths[0]] = targets[0, 0]  # repeated labels need a blank between
    if concatenated:
        targets = torch.cat([targets[b, :n] for b, n in enumerate(target_lengths)])
    il, tl = torch.tensor(input_lengths), torch.tensor(target_lengths)
    if not lengths_as_tensors:
        il, tl = tuple(input_lengths), tuple(target_lengths)

    def run(device):
        x = log_probs.detach().to(device).requires_grad_()
        move = (lambda v: v.to(device)) if lengths_as_tensors else (lambda v: v)
        loss = F.ctc_loss(x, targets.to(device), move(il), move(tl), blank=blank,
                          reduction=reduction, zero_infinity=zero_infinity)  # fmt: skip
        upstream = torch.linspace(0.5, 1.5, loss.numel(), dtype=dtype).reshape(loss.shape)
        loss.backward(upstream.to(device))
        return loss.detach().cpu(), x.grad.cpu()

    expected_loss, expected_grad = run("cpu")
    loss, grad = run(TPU)
    tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float64 else dict(rtol=1e-4, atol=2e-5)
    tolerance["equal_nan"] = True  # an impossible alignment: CPU gives NaN gradients too
    torch.testing.assert_close(loss, expected_loss, **tolerance)
    torch.testing.assert_close(grad, expected_grad, **tolerance)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("concatenated", [False, True], ids=["padded", "concatenated"])
def test_matches_cpu(native, reduction, concatenated):
    compare(12, 3, 6, [12, 9, 4], [4, 3, 1], concatenated=concatenated, reduction=reduction)


def test_empty_targets_short_inputs_and_list_lengths(native):
    compare(10, 3, 5, [10, 6, 1], [3, 0, 1], reduction="none", lengths_as_tensors=False)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignment(native, zero_infinity):
    # 4 labels need at least 4 steps: the first sequence's loss is infinite
    compare(6, 2, 5, [2, 6], [4, 2], reduction="none", zero_infinity=zero_infinity)


def test_float64_and_another_blank(native):
    compare(8, 2, 6, [8, 7], [3, 2], dtype=torch.float64, blank=5, concatenated=True)


def test_unbatched_and_module(native):
    log_probs = torch.randn(7, 5).log_softmax(1)
    targets = torch.tensor([1, 2, 2])
    expected = F.ctc_loss(log_probs, targets, torch.tensor(7), torch.tensor(3))
    got = F.ctc_loss(log_probs.to(TPU), targets.to(TPU), torch.tensor(7), torch.tensor(3))
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-5)
    module = torch.nn.CTCLoss(reduction="sum")
    batch = torch.randn(9, 2, 4).log_softmax(2)
    tg, il, tl = torch.tensor([[1, 2], [3, 3]]), torch.tensor([9, 8]), torch.tensor([2, 2])
    torch.testing.assert_close(module(batch.to(TPU), tg.to(TPU), il, tl).cpu(),
                               module(batch, tg, il, tl), rtol=1e-4, atol=1e-5)  # fmt: skip


def test_programs_do_not_grow_with_sequence_length(native):
    # Each time step reads its row through an index tensor, not a view at offset t.
    def programs(T, C):
        before = torch_tpu._C._compiled_program_count()
        x = torch.randn(T, 2, C).log_softmax(2).to(TPU).requires_grad_()
        loss = F.ctc_loss(x, torch.tensor([[1, 2], [2, 1]]).to(TPU), [T, T - 1], [2, 2])
        loss.backward()
        return torch_tpu._C._compiled_program_count() - before

    short, long = programs(6, 11), programs(40, 13)
    assert long <= short + 4, (short, long)


def test_bad_arguments_raise_as_on_cpu():
    log_probs = torch.randn(5, 2, 4).log_softmax(2)
    targets = torch.tensor([[1, 2], [1, 1]])
    cases = [
        (dict(input_lengths=[6, 5], target_lengths=[2, 2]), "input_lengths to have value at most 5"),
        (dict(input_lengths=[5, 5], target_lengths=[3, 2]), "size at least 3 at dimension 1"),
        (dict(input_lengths=[5], target_lengths=[2, 2]), "input_lengths must be of size batch_size"),
    ]
    for kwargs, message in cases:
        for device in ("cpu", TPU):
            with pytest.raises(RuntimeError, match=message):
                F.ctc_loss(log_probs.to(device), targets.to(device), **kwargs)
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(log_probs.to(TPU), targets.to(TPU), [5, 5], [2, 2], blank=4)
