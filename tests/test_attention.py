"""F.scaled_dot_product_attention on tpu runs one fused program for its forward and one for its
backward (_scaled_dot_product_fused_attention_overrideable), chosen through PyTorch's
_fused_sdp_choice stub, where PyTorch's math path would record about a dozen ops. Results
and gradients are compared with PyTorch on the CPU: PyTorch's own OpInfo samples, the masks
(boolean, additive, broadcast, fully masked rows), scales, dtypes and layouts, in every eager
mode and under torch.compile. The cases the fused program does not serve keep the math path."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tpu

FUSED = "_scaled_dot_product_fused_attention_overrideable"
# The error floor, relative to the largest reference value, below which any error passes.
ERROR_FLOOR = {
    torch.float32: 1e-6,
    torch.float64: 1e-12,
    torch.bfloat16: 4e-3,
    torch.float16: 5e-4,
}


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def _leaf(t: torch.Tensor, device: str, grad: bool) -> torch.Tensor:
    moved = t.detach().to(device)
    return moved.requires_grad_(grad and moved.is_floating_point())


def _run(device, q, k, v, grad_out=None, **kwargs):
    """SDPA's output and (with grad_out) the gradients of every floating input."""
    grad = grad_out is not None
    inputs = [_leaf(t, device, grad) for t in (q, k, v)]
    mask = kwargs.pop("attn_mask", None)
    if mask is not None:
        mask = _leaf(mask, device, grad)
        kwargs["attn_mask"] = mask
    out = F.scaled_dot_product_attention(*inputs, **kwargs)
    if not grad:
        return out, ()
    out.backward(grad_out.to(device))
    leaves = inputs + ([mask] if mask is not None and mask.requires_grad else [])
    return out, tuple(t.grad for t in leaves)


def _as_double(kwargs):
    return {
        name: a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for name, a in kwargs.items()
    }


def _assert_as_accurate(got, cpus, reference, dtype):
    """tpu's error against the float64 reference is at most 4x the CPU's own, or under the
    dtype's floor: attention's gradients are ill-conditioned where scores are large (PyTorch's
    OpInfo samples reach hundreds), so a fixed tolerance would be either loose or flaky. The
    CPU's error is the larger of its runs on all threads and on one: its kernels' last bits
    change with the thread split and the CPU's vector width, and either split is the CPU's."""
    assert got.shape == reference.shape and got.dtype == cpus[0].dtype
    error = (got.cpu().double() - reference).abs().max().item()
    cpu_error = max((cpu.double() - reference).abs().max().item() for cpu in cpus)
    floor = ERROR_FLOOR[dtype] * (1 + reference.abs().max().item())
    assert error <= 4 * cpu_error + floor, (error, cpu_error, floor)


def _check(q, k, v, expect_fused=True, **kwargs):
    """The tpu result and gradients are as accurate as the CPU's; the fused kernel ran (or not)."""
    # Grouped-query keys have fewer heads than the queries; a 3-D query broadcasts to 4-D keys.
    batch = (
        q.shape[:-2]
        if kwargs.get("enable_gqa")
        else torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    )
    grad_out = torch.randn(*batch, q.shape[-2], v.shape[-1], dtype=q.dtype)
    want, want_grads = _run("cpu", q, k, v, grad_out, **dict(kwargs))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        want_1, want_grads_1 = _run("cpu", q, k, v, grad_out, **dict(kwargs))
    finally:
        torch.set_num_threads(threads)
    reference, reference_grads = _run(
        "cpu", q.double(), k.double(), v.double(), grad_out.double(), **_as_double(kwargs)
    )
    with _Ops() as ops:
        got, got_grads = _run("tpu", q, k, v, grad_out, **dict(kwargs))
    assert (FUSED in ops.names) == expect_fused, ops.names
    if expect_fused:
        # The math path's ops are gone: no mask built with tril, no safe-softmax pieces.
        assert not {"tril", "_safe_softmax", "isneginf", "_softmax", "bmm"} & set(ops.names)
    _assert_as_accurate(got, (want, want_1), reference, q.dtype)
    assert len(got_grads) == len(want_grads) == len(reference_grads)
    for g, w, w_1, r in zip(got_grads, want_grads, want_grads_1, reference_grads):
        _assert_as_accurate(g, (w, w_1), r, q.dtype)
    return got


def _qkv(shape_q, shape_k, value_dim=None, dtype=torch.float32):
    v_shape = list(shape_k)
    if value_dim is not None:
        v_shape[-1] = value_dim
    return (
        torch.randn(shape_q, dtype=dtype),
        torch.randn(shape_k, dtype=dtype),
        torch.randn(v_shape, dtype=dtype),
    )


SDPA_OPINFO = next(op for op in op_db if op.name == "nn.functional.scaled_dot_product_attention")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_pytorch_opinfo_samples_match_the_cpu(dtype):
    """Every sample without dropout; the fused kernel serves those whose query, keys and
    values share their rank (the others broadcast a 3-D query and keep the math path)."""
    torch.manual_seed(0)
    checked = 0
    for sample in SDPA_OPINFO.sample_inputs("cpu", dtype, requires_grad=False):
        if sample.kwargs.get("dropout_p", 0.0) > 0:
            continue
        q, (k, v) = sample.input, sample.args
        fused = q.dim() == k.dim() == v.dim()
        _check(q, k, v, expect_fused=fused, **sample.kwargs)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize(
    "shape_q,shape_k,value_dim",
    [
        ((2, 3, 5, 8), (2, 3, 5, 8), None),  # self-attention
        ((2, 3, 4, 8), (2, 3, 9, 8), 6),  # longer keys, values of another width
        ((3, 7, 8), (3, 2, 8), None),  # 3-D, fewer keys than queries
        ((1, 1, 1, 4), (1, 1, 1, 4), None),
    ],
)
@pytest.mark.parametrize("causal", [False, True])
def test_shapes_and_causal_mask(shape_q, shape_k, value_dim, causal):
    torch.manual_seed(1)
    _check(*_qkv(shape_q, shape_k, value_dim), is_causal=causal)


@pytest.mark.parametrize("scale", [None, 0.1, 2.5])
def test_explicit_scale(scale):
    torch.manual_seed(2)
    _check(*_qkv((2, 2, 6, 4), (2, 2, 6, 4)), scale=scale, is_causal=True)


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (1, 3, 1, 7), (2, 3, 5, 7), (1, 7)])
def test_boolean_masks_broadcast(mask_shape):
    torch.manual_seed(3)
    mask = torch.rand(mask_shape) > 0.4
    _check(*_qkv((2, 3, 5, 4), (2, 3, 7, 4)), attn_mask=mask)


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (2, 3, 5, 7)])
def test_additive_masks_get_their_gradient(mask_shape):
    """A float mask that requires grad gets the gradient of the scores, summed over the
    dimensions it was broadcast along."""
    torch.manual_seed(4)
    _check(*_qkv((2, 3, 5, 4), (2, 3, 7, 4)), attn_mask=torch.randn(mask_shape))


def test_a_mask_with_is_causal_applies_both_as_on_the_cpu():
    """PyTorch's CPU kernel takes a mask and is_causal together (its math path alone rejects
    the pair): the fused program applies both."""
    torch.manual_seed(14)
    mask = torch.rand(6, 6) > 0.3
    _check(*_qkv((2, 2, 6, 4), (2, 2, 6, 4)), attn_mask=mask, is_causal=True)


def test_fully_masked_rows_give_zeros_as_the_math_path_does():
    torch.manual_seed(5)
    mask = torch.rand(2, 1, 5, 7) > 0.5
    mask[0, 0, 1] = False  # query 1 of batch 0 sees no key
    mask[1, 0, 4] = False
    got = _check(*_qkv((2, 3, 5, 4), (2, 3, 7, 4)), attn_mask=mask)
    assert got[0, :, 1].abs().sum().item() == 0
    assert not got.isnan().any()


def test_additive_mask_of_minus_infinity_and_large_logits():
    torch.manual_seed(6)
    q, k, v = _qkv((1, 2, 6, 4), (1, 2, 6, 4))
    bias = torch.zeros(6, 6)
    bias[2] = float("-inf")  # a whole row masked through the bias
    bias[3, :3] = float("-inf")
    _check(q * 30, k * 30, v, attn_mask=bias)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_dtypes(dtype):
    torch.manual_seed(7)
    _check(*_qkv((2, 2, 9, 8), (2, 2, 9, 8), dtype=dtype), is_causal=True)


def test_transposed_inputs_give_the_output_in_the_query_layout():
    """The GPT's q, k, v are (batch, length, heads, dim) views transposed to (batch, heads,
    length, dim): the output comes in the same layout (as PyTorch's meta function says), so
    the transpose back to (batch, length, width) is free."""
    torch.manual_seed(8)
    batch, length, heads, dim = 2, 5, 3, 4
    qkv = torch.randn(batch, length, 3 * heads * dim)
    q, k, v = (
        t.view(batch, length, heads, dim).transpose(1, 2) for t in qkv.split(heads * dim, dim=2)
    )
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    on_tpu = qkv.to("tpu")
    qt, kt, vt = (
        t.view(batch, length, heads, dim).transpose(1, 2) for t in on_tpu.split(heads * dim, dim=2)
    )
    got = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    torch.testing.assert_close(got.cpu(), want, rtol=2e-5, atol=2e-5)
    assert got.transpose(1, 2).is_contiguous()
    _check(q, k, v, is_causal=True)


@pytest.mark.parametrize("eager", ["strict", "debug", "defer_and_fuse"])
def test_every_eager_mode(eager):
    torch.manual_seed(9)
    mask = torch.rand(4, 6) > 0.3
    with torch_tpu.eager_mode(eager):
        _check(*_qkv((2, 2, 4, 8), (2, 2, 6, 8)), attn_mask=mask)
        _check(*_qkv((2, 2, 6, 8), (2, 2, 6, 8)), is_causal=True)


def test_repeated_calls_run_prepared():
    torch.manual_seed(10)
    q, k, v = _qkv((2, 2, 6, 4), (2, 2, 6, 4))
    with torch_tpu.eager_mode("strict"):
        _check(q, k, v, is_causal=True)  # lowers and keeps both programs
        before = torch_tpu.metrics.snapshot()["prepared_runs"]
        for i in range(3):
            _check(q * (i + 2), k, v - i, is_causal=True, scale=0.3 * (i + 1))
        ran = torch_tpu.metrics.snapshot()["prepared_runs"] - before
    # Each call's forward and backward; the scale is a run-time operand, not a new program.
    assert ran >= 6, ran


def test_compiled_forward_and_backward_match_and_replay():
    """Under torch.compile the graphs hold the fused op and its backward; from the second call
    on both replay their programs (no op lowers), with new values giving new results."""
    torch._dynamo.reset()

    def attend(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sin().sum()

    compiled = torch.compile(attend, backend="tpu")
    mask = torch.rand(5, 7) > 0.3
    for call in range(3):
        torch.manual_seed(11 + call)
        q, k, v = _qkv((2, 3, 5, 4), (2, 3, 7, 4))
        cpu = [t.clone().requires_grad_() for t in (q, k, v)]
        want = attend(*cpu, mask)
        want.backward()
        tpu = [t.to("tpu").requires_grad_() for t in (q, k, v)]
        tpu_mask, seed_grad = mask.to("tpu"), torch.ones((), device="tpu")
        torch_tpu.sync()
        lowered = sum(torch_tpu.metrics.snapshot()["native_ops"].values())
        loss = compiled(*tpu, tpu_mask)
        loss.backward(seed_grad)
        torch_tpu.sync()
        if call > 0:
            assert sum(torch_tpu.metrics.snapshot()["native_ops"].values()) == lowered
        torch.testing.assert_close(loss.cpu(), want, rtol=2e-5, atol=2e-5)
        for got, expected in zip(tpu, cpu):
            torch.testing.assert_close(got.grad.cpu(), expected.grad, rtol=2e-5, atol=2e-5)
    torch._dynamo.reset()


@pytest.mark.parametrize(
    "case",
    ["dropout", "grouped_query", "math_only_context", "broadcast_query"],
)
def test_cases_the_fused_kernel_does_not_serve_keep_the_math_path(case):
    torch.manual_seed(12)
    q, k, v = _qkv((2, 4, 5, 8), (2, 4, 5, 8))
    if case == "dropout":
        with _Ops() as ops:
            out = F.scaled_dot_product_attention(
                q.to("tpu"), k.to("tpu"), v.to("tpu"), dropout_p=0.5
            )
        assert FUSED not in ops.names and out.shape == q.shape
        return
    if case == "grouped_query":
        k, v = k[:, :2], v[:, :2]
        _check(q, k, v, expect_fused=False, enable_gqa=True, is_causal=True)
    elif case == "math_only_context":
        with sdpa_kernel([SDPBackend.MATH]):
            _check(q, k, v, expect_fused=False, is_causal=True)
    else:
        _check(q[0], k, v, expect_fused=False)


def test_only_the_fused_backend_allowed_still_runs_it():
    """sdpa_kernel([OVERRIDEABLE]) runs the fused kernel; with a case it does not serve, the
    error says no backend applies (as on other devices), rather than a silent math path."""
    torch.manual_seed(13)
    q, k, v = _qkv((2, 2, 4, 4), (2, 2, 4, 4))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]):
        got = F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), is_causal=True)
        torch.testing.assert_close(got.cpu(), want, rtol=2e-5, atol=2e-5)
        with pytest.raises(RuntimeError, match="No viable backend"):
            F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), dropout_p=0.5)


def test_bad_inputs_raise_the_cpu_error_class():
    q, k, v = _qkv((2, 2, 4, 4), (2, 2, 4, 4))
    for args, kwargs in [
        ((q, k[..., :3], v), {}),  # key width differs from the query's
        ((q, k, v.double()), {}),  # mixed dtypes
    ]:
        with pytest.raises(RuntimeError) as cpu_error:
            F.scaled_dot_product_attention(*args, **kwargs)
        moved = [a.to("tpu") for a in args]
        moved_kwargs = {
            n: a.to("tpu") if isinstance(a, torch.Tensor) else a for n, a in kwargs.items()
        }
        with pytest.raises(type(cpu_error.value)):
            F.scaled_dot_product_attention(*moved, **moved_kwargs)


def test_the_fused_op_called_directly_checks_its_inputs():
    q, k, v = (t.to("tpu") for t in _qkv((2, 2, 4, 4), (2, 2, 4, 4)))
    with pytest.raises(RuntimeError, match="attn_bias must have the query's dtype"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
            q, k, v, torch.ones(4, 4, dtype=torch.bool, device="tpu")
        )
    with pytest.raises(RuntimeError, match="query must be 3-D .* or 4-D"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q[0, 0], k[0, 0], v[0, 0])
    with pytest.raises(RuntimeError, match="no dropout"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v, dropout_p=0.1)


def test_strict_mode_compiles_the_attention_programs_as_graphs(tmp_path, monkeypatch):
    """A fused attention program is many ops that XLA fuses into a few loops: it is compiled
    with the options of a fused graph (XLA:CPU's fusion emitters on, measured 1.4 ms against
    2.1 ms per forward and backward at the GPT's sizes), not those of a one-op program."""
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    q, k, v = (t.to("tpu").requires_grad_() for t in _qkv((3, 2, 11, 4), (3, 2, 13, 4)))
    with torch_tpu.eager_mode("strict"):
        out = F.scaled_dot_product_attention(q, k, v)
        out.sum().backward()
        torch.tpu.synchronize()
    dumped = {p.name.split("-", 1)[1]: p.read_text() for p in tmp_path.iterdir()}
    attention = [text for name, text in dumped.items() if "fused_attention" in name]
    assert len(attention) == 2, sorted(dumped)  # forward and backward
    assert all(text.endswith("// compiled as a graph\n") for text in attention)
