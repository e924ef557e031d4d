"""torch_tpu.kernels.jax_op: JAX functions and Pallas kernels as ops on tpu tensors.

Results are compared with the same JAX function run by JAX itself on the CPU (the op's
CPU kernel: JAX on CPU tensors) and, where one exists, with the PyTorch equivalent;
gradients with jax.grad and with PyTorch's autograd."""

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu

jax = pytest.importorskip("jax", reason="the [jax] extra is installed by the test set-up")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from torch_tpu.kernels import UnsupportedKernelError, jax_op  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import pallas_kernels  # noqa: E402


def jax_rms(x, w, eps: float = 1e-6):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w


rms = jax_op("tests::rms", jax_rms)


def torch_rms(x, w, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


@jax_op("tests::stats")
def stats(x) -> tuple[jax.Array, jax.Array, jax.Array]:
    return x.max(-1), jnp.argmax(x, -1), jnp.cumsum(x, 0)


@pytest.fixture(params=["strict", "defer_and_fuse"])
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param


def _delta(before, after, key):
    return after[key] - before[key]


def test_matches_jax_and_torch_on_views(mode, native):
    base = torch.randn(6, 16)
    w = torch.randn(8)
    x = base[1:5, ::2]  # an offset, strided view: the kernel sees a dense array
    out = rms(base.to("tpu")[1:5, ::2], w.to("tpu"), 1e-5)
    assert out.shape == (4, 8) and out.dtype == torch.float32 and out.device.type == "tpu"
    torch.testing.assert_close(out.cpu(), rms(x, w, 1e-5), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(out.cpu(), torch_rms(x, w, 1e-5))


def test_several_results_integer_results_and_dtypes(mode, native):
    x = torch.randn(5, 7)
    top, where, running = stats(x.to("tpu").t())
    ref = [
        np.asarray(r)
        for r in (
            jnp.max(x.t().numpy(), -1),
            jnp.argmax(x.t().numpy(), -1),
            jnp.cumsum(x.t().numpy(), 0),
        )
    ]
    assert where.dtype == torch.int32  # JAX's own dtype (jax_enable_x64 is off)
    np.testing.assert_allclose(top.cpu().numpy(), ref[0], rtol=1e-6)
    np.testing.assert_array_equal(where.cpu().numpy(), ref[1])
    np.testing.assert_allclose(running.cpu().numpy(), ref[2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64, torch.bool])
def test_input_dtypes(dtype, native):
    @jax_op("tests::double")
    def double(x):
        return x + x if x.dtype != jnp.bool_ else ~x

    x = (torch.randn(3, 4) * 10).to(dtype)
    if dtype == torch.int64:  # JAX's default: 32 bits, said once per signature
        with pytest.warns(UserWarning, match="computes torch.int64 in 32 bits"):
            out = double(x.to("tpu"))
        assert out.dtype == torch.int32
    else:
        out = double(x.to("tpu"))
    want = double(x)
    assert out.dtype == want.dtype
    torch.testing.assert_close(out.cpu(), want, rtol=0, atol=0)


def test_fuses_into_one_program(native):
    x = torch.randn(8, 8, device="tpu")
    w = torch.randn(8, device="tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        rms(rms(x * 2, w), w).sum().cpu()  # compiles once
        before = torch_tpu.metrics.snapshot()
        y = rms(rms(x * 2, w), w).sum().cpu()
        after = torch_tpu.metrics.snapshot()
    assert _delta(before, after, "fused_graphs") == 1
    assert _delta(before, after, "compiles") == 0
    torch.testing.assert_close(y, torch_rms(torch_rms(x.cpu() * 2, w.cpu()), w.cpu()).sum())


def test_gradients_match_jax_and_torch(mode, native):
    x = torch.randn(4, 8)
    w = torch.randn(8)
    xt = x.to("tpu").requires_grad_()
    wt = w.to("tpu").requires_grad_()
    (rms(xt, wt) ** 2).sum().backward()
    gx, gw = jax.grad(lambda a, b: jnp.sum(jax_rms(a, b) ** 2), (0, 1))(x.numpy(), w.numpy())
    np.testing.assert_allclose(xt.grad.cpu().numpy(), np.asarray(gx), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(wt.grad.cpu().numpy(), np.asarray(gw), rtol=1e-4, atol=1e-5)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    (torch_rms(xc, wc) ** 2).sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(wt.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-5)


def test_backward_keeps_jax_residuals_instead_of_recomputing(native):
    calls = []

    @jax_op("tests::counted")
    def counted(x):
        calls.append(1)  # once per trace of the function, by JAX
        return jnp.sin(x) * x

    x = torch.randn(16, device="tpu", requires_grad=True)
    counted(x).sum().backward()
    traced = len(calls)
    x.grad = None
    counted(x).sum().backward()
    assert len(calls) == traced  # no new trace: the lowerings are cached per signature
    want = torch.cos(x.detach().cpu()) * x.detach().cpu() + torch.sin(x.detach().cpu())
    torch.testing.assert_close(x.grad.cpu(), want)
    schema = str(torch.ops.tests.counted_jax_fwd.default._schema)
    assert schema.endswith("-> Tensor[]")  # results and residuals come from one forward


def test_opcheck():
    x = torch.randn(4, 8, device="tpu")
    w = torch.randn(8, device="tpu")
    torch.library.opcheck(rms, (x, w), {"eps": 1e-5})
    torch.library.opcheck(stats, (x,))


def test_compiled_forward_and_backward_match_eager(native):
    x = torch.randn(4, 8)
    w = torch.randn(8)

    def loss(a, b):
        return (rms(a * 2, b).relu() ** 2).sum()

    results = []
    for compiled in (False, True):
        fn = torch.compile(loss, backend="tpu", fullgraph=True) if compiled else loss
        a = x.to("tpu").requires_grad_()
        b = w.to("tpu").requires_grad_()
        value = fn(a, b)
        value.backward()
        results.append((value.detach().cpu(), a.grad.cpu(), b.grad.cpu()))
    for eager, compiled in zip(*results):
        torch.testing.assert_close(compiled, eager)


def test_static_arguments_lower_once_per_value(native):
    @jax_op("tests::pad_to")
    def pad_to(x, widths: tuple[int, ...], value: float = 0.0, mode: str = "constant"):
        widths = [(0, w) for w in widths]
        if mode == "constant":
            return jnp.pad(x, widths, constant_values=value)
        return jnp.pad(x, widths, mode=mode)

    x = torch.arange(6.0).reshape(2, 3)
    for widths, value in [((1, 2), 0.0), ((1, 2), 3.5), ((0, 1), 3.5)]:
        out = pad_to(x.to("tpu"), widths, value)
        torch.testing.assert_close(
            out.cpu(), torch.nn.functional.pad(x, (0, widths[1], 0, widths[0]), value=value)
        )
    reflected = pad_to(x.to("tpu"), (1, 2), mode="reflect")
    torch.testing.assert_close(reflected.cpu(), pad_to(x, (1, 2), mode="reflect"))


def test_donated_argument_is_updated_in_place_through_a_view(mode, native):
    @jax_op("tests::write_row", donate_argnums=(0,))
    def write_row(cache, row, position: int):
        return cache.at[position].set(row)

    storage = torch.zeros(3, 4, 5)
    cache = storage.to("tpu")
    view = cache[1]  # a view: the write lands in the base storage
    result = write_row(view, torch.ones(5, device="tpu") * 7, 2)
    assert result is None
    storage[1, 2] = 7
    torch.testing.assert_close(cache.cpu(), storage)
    assert "(a!)" in str(torch.ops.tests.write_row.default._schema)


def test_pallas_rms_norm_with_its_backward_kernel(native):
    x = torch.randn(2, 16, 32)
    w = torch.randn(32)
    xt = x.to("tpu").requires_grad_()
    wt = w.to("tpu").requires_grad_()
    out = pallas_kernels.rms_norm(xt, wt, 1e-6)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    want = torch.nn.functional.rms_norm(xc, (32,), wc, eps=1e-6)
    torch.testing.assert_close(out.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    g = torch.randn_like(x)
    out.backward(g.to("tpu"))
    want.backward(g)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wt.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("compiled", [False, True])
def test_pallas_flash_attention_matches_sdpa(compiled, native):
    q, k, v = (torch.randn(2, 2, 128, 16) for _ in range(3))
    attend = pallas_kernels.flash_attention
    if compiled:
        attend = torch.compile(attend, backend="tpu")
    qt, kt, vt = (t.to("tpu").requires_grad_() for t in (q, k, v))
    out = attend(qt, kt, vt)
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
    torch.testing.assert_close(out.detach().cpu(), want.detach(), rtol=1e-4, atol=1e-5)
    g = torch.randn_like(q)
    out.backward(g.to("tpu"))
    want.backward(g)
    for ours, theirs in ((qt, qc), (kt, kc), (vt, vc)):
        torch.testing.assert_close(ours.grad.cpu(), theirs.grad, rtol=1e-4, atol=1e-4)


def test_pallas_kernel_without_gradient_says_what_to_do():
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3

    @jax_op("tests::triple")
    def triple(x):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = torch.randn(8, device="tpu")
    torch.testing.assert_close(triple(x).cpu(), x.cpu() * 3)
    with pytest.raises(RuntimeError, match="custom_vjp, or pass backward="):
        triple(x.requires_grad_())


def test_linear_algebra_lowers_without_lapack(native):
    @jax_op("tests::cholesky")
    def cholesky(a):
        return jnp.linalg.cholesky(a)

    m = torch.randn(5, 5, dtype=torch.float32)
    spd = m @ m.T + 5 * torch.eye(5)
    torch.testing.assert_close(
        cholesky(spd.to("tpu")).cpu(), torch.linalg.cholesky(spd), rtol=1e-4, atol=1e-5
    )


def test_unrunnable_custom_calls_fail_before_compiling():
    @jax_op("tests::lu")
    def lu(a):
        return jax.scipy.linalg.lu_factor(a)[0]

    @jax_op("tests::callback")
    def callback(x):
        return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    a = torch.randn(4, 4, device="tpu")
    before = torch_tpu.metrics.snapshot()["compiles"]
    with pytest.raises(UnsupportedKernelError, match="LAPACK|LuDecomposition"):
        lu(a)
    with pytest.raises(UnsupportedKernelError, match="call back into Python"):
        callback(a)
    assert torch_tpu.metrics.snapshot()["compiles"] == before


def test_bad_definitions_and_calls_raise_clearly():
    with pytest.raises(ValueError, match="namespace::op"):
        jax_op("no_namespace", lambda x: x)
    with pytest.raises(TypeError, match="static parameter 'n'"):
        jax_op("tests::bad_static", lambda x, n: x, static_argnames=("n",))
    with pytest.raises(ValueError, match="donated parameter 1 is static"):

        @jax_op("tests::bad_donate", donate_argnums=(1,))
        def bad_donate(x, n: int):
            return x

    @jax_op("tests::two_results")
    def two_results(x):  # returns a tuple, but the schema says one result
        return x, x

    with pytest.raises(TypeError, match=r"annotate the results.*tuple\[jax.Array, jax.Array\]"):
        two_results(torch.ones(2, device="tpu"))
    with pytest.raises(RuntimeError, match="same device"):
        rms(torch.ones(2, 4, device="tpu"), torch.ones(4))  # a CPU weight
    with pytest.raises(NotImplementedError, match="sharded kernels"):
        jax_op("tests::sharded", lambda x: x, mesh=object())


def test_torchtpu_name_and_import_without_jax():
    from torch.tpu.pallas import jax_op as torchtpu_jax_op

    assert torchtpu_jax_op is jax_op is torch.tpu.pallas.jax_op
    script = (
        "import sys; sys.modules['jax'] = None\n"  # as if JAX were not installed
        "import torch, torch_tpu\n"
        "x = torch.ones(3, device='tpu'); assert (x + x).cpu().sum() == 6\n"
        "from torch_tpu.kernels import jax_op\n"
        "try:\n"
        "    jax_op('nojax::f', lambda x: x)\n"
        "except ImportError as e:\n"
        "    print('ImportError:', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'torch_tpu[jax]'" in done.stdout


def test_torchtpu_private_launch_names_for_helion(native):
    """Helion's Pallas backend wraps each kernel in TorchTPU's JaxCallable and, on later
    calls, launches it with call_custom_kernel; in-place outputs are input_output_aliases."""
    from torch_tpu._internal.pallas import tpu_torch_pallas
    from torch_tpu._internal.pallas.pallas import (
        JaxCallable,
        _get_kernel_invocation_key,
        jax_placeholder,
    )

    def body(x_ref, y_ref, acc_ref, out_ref, acc_out_ref):
        out_ref[...] = x_ref[...] + y_ref[...]
        acc_out_ref[...] = acc_ref[...] + out_ref[...]

    def kernel(x, y, acc):
        shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype)] * 2
        return pl.pallas_call(body, out_shape=shapes)(x, y, acc)

    x, y = torch.randn(64), torch.randn(64)
    acc = torch.ones(64, device="tpu")
    assert jax_placeholder(torch.empty(3, 4, device="meta")).shape == (3, 4)
    call = JaxCallable(
        name="add_acc", jit_fn=jax.jit(kernel), trace_key="add_acc", input_output_aliases={2: 1}
    )
    out, acc_out = call(x.to("tpu"), y.to("tpu"), acc)
    torch.testing.assert_close(out.cpu(), x + y)
    assert acc_out is acc  # written in place into the aliased input
    torch.testing.assert_close(acc.cpu(), 1 + x + y)
    key = _get_kernel_invocation_key("add_acc", (x, y, acc), {}, ())
    fingerprint = call.kernel_key_to_mlir_fingerprint[key]
    shapes, tree = call.output_shapes[key]
    assert [tuple(s.shape) for s in shapes] == [(64,), (64,)]
    again = tpu_torch_pallas.call_custom_kernel(
        "add_acc",
        fingerprint,
        inputs=[x.to("tpu"), y.to("tpu"), acc],
        output_shapes=shapes,
        donate_argnums=[2],
        device_assignment=[],
    )
    torch.testing.assert_close(again[1].cpu(), 1 + 2 * (x + y))
    with pytest.raises(RuntimeError, match="run only on a TPU"):
        from torch_tpu._internal.utils.hardware import get_tpu_device_name

        get_tpu_device_name()


def test_mosaic_only_kernel_fails_clearly_off_a_tpu():
    from jax.experimental.pallas import tpu as pltpu

    if torch_tpu.platform() == "tpu":
        pytest.skip("on a TPU this kernel runs")

    @jax_op("tests::core_kernel")
    def core_kernel(x):
        def body(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1

        mesh = pltpu.create_tensorcore_mesh("core", num_cores=1)
        return pl.kernel(body, jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh)(x)

    with pytest.raises(UnsupportedKernelError, match="lowers only to Mosaic"):
        core_kernel(torch.ones(8, 128, device="tpu"))


def test_complex_gradients_follow_pytorch(native):
    @jax_op("tests::cmul")
    def cmul(x, c):
        return x * c

    x = torch.tensor([1 + 2j, -0.5 + 1j], dtype=torch.complex64)
    c = torch.tensor([3 + 4j, 2 - 1j], dtype=torch.complex64)
    xt, ct = x.to("tpu").requires_grad_(), c.to("tpu").requires_grad_()
    (cmul(xt, ct).abs() ** 2).sum().backward()
    xc, cc = x.clone().requires_grad_(), c.clone().requires_grad_()
    ((xc * cc).abs() ** 2).sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    torch.testing.assert_close(ct.grad.cpu(), cc.grad)


def test_static_floats_are_told_apart_by_their_bits(native):
    @jax_op("tests::copysign")
    def copysign(x, s: float):
        return jnp.copysign(x, s)

    x = torch.ones(2, device="tpu")
    assert copysign(x, -0.0).cpu().tolist() == [-1.0, -1.0]
    assert copysign(x, 0.0).cpu().tolist() == [1.0, 1.0]  # not the -0.0 program again


def test_a_cpu_scalar_first_still_gives_tpu_results(native):
    @jax_op("tests::scale")
    def scale(s, x):
        return s * x

    x = torch.randn(4, device="tpu", requires_grad=True)
    s = torch.tensor(2.0)
    torch.library.opcheck(scale, (s, x.detach()))
    compiled = torch.compile(lambda s, x: scale(s, x).sum(), backend="tpu")
    value = compiled(s, x)
    value.backward()
    assert value.device.type == "tpu"
    torch.testing.assert_close(x.grad.cpu(), torch.full((4,), 2.0))


def test_donated_arguments_refuse_gradients():
    @jax_op("tests::add_into", donate_argnums=(0,))
    def add_into(acc, x):
        return acc + x

    acc = torch.zeros(3, device="tpu", requires_grad=True)
    with pytest.raises(RuntimeError, match="in place .donate_argnums. and has no gradient"):
        add_into(acc, torch.ones(3, device="tpu"))
    with torch.no_grad():
        add_into(acc, torch.ones(3, device="tpu"))
    assert acc.detach().cpu().tolist() == [1.0, 1.0, 1.0]


def test_a_kernel_that_does_not_compile_names_itself_and_spares_the_graph(monkeypatch, tmp_path):
    from torch_tpu.kernels import _lowering

    # A deliberately invalid program: not among the programs a run dumps for checking
    # (scripts/test_accelerator_path.sh compiles those for a TPU and a GPU).
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))

    @jax_op("tests::broken")
    def broken(x):
        return x + 1

    real = _lowering.lower

    def bad_lowering(fn, avals, name):
        lowered = real(fn, avals, name)
        callee = torch_tpu._C._kernels.Callee(
            lowered.callee.name,
            lowered.callee.text.replace("stablehlo.add", "stablehlo.no_such_op"),
        )
        return _lowering.Lowered(callee, lowered.input_dtypes, lowered.outputs, lowered.out_tree)

    monkeypatch.setattr(_lowering, "lower", bad_lowering)
    x = torch.ones(3, device="tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        pending = x * 5
        with pytest.raises(RuntimeError, match="tests::broken: the kernel does not compile"):
            broken(x)
        assert pending.cpu().tolist() == [5.0, 5.0, 5.0]


def test_string_annotations_resolve_one_by_one():
    namespace = {}
    exec(
        "from __future__ import annotations\n"
        "import jax.numpy as jnp\n"
        "def f(x: Unknown, n: int = 2) -> tuple[jnp.ndarray, jnp.ndarray]:\n"
        "    return x * n, x + n\n",
        namespace,
    )
    op = jax_op("tests::annotated", namespace["f"])
    assert "int n=2" in str(torch.ops.tests.annotated.default._schema)
    a, b = op(torch.ones(2, device="tpu"), 3)
    assert a.cpu().tolist() == [3.0, 3.0] and b.cpu().tolist() == [4.0, 4.0]


@jax_op("tests::scale_to_float8")
def scale_to_float8(x, scale):
    return (x.astype(jnp.float32) * scale).astype(jnp.float8_e4m3fn)


def test_float8_arrays_in_and_out_of_a_kernel():
    """tpu computes 8-bit floats in float32; a kernel still sees and returns float8 arrays."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 4, generator=g).to(torch.float8_e4m3fn)
    scale = torch.tensor([3.0, 0.5, 100.0, 1e-3])
    got = scale_to_float8(x.to("tpu"), scale.to("tpu"))
    assert got.dtype == torch.float8_e4m3fn and got.device.type == "tpu"
    expected = scale_to_float8(x, scale)  # JAX itself, on the CPU
    assert torch.equal(got.cpu().view(torch.uint8), expected.view(torch.uint8))
    assert torch.equal(
        expected.view(torch.uint8), (x.float() * scale).to(x.dtype).view(torch.uint8)
    )
