"""The fused ops that nn.TransformerEncoderLayer and nn.MultiheadAttention take in eval mode
(their inference fast paths) run as tpu kernels, with no CPU fallback, and match the CPU."""

import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tpu  # noqa: F401


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def _tpu(tree):
    return {k: v.to("tpu") for k, v in tree.items()}


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masking", ["none", "padding", "causal"])
def test_transformer_encoder_layer_fast_path(norm_first, activation, masking, native):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        32, 4, 64, dropout=0.0, activation=activation, norm_first=norm_first, batch_first=True
    ).eval()
    on_tpu = copy.deepcopy(layer).to("tpu")
    x = torch.randn(3, 7, 32)
    masks = {}
    if masking == "padding":
        masks["src_key_padding_mask"] = torch.zeros(3, 7, dtype=torch.bool)
        masks["src_key_padding_mask"][1, 5:] = True
    elif masking == "causal":
        masks["src_mask"] = torch.nn.Transformer.generate_square_subsequent_mask(7).bool()
    with torch.no_grad():
        want = layer(x, **masks)
        with _Ops() as ops:
            got = on_tpu(x.to("tpu"), **_tpu(masks))
    assert "_transformer_encoder_layer_fwd" in ops.names  # the fast path was taken
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("average", [False, True])
def test_multihead_attention_fast_path(need_weights, average, native):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    on_tpu = copy.deepcopy(mha).to("tpu")
    q = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        want = mha(
            q, q, q, key_padding_mask=pad, need_weights=need_weights, average_attn_weights=average
        )
        with _Ops() as ops:
            qt = q.to("tpu")
            got = on_tpu(
                qt,
                qt,
                qt,
                key_padding_mask=pad.to("tpu"),
                need_weights=need_weights,
                average_attn_weights=average,
            )
    assert "_native_multi_head_attention" in ops.names
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-5, atol=1e-6)
    if need_weights:
        torch.testing.assert_close(got[1].cpu(), want[1], rtol=1e-5, atol=1e-6)
    else:
        assert got[1] is None and want[1] is None


@pytest.mark.parametrize("inputs", ["self", "key_is_value", "distinct"])
def test_native_multi_head_attention_op(inputs, native):
    torch.manual_seed(0)
    d, heads = 12, 3
    args = [torch.randn(3 * d, d), torch.randn(3 * d), torch.randn(d, d), torch.randn(d)]
    q = torch.randn(2, 4, d)
    k = q if inputs == "self" else torch.randn(2, 4, d)
    v = k if inputs != "distinct" else torch.randn(2, 4, d)
    mask = torch.rand(4, 4) > 0.7
    mask.fill_diagonal_(False)
    want = torch._native_multi_head_attention(q, k, v, d, heads, *args, mask, True, False, 0)
    qt = q.to("tpu")
    kt = qt if k is q else k.to("tpu")
    vt = kt if v is k else v.to("tpu")
    got = torch._native_multi_head_attention(
        qt, kt, vt, d, heads, *(a.to("tpu") for a in args), mask.to("tpu"), True, False, 0
    )
    for ours, theirs in zip(got, want):
        torch.testing.assert_close(ours.cpu(), theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask_type", [0, 1, 2, None])
def test_masked_softmax_matches_cpu_including_fully_masked_rows(mask_type, native):
    torch.manual_seed(0)
    scores = torch.randn(2, 3, 5, 5)
    shape = {0: (5, 5), 1: (2, 5), 2: (2, 3, 5, 5), None: (2, 3, 5, 5)}[mask_type]
    mask = torch.rand(shape) > 0.6
    mask.view(-1, 5)[0] = True  # a row (or a batch's keys) masked entirely: NaN, as on CPU
    want = torch._masked_softmax(scores, mask, 3, mask_type)
    got = torch._masked_softmax(scores.to("tpu"), mask.to("tpu"), 3, mask_type)
    assert want.isnan().any()
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def test_bad_mask_shape_raises_like_cpu():
    scores = torch.randn(1, 1, 3, 3)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match=r"mask_type == 0 mask shape should be \(L, L\)"):
            torch._masked_softmax(
                scores.to(device), torch.ones(2, 3, dtype=torch.bool, device=device), 3, 0
            )


def test_encoder_stack_without_nested_tensors(native):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    on_tpu = copy.deepcopy(encoder).to("tpu")
    x = torch.randn(2, 6, 16)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True
    with torch.no_grad():
        want = encoder(x, src_key_padding_mask=pad)
        got = on_tpu(x.to("tpu"), src_key_padding_mask=pad.to("tpu"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def _encoder(norm: bool):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    final = torch.nn.LayerNorm(16) if norm else None
    return torch.nn.TransformerEncoder(layer, 2, norm=final).eval()


@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize(
    "lengths",
    [(7, 4, 2), (7, 7, 7), (5, 0, 3)],  # ragged, none padded, one sequence all padding
    ids=str,
)
def test_encoder_nested_tensor_path_matches_the_cpu(norm, lengths, native):
    # The CPU runs this through nested tensors and pads with zeros before the final norm.
    encoder = _encoder(norm)
    on_tpu = copy.deepcopy(encoder).to("tpu")
    x = torch.randn(len(lengths), 7, 16)
    pad = torch.arange(7).expand(len(lengths), 7) >= torch.tensor(lengths).unsqueeze(1)
    with torch.no_grad():
        want = encoder(x, src_key_padding_mask=pad)
        got = on_tpu(x.to("tpu"), src_key_padding_mask=pad.to("tpu"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_encoder_keeps_its_other_paths_on_tpu(native):
    encoder = _encoder(norm=True)
    on_tpu = copy.deepcopy(encoder).to("tpu")
    x = torch.randn(2, 6, 16)
    right_aligned = torch.zeros(2, 6, dtype=torch.bool)
    right_aligned[1, :2] = True  # not left aligned: the encoder's slow path, no zeros
    with torch.no_grad():
        want = encoder(x, src_key_padding_mask=right_aligned)
        got = on_tpu(x.to("tpu"), src_key_padding_mask=right_aligned.to("tpu"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    # with gradients: the training path, gradients as on the CPU
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 3:] = True
    want = encoder(x, src_key_padding_mask=pad)
    got = on_tpu(x.to("tpu"), src_key_padding_mask=pad.to("tpu"))
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    want.sum().backward()
    got.sum().backward()
    for a, b in zip(on_tpu.parameters(), encoder.parameters()):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-5)


def test_left_aligned_mask_check_matches_the_cpu():
    x = torch.randn(4, 5, 3)
    masks = torch.tensor(
        [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 1, 0, 0]], dtype=torch.bool
    )
    for rows in ([0, 1, 2], [0, 3], [3], [2]):
        want = torch._nested_tensor_from_mask_left_aligned(x[rows], masks[rows])
        got = torch._nested_tensor_from_mask_left_aligned(x[rows].to("tpu"), masks[rows].to("tpu"))
        assert got == want, rows
    for bad_x, bad_mask in ((x, masks[:2]), (x, masks.unsqueeze(-1)), (x[0], masks)):
        with pytest.raises(RuntimeError) as cpu:
            torch._nested_tensor_from_mask_left_aligned(bad_x, bad_mask)
        with pytest.raises(RuntimeError) as tpu:
            torch._nested_tensor_from_mask_left_aligned(bad_x.to("tpu"), bad_mask.to("tpu"))
        assert str(tpu.value) == str(cpu.value)
