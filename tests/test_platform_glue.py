"""What programs that never name torch_tpu rely on: torch loads it (the torch.backends
entry point), graphs bound for Inductor run on the tpu backend, FlexAttention admits
tpu tensors, fused Adam/AdamW, torch._assert_async and torch.polar run natively, and the
device reports a name, memory capacity and peak FLOP/s that TorchTitan can use."""

import json
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu._runtime import peak_flops

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _torch_tpu_autoload as _autoload  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        cwd="/",
    )


# --- autoload ---------------------------------------------------------------------------


def test_import_torch_alone_gives_the_tpu_device():
    result = _python(
        "import sys, torch; x = torch.arange(4, device='tpu') * 2; "
        "print('torch_tpu' in sys.modules, x.device, x.cpu().tolist())"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "tpu:0", "[0,", "2,", "4,", "6]"]


@pytest.mark.parametrize("switch", ["TORCH_TPU_AUTOLOAD", "TORCH_DEVICE_BACKEND_AUTOLOAD"])
def test_autoload_can_be_switched_off(switch):
    result = _python("import sys, torch; print('torch_tpu' in sys.modules)", **{switch: "0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_a_backend_that_cannot_start_leaves_torch_importable():
    result = _python(
        "import torch; print(torch.ones(2).sum().item())",
        TORCH_TPU_PJRT_PLUGIN="/nonexistent/pjrt_plugin.so",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2.0"
    assert "torch_tpu is installed but could not start" in result.stderr


def test_torchruns_launcher_is_recognized(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(sys, "orig_argv", ["python", "train.py"])
    monkeypatch.setattr(sys, "argv", ["/usr/bin/torchrun"])
    assert _autoload._is_torchrun_launcher()
    # python -m torch.distributed.run: argv[0] is still "-m" while torch is imported
    monkeypatch.setattr(sys, "argv", ["-m"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "torch.distributed.run", "t.py"])
    assert _autoload._is_torchrun_launcher()
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pytest"])
    assert not _autoload._is_torchrun_launcher()
    monkeypatch.setattr(sys, "argv", ["/usr/bin/torchrun"])
    monkeypatch.setenv("LOCAL_RANK", "0")  # a worker torchrun started
    assert not _autoload._is_torchrun_launcher()


@pytest.mark.parametrize("launcher", ["torchrun", "-m"])
def test_torchruns_launcher_does_not_load_torch_tpu(launcher):
    """The launcher's own imports, as -X importtime lists them (the worker is `true`)."""
    start = (
        ["torchrun"] if launcher == "torchrun" else [sys.executable, "-m", "torch.distributed.run"]
    )
    result = subprocess.run(
        [*start, "--nproc_per_node=1", "--no-python", "true"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported = [
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line
    ]
    assert "torch.distributed.run" in imported or "torch" in imported  # the profile is there
    assert not [name for name in imported if name.startswith("torch_tpu")]


def test_a_lookup_without_import_does_not_use_up_the_hooks():
    result = _python(
        "import importlib.util, torch; importlib.util.find_spec('torchtitan.tools.utils'); "
        "import torchtitan.tools.utils as u; print(getattr(u.get_peak_flops, '_torch_tpu', 0))"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "True"


# --- torch.compile with the default backend ----------------------------------------------


def test_default_backend_compiles_tpu_graphs_with_the_tpu_backend():
    torch._dynamo.reset()
    fn = torch.compile(lambda x: (x.sin() + 1).sum(dim=0))
    x = torch.randn(5, 3)
    before = torch_tpu.metrics.snapshot()["executions"]
    torch.testing.assert_close(fn(x.to("tpu")).cpu(), fn(x), rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["executions"] > before


def test_a_graph_that_only_creates_tpu_tensors_runs_on_tpu():
    torch._dynamo.reset()
    fn = torch.compile(lambda n: torch.arange(n, device="tpu").float().pow(2).sum())
    assert fn(6).item() == 55.0


# --- FlexAttention -----------------------------------------------------------------------


def test_flex_attention_matches_causal_sdpa_forward_and_backward(native):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 128, 16, requires_grad=True) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected.square().sum().backward()
    qt, kt, vt = (t.detach().to("tpu").requires_grad_() for t in (q, k, v))
    mask = torch.compile(create_block_mask)(lambda b, h, i, j: i >= j, 2, 1, 128, 128, device="tpu")
    out = torch.compile(flex_attention)(qt, kt, vt, block_mask=mask)
    out.square().sum().backward()
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)
    for tpu, cpu in ((qt, q), (kt, k), (vt, v)):
        torch.testing.assert_close(tpu.grad.cpu(), cpu.grad, rtol=1e-4, atol=1e-5)


def test_flex_attention_still_rejects_unsupported_devices_as_before():
    from torch.nn.attention import flex_attention as module

    assert module._validate_device._torch_tpu  # widened for tpu, and only for tpu
    meta = torch.empty(1, 1, 16, 8, device="meta")
    with pytest.raises(ValueError, match="FlexAttention is only supported"):
        module._validate_device(meta, meta, meta)


# --- fused Adam / AdamW ------------------------------------------------------------------


@pytest.mark.parametrize("optimizer", [torch.optim.Adam, torch.optim.AdamW])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"weight_decay": 0.1},
        {"amsgrad": True, "weight_decay": 0.01},
        {"maximize": True},
        {"lr": "tensor"},
    ],
    ids=["plain", "weight_decay", "amsgrad", "maximize", "tensor_lr"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_adam_matches_the_cpu_kernel(native, optimizer, options, dtype):
    torch.manual_seed(0)
    params = [torch.randn(5, 3, dtype=dtype), torch.randn(7, dtype=dtype)]
    cpu = [p.clone().requires_grad_() for p in params]
    tpu = [p.to("tpu").requires_grad_() for p in params]

    def make(group):
        kwargs = dict(options)
        if kwargs.get("lr") == "tensor":
            kwargs["lr"] = torch.tensor(0.01)
        return optimizer(group, fused=True, **kwargs)

    on_cpu, on_tpu = make(cpu), make(tpu)
    for _ in range(3):
        grads = [torch.randn_like(p) for p in params]
        for p, g in zip(cpu, grads):
            p.grad = g.clone()
        for p, g in zip(tpu, grads):
            p.grad = g.to("tpu")
        on_cpu.step()
        on_tpu.step()
    for t, c in zip(tpu, cpu):
        torch.testing.assert_close(t.detach().cpu(), c.detach(), rtol=1e-5, atol=1e-6)
    for t, c in zip(on_tpu.state.values(), on_cpu.state.values()):
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if key in c:
                torch.testing.assert_close(t[key].cpu(), c[key], rtol=1e-5, atol=1e-7, msg=key)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"momentum": 0.9},
        {"momentum": 0.9, "dampening": 0.2, "weight_decay": 0.1},
        {"momentum": 0.9, "nesterov": True},
        {"momentum": 0.5, "maximize": True},
        {"lr": "tensor", "momentum": 0.9},
    ],
    ids=["plain", "momentum", "dampening_decay", "nesterov", "maximize", "tensor_lr"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_sgd_matches_the_cpu_kernel(native, options, dtype):
    torch.manual_seed(0)
    params = [torch.randn(5, 3, dtype=dtype), torch.randn(7, dtype=dtype)]
    cpu = [p.clone().requires_grad_() for p in params]
    tpu = [p.to("tpu").requires_grad_() for p in params]

    def make(group):
        kwargs = {"lr": 0.05, **options}
        if kwargs["lr"] == "tensor":
            kwargs["lr"] = torch.tensor(0.05)
        return torch.optim.SGD(group, fused=True, **kwargs)

    on_cpu, on_tpu = make(cpu), make(tpu)
    for _ in range(3):
        grads = [torch.randn_like(p) for p in params]
        for p, g in zip(cpu, grads):
            p.grad = g.clone()
        for p, g in zip(tpu, grads):
            p.grad = g.to("tpu")
        on_cpu.step()
        on_tpu.step()
    for t, c in zip(tpu, cpu):
        torch.testing.assert_close(t.detach().cpu(), c.detach(), rtol=1e-5, atol=1e-6)
    for t, c in zip(on_tpu.state.values(), on_cpu.state.values()):
        if c.get("momentum_buffer") is not None:
            torch.testing.assert_close(t["momentum_buffer"].cpu(), c["momentum_buffer"])


@pytest.mark.parametrize("found", [0.0, 1.0])
def test_fused_sgd_unscales_gradients_and_skips_on_found_inf(native, found):
    torch.manual_seed(2)
    tensors = {name: [torch.randn(6), torch.randn(2, 3)] for name in ("p", "g", "b")}
    results = {}
    for device in ("cpu", "tpu"):
        t = {name: [x.clone().to(device) for x in xs] for name, xs in tensors.items()}
        torch._fused_sgd_(
            t["p"], t["g"], t["b"], weight_decay=0.1, momentum=0.9, lr=0.01, dampening=0.0,
            nesterov=False, maximize=False, is_first_step=False,
            grad_scale=torch.tensor(4.0, device=device),
            found_inf=torch.tensor(found, device=device),
        )  # fmt: skip
        results[device] = {name: [x.cpu() for x in xs] for name, xs in t.items()}
    for name in ("p", "g", "b"):
        for tpu, cpu in zip(results["tpu"][name], results["cpu"][name]):
            torch.testing.assert_close(tpu, cpu, msg=name)


@pytest.mark.parametrize(
    "options",
    [{}, {"lr_decay": 0.1, "weight_decay": 0.05}, {"maximize": True, "eps": 1e-3},
     {"lr": "tensor", "initial_accumulator_value": 0.5}],
    ids=["plain", "decay", "maximize", "tensor_lr"],
)  # fmt: skip
def test_fused_adagrad_matches_the_cpu_kernel(native, options):
    torch.manual_seed(3)
    params = [torch.randn(5, 3), torch.randn(7)]
    cpu = [p.clone().requires_grad_() for p in params]
    tpu = [p.to("tpu").requires_grad_() for p in params]

    def make(group):
        kwargs = {"lr": 0.05, **options}
        if kwargs["lr"] == "tensor":
            kwargs["lr"] = torch.tensor(0.05)
        return torch.optim.Adagrad(group, fused=True, **kwargs)

    on_cpu, on_tpu = make(cpu), make(tpu)
    for _ in range(3):
        grads = [torch.randn_like(p) for p in params]
        for p, g in zip(cpu, grads):
            p.grad = g.clone()
        for p, g in zip(tpu, grads):
            p.grad = g.to("tpu")
        on_cpu.step()
        on_tpu.step()
    for t, c in zip(tpu, cpu):
        torch.testing.assert_close(t.detach().cpu(), c.detach(), rtol=1e-5, atol=1e-6)
    for t, c in zip(on_tpu.state.values(), on_cpu.state.values()):
        torch.testing.assert_close(t["sum"].cpu(), c["sum"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("found", [0.0, 1.0])
def test_fused_adagrad_unscales_gradients_and_skips_on_found_inf(native, found):
    torch.manual_seed(4)
    tensors = {name: [torch.randn(6), torch.randn(2, 3)] for name in ("p", "g")}
    tensors["s"] = [torch.rand(6), torch.rand(2, 3)]
    results = {}
    for device in ("cpu", "tpu"):
        t = {name: [x.clone().to(device) for x in xs] for name, xs in tensors.items()}
        steps = [torch.tensor(3.0, device=device) for _ in range(2)]
        torch._fused_adagrad_(
            t["p"], t["g"], t["s"], steps, lr=0.1, lr_decay=0.01, weight_decay=0.1, eps=1e-10,
            maximize=False, grad_scale=torch.tensor(4.0, device=device),
            found_inf=torch.tensor(found, device=device),
        )  # fmt: skip
        results[device] = {name: [x.cpu() for x in xs] for name, xs in t.items()}
    for name in ("p", "g", "s"):
        for tpu, cpu in zip(results["tpu"][name], results["cpu"][name]):
            torch.testing.assert_close(tpu, cpu, msg=name)


def test_bias_corrections_keep_double_precision_betas():
    from torch_tpu.ops import fused_optim

    step = torch.tensor([1.0, 10.0, 1000.0], device="tpu")
    for beta in (0.9, 0.999, 0.9999):
        expected = torch.tensor([1 - beta**n for n in (1.0, 10.0, 1000.0)], dtype=torch.float64)
        actual = fused_optim._one_minus_power(beta, step).cpu().double()
        torch.testing.assert_close(actual, expected, rtol=5e-7, atol=0)  # pow: 1e-5
    assert fused_optim._one_minus_power(0.0, step).cpu().tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("found", [0.0, 1.0])
def test_fused_adamw_unscales_gradients_and_skips_on_found_inf(native, found):
    torch.manual_seed(1)
    tensors = {name: [torch.randn(6), torch.randn(2, 3)] for name in ("p", "g", "m", "v")}
    tensors["v"] = [v.abs() for v in tensors["v"]]
    results = {}
    for device in ("cpu", "tpu"):
        t = {name: [x.clone().to(device) for x in xs] for name, xs in tensors.items()}
        steps = [torch.tensor(3.0, device=device) for _ in t["p"]]
        torch._fused_adamw_(
            t["p"],
            t["g"],
            t["m"],
            t["v"],
            [],
            steps,
            lr=0.01,
            beta1=0.9,
            beta2=0.99,
            weight_decay=0.1,
            eps=1e-8,
            amsgrad=False,
            maximize=False,
            grad_scale=torch.tensor(4.0, device=device),
            found_inf=torch.tensor(found, device=device),
        )
        results[device] = {name: [x.cpu() for x in xs] for name, xs in t.items()}
    for name in ("p", "g", "m", "v"):
        for tpu, cpu in zip(results["tpu"][name], results["cpu"][name]):
            torch.testing.assert_close(tpu, cpu, rtol=1e-5, atol=1e-6, msg=name)
    if found:  # nothing was updated
        for name in ("p", "m", "v"):
            torch.testing.assert_close(results["tpu"][name][0], tensors[name][0])


# --- _assert_async and polar -------------------------------------------------------------


def test_assert_async_raises_its_message_in_strict_and_defer_and_fuse(native):
    torch._assert_async(torch.tensor(True, device="tpu"), "never raised")
    with pytest.raises(RuntimeError, match="position out of range"):
        torch._assert_async(torch.tensor(0.0, device="tpu"), "position out of range")
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch._assert_async(torch.tensor(False, device="tpu"), "checked at the sync")
        with pytest.raises(RuntimeError, match="checked at the sync"):
            torch_tpu.sync()
            torch.tpu.synchronize()
    for device in ("cpu", "tpu"):  # no message given: the CPU kernel's words
        with pytest.raises(RuntimeError, match="Assertion is failed"):
            torch._assert_async(torch.tensor(0, device=device), "")
    for bad, message in ((torch.ones(2), "more than one value"), (torch.ones(0), "no values")):
        with pytest.raises(RuntimeError, match=message):
            torch._assert_async(bad.to("tpu"))
        with pytest.raises(RuntimeError, match=message):
            torch._assert_async(bad)


def test_polar_matches_cpu_with_broadcasting_and_the_same_errors(native):
    r, theta = torch.rand(3, 1, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    torch.testing.assert_close(
        torch.polar(r.to("tpu"), theta.to("tpu")).cpu(), torch.polar(r, theta)
    )
    out = torch.empty(0, dtype=torch.complex64, device="tpu")
    torch.polar(r.float().to("tpu"), theta.float().to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), torch.polar(r.float(), theta.float()))
    half = torch.ones(2, dtype=torch.bfloat16)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="Expected object of scalar type Double"):
            torch.polar(r.to(device), theta.float().to(device))
        with pytest.raises(RuntimeError, match="Half, Float or Double tensors but got BFloat16"):
            torch.polar(half.to(device), half.to(device))


# --- device name, capacity and peak FLOP/s ------------------------------------------------


def test_tpu_kinds_get_the_names_torchtitans_table_uses():
    assert peak_flops.canonical_name("TPU v5 lite") == "TPU v5e"
    assert peak_flops.canonical_name("TPU v6 lite") == "TPU v6e"
    assert peak_flops.canonical_name("TPU7x") == "TPU v7"
    assert peak_flops.canonical_name("cpu") == "cpu"
    assert peak_flops.peak_flops("TPU v5e", "tpu", "x", torch.device("tpu")) == 197e12
    assert peak_flops.peak_flops("TPU v6e", "tpu", "x", torch.device("tpu")) == 918e12


def test_tpu_chips_report_their_hbm():
    assert peak_flops.capacity_bytes("TPU v6e", 10**12) == 32 * 2**30
    assert peak_flops.capacity_bytes("TPU v5p", 10**12) == 95 * 10**9
    assert peak_flops.capacity_bytes("cpu", 10**12) == 10**12


def test_device_properties_report_capacity_and_a_measured_peak(monkeypatch):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.delenv("TORCH_TPU_PEAK_FLOPS", raising=False)
    properties = torch.tpu.get_device_properties(0)
    assert properties.name == torch.tpu.get_device_name(0) == "cpu"
    assert properties.total_memory == torch.tpu.mem_get_info(0)[1] > 0
    peak = properties.peak_flops
    assert 1e8 < peak < 1e14  # a real CPU's dense matmul rate
    with open(os.path.join(torch_tpu.cache.directory(), "peak_flops.json")) as file:
        assert peak in json.load(file).values()  # later processes read it from here
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two ranks share the host's cores
    assert properties.peak_flops == pytest.approx(peak / 2)
    monkeypatch.setenv("TORCH_TPU_PEAK_FLOPS", "2.5e11")
    assert properties.peak_flops == 2.5e11
    monkeypatch.setenv("TORCH_TPU_PEAK_FLOPS", "fast")
    with pytest.raises(ValueError, match="TORCH_TPU_PEAK_FLOPS"):
        properties.peak_flops


def test_measuring_the_peak_leaves_the_random_stream_alone():
    torch.tpu.manual_seed(7)
    expected = torch.randn(4, device="tpu").cpu()
    torch.tpu.manual_seed(7)
    peak_flops.measure(torch.device("tpu"))
    torch.testing.assert_close(torch.randn(4, device="tpu").cpu(), expected)


def test_memory_stats_have_the_keys_torchtitan_reads():
    keep = torch.ones(1024, device="tpu") + 1
    stats = torch.tpu.memory_stats()
    for key in ("active_bytes.all.peak", "reserved_bytes.all.peak"):
        assert stats[key] == stats["allocated_bytes.all.peak"] >= keep.nbytes
    assert stats["num_alloc_retries"] == 0 and stats["num_ooms"] == 0
