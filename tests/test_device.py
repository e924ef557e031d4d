"""The torch.tpu device module, torch.accelerator integration, multiple devices, coverage()
and the compile-cache metrics."""

import pytest
import torch

import torch_tpu

TPU = "tpu"


@pytest.fixture(autouse=True)
def restore_current_device():
    before = torch.tpu.current_device()
    yield
    torch.tpu.set_device(before)


def test_is_available_and_device_count():
    assert torch.tpu.is_available() is True
    n = torch.tpu.device_count()
    assert isinstance(n, int) and n >= 1
    assert torch.tpu.is_initialized()


def test_accelerator_integration():
    assert torch.accelerator.is_available()
    acc = torch.accelerator.current_accelerator()
    assert isinstance(acc, torch.device) and acc.type == TPU
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    assert torch.accelerator.current_device_index() == torch.tpu.current_device()
    assert torch._C._get_privateuse1_backend_name() == TPU
    assert torch.device("tpu:0").type == "tpu"


def test_current_device_and_set_device():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs 2 tpu devices")
    torch.tpu.set_device(0)
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(1)
    assert torch.tpu.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    x = torch.empty(2, device=TPU)  # "tpu" means the current device
    assert x.device == torch.device("tpu:1")
    torch.tpu.set_device("tpu:0")
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(torch.device("tpu", 1))
    assert torch.tpu.current_device() == 1


def test_device_context_manager():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs 2 tpu devices")
    torch.tpu.set_device(0)
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
        x = torch.empty(3, device=TPU)
        assert x.device.index == 1
        with torch.tpu.device("tpu:0"):
            assert torch.tpu.current_device() == 0
        assert torch.tpu.current_device() == 1
    assert torch.tpu.current_device() == 0
    # restored even when the body raises
    with pytest.raises(ZeroDivisionError):
        with torch.tpu.device(1):
            1 / 0
    assert torch.tpu.current_device() == 0


def test_synchronize():
    x = torch.arange(1000, dtype=torch.float32).to(TPU)
    y = (x * 3.0 - 1.0).sum()
    assert torch.tpu.synchronize() is None
    assert torch.tpu.synchronize(0) is None
    assert y.item() == (torch.arange(1000, dtype=torch.float32) * 3.0 - 1.0).sum().item()


def test_get_device_properties():
    props = torch.tpu.get_device_properties(0)
    assert props.platform == torch_tpu.platform() == "cpu"
    assert props.pjrt_api_version == torch_tpu.plugin_info()["api_version"]
    assert isinstance(props.name, str) and props.name
    assert isinstance(props.total_memory, int)
    assert torch.tpu.get_device_properties("tpu:0").name == props.name
    assert torch.tpu.get_device_name() == props.name
    assert "platform='cpu'" in repr(props)
    with pytest.raises(ValueError):
        torch.tpu.get_device_properties(torch.tpu.device_count())


# --- random numbers -------------------------------------------------------------------


def test_manual_seed_and_initial_seed():
    torch.tpu.manual_seed(1234)
    assert torch.tpu.initial_seed() == 1234
    s1 = torch.tpu.get_rng_state()
    torch.tpu.manual_seed(1234)
    assert torch.equal(torch.tpu.get_rng_state(), s1)
    torch.tpu.manual_seed(4321)
    assert not torch.equal(torch.tpu.get_rng_state(), s1)
    torch.tpu.manual_seed_all(99)
    for i in range(torch.tpu.device_count()):
        assert torch.tpu.default_generator(i).initial_seed() == 99


def test_rng_state_round_trip():
    torch.tpu.manual_seed(7)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    torch.tpu.manual_seed(8)
    assert not torch.equal(torch.tpu.get_rng_state(), state)
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.tpu.get_rng_state(), state)
    assert torch.tpu.initial_seed() == 7
    with pytest.raises(RuntimeError):
        torch.tpu.set_rng_state(torch.zeros(3, dtype=torch.uint8))


def test_manual_seed_makes_random_ops_reproducible():
    # DESIGN: random ops draw from the tpu generator, so a fixed seed repeats the numbers
    torch.manual_seed(0)
    torch.tpu.manual_seed(2024)
    a = torch.rand(64, device=TPU).cpu()
    b = torch.rand(64, device=TPU).cpu()
    assert not torch.equal(a, b), "two draws from one generator must differ"
    torch.manual_seed(1)  # the CPU generator must not matter
    torch.tpu.manual_seed(2024)
    assert torch.equal(torch.rand(64, device=TPU).cpu(), a), (
        "torch.tpu.manual_seed does not fix tpu random numbers"
    )


def test_set_rng_state_replays_random_numbers():
    torch.tpu.manual_seed(5)
    torch.rand(10, device=TPU)
    state = torch.tpu.get_rng_state()
    a = torch.randn(32, device=TPU).cpu()
    torch.manual_seed(123)  # the CPU generator must not matter
    torch.tpu.set_rng_state(state)
    b = torch.randn(32, device=TPU).cpu()
    assert torch.equal(a, b), "set_rng_state(get_rng_state()) does not replay tpu random numbers"


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str
)
def test_rand_stays_in_half_open_unit_interval(dtype):
    # torch.rand samples [0, 1): CPU never returns 1.0 in any dtype (it draws as many random
    # bits as the dtype's mantissa holds), so rounding a float32 sample up must not happen
    torch.tpu.manual_seed(0)
    x = torch.rand(200_000, dtype=dtype, device=TPU)
    assert x.dtype == dtype and x.device.type == TPU
    x = x.cpu().double()
    assert (x >= 0).all()
    assert (x < 1).all(), f"{int((x >= 1).sum())} samples equal 1.0"
    assert abs(x.mean().item() - 0.5) < 0.01
    y = torch.empty(200_000, dtype=dtype, device=TPU).uniform_(-2.0, 3.0).cpu().double()
    assert (y >= -2.0).all() and (y < 3.0).all(), (y.min().item(), y.max().item())


def test_randn_moments():
    torch.tpu.manual_seed(0)
    x = torch.randn(200_000, device=TPU).cpu()
    assert abs(x.mean().item()) < 0.01
    assert abs(x.std().item() - 1.0) < 0.01


# --- several devices ------------------------------------------------------------------


def test_to_other_device_lands_there():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs 2 tpu devices")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t1 = x.to("tpu:1")
    assert t1.device == torch.device("tpu:1")
    assert t1.get_device() == 1
    torch.testing.assert_close(t1.cpu(), x)
    t0 = x.to(TPU)
    moved = t0.to("tpu:1")
    assert moved.device.index == 1 and t0.device.index == 0
    torch.testing.assert_close(moved.cpu(), x)
    back = moved.to("tpu:0")
    assert back.device.index == 0
    torch.testing.assert_close(back.cpu(), x)


def test_compute_on_second_device():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs 2 tpu devices")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    w = torch.ones(3, 2)
    t = x.to("tpu:1")
    r = (t * 2.0 + 1.0) @ w.to("tpu:1")
    assert r.device == torch.device("tpu:1")
    torch.testing.assert_close(r.cpu(), (x * 2.0 + 1.0) @ w)
    torch.testing.assert_close(torch.ones(4, device="tpu:1").sum().cpu(), torch.tensor(4.0))


def test_compute_inside_device_context():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs 2 tpu devices")
    with torch.tpu.device(1):
        z = torch.zeros(3, device=TPU)
        z.add_(torch.arange(3.0).to(TPU))
        assert z.device.index == 1
        torch.testing.assert_close(z.cpu(), torch.arange(3.0))


def test_module_to_device():
    m = torch.nn.Linear(3, 2)
    m.tpu()
    assert m.weight.device.type == TPU
    assert torch.ones(2).tpu().device.type == TPU
    assert torch.ones(2).tpu().is_tpu


# --- coverage and metrics ----------------------------------------------------------------


def test_coverage():
    cov = torch_tpu.coverage()
    assert isinstance(cov, list) and cov == sorted(cov)
    for name in (
        "aten::mm",
        "aten::add.Tensor",
        "aten::relu",
        "aten::sum.dim_IntList",
        "aten::fill_.Scalar",
    ):
        assert name in cov, name
    assert "aten::renorm" not in cov  # runs on the CPU fallback
    assert all(name.startswith("aten::") for name in cov)


def _run_and_measure(fn):
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    result = fn()
    torch.tpu.synchronize()
    return result, torch_tpu.metrics.snapshot()


def test_same_op_compiles_once():
    # an unusual shape, so no earlier test has compiled this program
    a = torch.arange(41 * 3, dtype=torch.float32).reshape(41, 3)
    b = torch.full((41, 3), 0.5)
    ta, tb = a.to(TPU), b.to(TPU)
    r1, s1 = _run_and_measure(lambda: ta * tb)
    assert s1["compiles"] == 1, s1
    assert s1["executions"] >= 1
    r2, s2 = _run_and_measure(lambda: ta * tb)
    assert s2["compiles"] == 0, s2
    assert s2["cache_hits"] >= 1, s2
    torch.testing.assert_close(r1.cpu(), a * b)
    torch.testing.assert_close(r2.cpu(), a * b)
    # a different shape is a different program
    _, s3 = _run_and_measure(lambda: ta[:40] * tb[:40])
    assert s3["compiles"] == 1, s3


@pytest.mark.parametrize(
    "name,fn",
    [
        ("add_python_float", lambda x, s: x + s),
        ("mul_python_float", lambda x, s: x * s),
        ("div_python_float", lambda x, s: x / s),
        ("add_alpha", lambda x, s: x.add(x, alpha=s)),
        ("add_scalar_overload", lambda x, s: torch.ops.aten.add.Scalar(x, s)),
        ("fill_", lambda x, s: torch.empty_like(x).fill_(s)),
        ("rsub_python_float", lambda x, s: s - x),
        ("mul_cpu_0dim_tensor", lambda x, s: x * torch.tensor(s)),
        ("int_tensor_plus_python_int", lambda x, s: x.long() + int(s)),
        (
            "rand_after_reseed",
            lambda x, s: (torch.tpu.manual_seed(int(s)), torch.rand_like(x))[1] * 0 + x,
        ),
    ],
)
def test_changing_python_scalar_does_not_recompile(name, fn):
    base = torch.arange(43 * 5, dtype=torch.float32).reshape(43, 5)
    x = base.to(TPU)
    r1, _ = _run_and_measure(lambda: fn(x, 1.0))  # may compile (a new shape)
    r2, s2 = _run_and_measure(lambda: fn(x, 2.0))
    assert s2["compiles"] == 0, f"{name}: changing a Python scalar recompiled: {s2}"
    torch.testing.assert_close(r1.cpu(), fn(base, 1.0))
    torch.testing.assert_close(r2.cpu(), fn(base, 2.0))


def test_sgd_like_update_with_changing_lr_does_not_recompile():
    p_cpu = torch.arange(47, dtype=torch.float32)
    g_cpu = torch.full((47,), 0.25)
    p, g = p_cpu.to(TPU), g_cpu.to(TPU)
    p.add_(g, alpha=-0.1)
    p_cpu.add_(g_cpu, alpha=-0.1)
    compiles = 0
    for lr in (0.05, 0.01, 0.001):
        _, s = _run_and_measure(lambda: p.add_(g, alpha=-lr))
        p_cpu.add_(g_cpu, alpha=-lr)
        compiles += s["compiles"]
    assert compiles == 0
    torch.testing.assert_close(p.cpu(), p_cpu)


def test_metrics_snapshot_fields():
    _, snap = _run_and_measure(lambda: torch.ones(3, device=TPU) + torch.ones(3, device=TPU))
    for key in (
        "compiles",
        "cache_hits",
        "executions",
        "host_to_device",
        "device_to_host",
        "compile_seconds",
        "native_ops",
        "cpu_fallbacks",
    ):
        assert key in snap, key
    assert snap["native_ops"].get("aten::add.Tensor", 0) == 1, snap["native_ops"]
    before = torch_tpu.metrics.snapshot()["device_to_host"]
    torch.ones(2, device=TPU).cpu()
    assert torch_tpu.metrics.snapshot()["device_to_host"] > before
    before = torch_tpu.metrics.snapshot()["host_to_device"]
    torch.ones(2).to(TPU)
    assert torch_tpu.metrics.snapshot()["host_to_device"] > before
