"""Attention on the CPU platform run by PyTorch's CPU flash-attention kernel: float32
scaled_dot_product_attention without a mask (causal or not) becomes a custom call of
torch_tpu's host attention kernels, forward and backward. Results match the CPU's within
float32's tolerance, not to the bit: PyTorch's CPU flash attention itself changes its last bits
with the thread count (1 against 2 threads on an AVX2 EPYC), and the kernel runs on XLA's
worker with a thread count of its own; other cases (a mask, other dtypes, different value width) keep the XLA program; on
XLA's worker threads the kernel must not start OpenMP teams of its own (their spinning
halved PyTorch's CPU speed in the same process)."""

import pytest
import torch
import torch.nn.functional as F
from fresh_process import run_python

import torch_tpu

pytestmark = pytest.mark.skipif(
    torch_tpu.platform() != "cpu", reason="host attention kernels serve the CPU platform"
)


def attention_and_grads(q, k, v, **kwargs):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    grad = torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(out.device)
    return (out, *torch.autograd.grad(out, (q, k, v), grad))


def dumped(tmp_path):
    return [p.read_text() for p in sorted(tmp_path.glob("*.mlir"))]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(
    "q_shape,kv_shape",
    [((2, 3, 11, 8), (2, 3, 11, 8)), ((2, 3, 5, 8), (2, 3, 9, 8)), ((1, 2, 9, 16), (1, 2, 4, 16))],
)
def test_results_match_the_cpu(mode, is_causal, q_shape, kv_shape):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(q_shape, generator=g)
    k, v = torch.randn(kv_shape, generator=g), torch.randn(kv_shape, generator=g)
    expected = attention_and_grads(q, k, v, is_causal=is_causal, scale=0.37)
    with torch_tpu.eager_mode(mode):
        got = attention_and_grads(
            q.to("tpu"), k.to("tpu"), v.to("tpu"), is_causal=is_causal, scale=0.37
        )
        got = [t.cpu() for t in got]
    for g_, e in zip(got, expected):
        torch.testing.assert_close(g_, e)


def test_programs_call_the_kernel_in_both_directions(strict, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    q, k, v = (torch.randn(3, 2, 13, 4) for _ in range(3))  # shapes of this test alone
    attention_and_grads(q.to("tpu"), k.to("tpu"), v.to("tpu"), is_causal=True)
    calls = [t for t in dumped(tmp_path) if "host_attention" in t]
    assert len(calls) == 2
    assert '"torch_tpu.host_attention_causal"' in calls[0]
    assert '"torch_tpu.host_attention_backward_causal"' in calls[1]
    assert all("exponential" not in t for t in calls)  # no softmax of XLA's left


# 3-D inputs: PyTorch's CPU takes its math path for them, not flash attention, and so do we.
CASES = ["additive mask", "boolean mask", "float64", "bfloat16", "value width differs", "3-D"]


@pytest.mark.parametrize("case", CASES)
def test_other_cases_keep_the_xla_program_and_match_cpu(strict, tmp_path, monkeypatch, case):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    g = torch.Generator().manual_seed(1)
    dtype = {"float64": torch.float64, "bfloat16": torch.bfloat16}.get(case, torch.float32)
    # A length of each case's own: PyTorch turns a boolean mask into an additive one, so the
    # two mask cases would otherwise share programs (and the second dump nothing).
    n = 7 + CASES.index(case)
    q, k = (torch.randn(2, 2, n, 6, generator=g).to(dtype) for _ in range(2))
    v = torch.randn(2, 2, n, 5 if case == "value width differs" else 6, generator=g).to(dtype)
    if case == "3-D":
        q, k, v = (t.flatten(0, 1) for t in (q, k, v))
    kwargs = {}
    if case == "additive mask":
        kwargs["attn_mask"] = torch.randn(n, n, generator=g)
    if case == "boolean mask":
        kwargs["attn_mask"] = torch.rand(n, n, generator=g) > 0.3
    expected = attention_and_grads(q, k, v, **kwargs)
    device_kwargs = {name: t.to("tpu") for name, t in kwargs.items()}
    got = attention_and_grads(q.to("tpu"), k.to("tpu"), v.to("tpu"), **device_kwargs)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    for g_, e in zip(got, expected):
        torch.testing.assert_close(g_.cpu(), e, **tol)
    texts = dumped(tmp_path)
    assert texts and not any("host_attention" in t for t in texts)


def test_switching_host_kernels_off_takes_the_xla_program(strict, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    q, k, v = (torch.randn(2, 5, 3, 4) for _ in range(3))
    expected = attention_and_grads(q, k, v)
    torch_tpu._C._set_host_matmul_enabled(False)
    try:
        got = attention_and_grads(q.to("tpu"), k.to("tpu"), v.to("tpu"))
    finally:
        torch_tpu._C._set_host_matmul_enabled(True)
    for g_, e in zip(got, expected):
        torch.testing.assert_close(g_.cpu(), e)
    texts = dumped(tmp_path)
    assert len(texts) == 2 and not any("host_attention" in t for t in texts)


def test_compiled_gpt_attention_replays_with_the_kernel():
    q, k, v = (torch.randn(4, 2, 8, 4) for _ in range(3))
    expected = attention_and_grads(q, k, v, is_causal=True)
    step = torch.compile(
        lambda a, b, c: attention_and_grads(a, b, c, is_causal=True), backend="tpu"
    )
    for _ in range(3):
        got = step(q.to("tpu"), k.to("tpu"), v.to("tpu"))
        for g_, e in zip(got, expected):
            torch.testing.assert_close(g_.cpu(), e)


def test_the_kernel_starts_no_openmp_team_on_xla_workers():
    # Each XLA worker that ran a parallel ATen kernel would hold an OpenMP team of its own:
    # threads that spin after every call. The first version did, and PyTorch's CPU eager GPT
    # step in the same process ran 2.2x slower. Threads are counted after the main thread's
    # own team exists (a CPU op), then after attention ran on XLA's workers many times. Only
    # threads named as XLA's workers count: an OpenMP thread inherits its creator's name, and
    # other threads (compiles, autograd) come and go.
    code = """
import os, threading, torch, torch_tpu
import torch.nn.functional as F
def name(task):
    try:
        return open(f"/proc/self/task/{task}/comm").read()
    except FileNotFoundError:  # the thread ended since the listing
        return ""
def threads():  # XLA's workers, and OpenMP threads they start (which inherit their name)
    return sum(name(t).startswith("tf_XLA") for t in os.listdir("/proc/self/task"))
torch.randn(256, 256) @ torch.randn(256, 256)  # the main thread's team
q, k, v = (torch.randn(16, 4, 64, 16, device="tpu", requires_grad=True) for _ in range(3))
def products():  # programs on XLA's workers, without attention
    for _ in range(20):
        (q @ k.transpose(-1, -2) @ v).sum().backward()
    torch.tpu.synchronize()
def work():
    for _ in range(20):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    torch.tpu.synchronize()
products()
threading.Thread(target=products).start()
products()
before = threads()
work()
worker = threading.Thread(target=work)
worker.start(); worker.join()
print(before, threads())
"""
    out = run_python(code, TORCH_TPU_EAGER_MODE="defer_and_fuse")
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split()[-2:])
    assert before >= 1, "no XLA worker thread found by name"
    assert after <= before, (before, after)


def projected_heads(batch, length, heads, width, device, seed=0):
    """q, k, v as a model's attention makes them: one projection's output, split and viewed
    as heads ([batch, length, heads, E] in memory, transposed to [batch, heads, length, E])."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(batch, length, 3 * heads * width, generator=g).to(device)
    q, k, v = qkv.split(heads * width, dim=2)
    return [t.view(batch, length, heads, width).transpose(1, 2) for t in (q, k, v)]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_heads_viewed_from_a_projection_take_the_kernel_in_their_layout(
    mode, is_causal, tmp_path, monkeypatch
):
    # The kernel reads q, k, v and gives out and the gradients in the [batch, length, heads,
    # E] order they have in memory, so the program needs no transposes around it.
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    shape = (3, 6 + is_causal + 2 * (mode == "strict"), 2, 4)  # programs of this test alone
    expected = attention_and_grads(*projected_heads(*shape, "cpu"), is_causal=is_causal)
    with torch_tpu.eager_mode(mode):
        got = attention_and_grads(*projected_heads(*shape, "tpu"), is_causal=is_causal)
        got = [t.cpu() for t in got]
    for g_, e in zip(got, expected):
        assert g_.shape == e.shape and g_.stride() == e.stride()
        assert torch.equal(g_, e)
    causal = "_causal" if is_causal else ""
    texts = "".join(dumped(tmp_path))
    assert f'"torch_tpu.host_attention{causal}_heads_second"' in texts
    assert f'"torch_tpu.host_attention_backward{causal}_heads_second"' in texts


def test_compiled_projection_attention_matches_the_cpu():
    def step(qkv):
        q, k, v = qkv.split(8, dim=2)
        q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(2, 5, 8)

    qkv = torch.randn(2, 5, 24)
    expected_qkv = qkv.clone().requires_grad_()
    expected = step(expected_qkv)
    expected.backward(torch.ones_like(expected))
    compiled = torch.compile(step, backend="tpu")
    for _ in range(3):
        got_qkv = qkv.to("tpu").requires_grad_()
        got = compiled(got_qkv)
        got.backward(torch.ones_like(got))
        torch.testing.assert_close(got.cpu(), expected)
        torch.testing.assert_close(got_qkv.grad.cpu(), expected_qkv.grad)
