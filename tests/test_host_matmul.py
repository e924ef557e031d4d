"""Matrix products on the CPU platform run by PyTorch's CPU BLAS: float32 and float64
products (mm, addmm, linear, bmm, baddbmm, matmul) become custom calls of torch_tpu's host
matmul kernels, which XLA calls in the middle of a program, with transposed operands read
in place. Results are compared with PyTorch on the CPU in every eager mode, under
torch.compile, in a training step, on a thread other than the main one (where large
products are split over XLA's thread pool), across a restart that loads the programs from
the disk cache, and with TORCH_TPU_HOST_MATMUL=0 (XLA's own dot)."""

import json
import threading

import pytest
import torch
from fresh_process import run_python

import torch_tpu

pytestmark = pytest.mark.skipif(
    torch_tpu.platform() != "cpu", reason="host matmul kernels serve the CPU platform"
)

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}


def products(x, y, bias, bx, by):
    """Every product lowering, with operands that are transposed views."""
    return [
        x @ y,
        torch.mm(x.t().contiguous().t(), y.t().contiguous().t()),  # both transposed
        torch.addmm(bias, x, y, beta=0.5, alpha=2.0),
        torch.nn.functional.linear(x, y.t().contiguous(), bias),  # weight read transposed
        torch.bmm(bx, by),
        torch.bmm(
            bx.transpose(1, 2).contiguous().transpose(1, 2),
            by.transpose(1, 2).contiguous().transpose(1, 2),
        ),
        torch.baddbmm(bx[:, :, 2:], bx, by, beta=1.0, alpha=-1.0),
        torch.matmul(bx, y[:7, :3]),  # broadcast: bmm with an expanded right side
        x[:, ::2] @ y[::2],  # strided views
    ]


def operands(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 23, generator=g, dtype=dtype)
    y = torch.randn(23, 11, generator=g, dtype=dtype)
    bias = torch.randn(11, generator=g, dtype=dtype)
    bx = torch.randn(3, 5, 7, generator=g, dtype=dtype)
    by = torch.randn(3, 7, 5, generator=g, dtype=dtype)
    return x, y, bias, bx, by


def test_the_kernels_are_installed_on_the_cpu_platform():
    assert torch_tpu._C._host_matmul_installed()


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_products_match_cpu_in_every_eager_mode(mode, dtype):
    args = operands(dtype)
    expected = products(*args)
    with torch_tpu.eager_mode(mode):
        got = [t.cpu() for t in products(*[a.to("tpu") for a in args])]
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, **TOL[dtype])


def test_each_transposition_reads_its_operands_in_place(strict, tmp_path, monkeypatch):
    # Shapes of this test alone, so that each program is compiled (and dumped) here.
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    x, y = torch.randn(13, 29), torch.randn(29, 17)
    xt, yt = x.t().contiguous().to("tpu"), y.t().contiguous().to("tpu")
    a, b = x.to("tpu"), y.to("tpu")
    for name, lhs, rhs in [
        ("nn", a, b),
        ("tn", xt.t(), b),
        ("nt", a, yt.t()),
        ("tt", xt.t(), yt.t()),
    ]:
        before = set(tmp_path.iterdir())
        torch.testing.assert_close((lhs @ rhs).cpu(), x @ y)
        texts = [p.read_text() for p in set(tmp_path.iterdir()) - before]
        assert len(texts) == 1
        assert f'"torch_tpu.host_matmul_{name}"' in texts[0]
        assert "dot_general" not in texts[0]
        # The call reads the stored operands: no transpose's result is among its operands (a
        # transpose left behind is dead code, which XLA removes).
        lines = texts[0].splitlines()
        transposed = {ln.split("=")[0].strip() for ln in lines if "stablehlo.transpose" in ln}
        call = next(ln for ln in lines if "stablehlo.custom_call" in ln)
        operands = call.split("(", 1)[1].split(")", 1)[0].split(", ")
        assert not transposed & set(operands), call


def test_special_values_propagate_as_on_cpu(strict):
    x = torch.randn(8, 4)
    x[0, 0] = float("nan")
    x[1, 1] = float("inf")
    x[2] = -float("inf")
    y = torch.randn(4, 6)
    y[:, 3] = 0  # inf * 0: NaN, as PyTorch's BLAS gives
    torch.testing.assert_close((x.to("tpu") @ y.to("tpu")).cpu(), x @ y, equal_nan=True)


def test_a_compiled_training_step_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(24, 48), torch.nn.Tanh(), torch.nn.Linear(48, 8)
    ).double()
    twin = torch.nn.Sequential(
        torch.nn.Linear(24, 48), torch.nn.Tanh(), torch.nn.Linear(48, 8)
    ).double()
    twin.load_state_dict(model.state_dict())
    twin.to("tpu")
    x = torch.randn(16, 24, dtype=torch.float64)
    target = torch.randn(16, 8, dtype=torch.float64)

    def step(m, inp, tgt):
        loss = torch.nn.functional.mse_loss(m(inp), tgt)
        loss.backward()
        return loss

    compiled = torch.compile(step, backend="tpu")
    tol = TOL[torch.float64]
    for _ in range(2):  # the second call replays the recorded program
        model.zero_grad()
        twin.zero_grad()
        expected = step(model, x, target)
        got = compiled(twin, x.to("tpu"), target.to("tpu"))
        torch.testing.assert_close(got.cpu(), expected, **tol)
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(q.grad.cpu(), p.grad, **tol)


def test_large_products_off_the_main_thread_are_split_and_correct():
    # 64 x 512 x 2048 = 67M multiply-adds: two pieces on XLA's pool (above 32M each), rows of
    # the result in one test, columns in the other (the longer side is split).
    g = torch.Generator().manual_seed(1)
    cases = [
        (torch.randn(2048, 512, generator=g), torch.randn(512, 64, generator=g)),
        (torch.randn(64, 512, generator=g), torch.randn(512, 2048, generator=g)),
        (torch.randn(4, 512, 256, generator=g), torch.randn(4, 256, 128, generator=g)),
    ]
    results = {}

    def worker():
        with torch_tpu.eager_mode("strict"):
            for i, (a, b) in enumerate(cases):
                results[i] = torch.matmul(
                    a.to("tpu"), b.to("tpu").transpose(-1, -2).contiguous().transpose(-1, -2)
                ).cpu()

    splits = torch_tpu._C._host_matmul_split_products()
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert len(results) == len(cases)
    assert torch_tpu._C._host_matmul_split_products() - splits == len(cases)
    for i, (a, b) in enumerate(cases):
        torch.testing.assert_close(results[i], a @ b, rtol=1e-4, atol=1e-4)


def test_products_of_other_dtypes_and_empty_ones_still_work(strict):
    for dtype in (torch.bfloat16, torch.float16, torch.int32, torch.complex64):
        x = (torch.randn(6, 5) * 4).to(dtype)
        y = (torch.randn(5, 3) * 4).to(dtype)
        torch.testing.assert_close((x.to("tpu") @ y.to("tpu")).cpu(), x @ y, rtol=2e-2, atol=2e-2)
    x = torch.randn(4, 0)
    y = torch.randn(0, 3)
    torch.testing.assert_close((x.to("tpu") @ y.to("tpu")).cpu(), torch.zeros(4, 3))


SCRIPT = r"""
import json, os, torch, torch_tpu
g = torch.Generator().manual_seed(3)
x = torch.randn(64, 32, generator=g)
w = torch.randn(16, 32, generator=g)
with torch_tpu.eager_mode("strict"):
    got = torch.nn.functional.linear(x.to("tpu"), w.to("tpu")).cpu()
torch.testing.assert_close(got, x @ w.t(), rtol=1e-5, atol=1e-5)
texts = [open(os.path.join(d, f)).read() for d in [os.environ["TORCH_TPU_DUMP_PROGRAMS"]]
         for f in sorted(os.listdir(d))]
print(json.dumps({"installed": torch_tpu._C._host_matmul_installed(),
                  "compiles": torch_tpu.metrics.snapshot()["compiles"],
                  "custom_calls": sum("torch_tpu.host_matmul_nt" in t for t in texts),
                  "dots": sum("stablehlo.dot_general" in t for t in texts)}))
"""


def run_script(tmp_path, name, **env):
    dump = tmp_path / name
    dump.mkdir()
    out = run_python(
        SCRIPT,
        TORCH_TPU_DUMP_PROGRAMS=str(dump),
        TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"),
        **env,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_programs_call_the_kernel_and_load_from_the_disk_cache(tmp_path):
    first = run_script(tmp_path, "first")
    assert first["installed"] and first["custom_calls"] == 1 and first["dots"] == 0
    # A restarted process loads the program from disk (the handlers are registered before any
    # program loads) and gets the same result.
    second = run_script(tmp_path, "second")
    assert second["compiles"] == 0 and second["custom_calls"] == 1


def test_the_switch_turns_the_kernels_off(tmp_path):
    off = run_script(tmp_path, "off", TORCH_TPU_HOST_MATMUL="0")
    assert not off["installed"] and off["custom_calls"] == 0 and off["dots"] == 1


def test_switching_off_at_run_time_takes_xla_dot_for_new_and_prepared_products(
    strict, tmp_path, monkeypatch
):
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    x, y = torch.randn(9, 31), torch.randn(31, 4)
    a, b = x.to("tpu"), y.to("tpu")
    torch.testing.assert_close((a @ b).cpu(), x @ y)  # prepared with the kernel
    torch_tpu._C._set_host_matmul_enabled(False)
    try:
        for _ in range(3):  # a new program, not the prepared one
            torch.testing.assert_close((a @ b).cpu(), x @ y)
    finally:
        torch_tpu._C._set_host_matmul_enabled(True)
    texts = [p.read_text() for p in sorted(tmp_path.glob("*.mlir"))]
    assert [("host_matmul" in t, "dot_general" in t) for t in texts] == [
        (True, False),
        (False, True),
    ]


def test_a_malformed_switch_is_refused():
    out = run_python("import torch_tpu", TORCH_TPU_HOST_MATMUL="yes")
    assert out.returncode != 0
    assert "TORCH_TPU_HOST_MATMUL must be 0 or 1, got 'yes'" in out.stderr
