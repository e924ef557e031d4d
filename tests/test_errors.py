"""Errors users hit: mixing devices, invalid device indices, and plugin discovery failures
(in subprocesses, since discovery happens at import)."""

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu  # noqa: F401

TPU = "tpu"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


MIXES = {
    "cpu_plus_tpu": lambda: torch.ones(3) + torch.ones(3, device=TPU),
    "tpu_plus_cpu": lambda: torch.ones(3, device=TPU) + torch.ones(3),
    "tpu_mul_cpu": lambda: torch.ones(2, 3, device=TPU) * torch.ones(2, 3),
    "mm_tpu_cpu": lambda: torch.mm(torch.ones(2, 3, device=TPU), torch.ones(3, 2)),
    "in_place_add_cpu_into_tpu": lambda: torch.ones(3, device=TPU).add_(torch.ones(3)),
    "out_on_cpu": lambda: torch.add(
        torch.ones(3, device=TPU), torch.ones(3, device=TPU), out=torch.empty(3)
    ),
    "fallback_op_mixed": lambda: torch.igamma(torch.ones(3, device=TPU), torch.ones(3)),
    "native_binary_op_mixed": lambda: torch.hypot(torch.ones(3, device=TPU), torch.ones(3)),
}


@pytest.mark.parametrize("name", list(MIXES))
def test_mixing_cpu_and_tpu_raises_runtime_error(name):
    with pytest.raises(RuntimeError) as info:
        MIXES[name]()
    assert type(info.value) is RuntimeError, type(info.value)
    assert "device" in str(info.value)


def test_mixing_two_tpu_devices_raises():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs 2 tpu devices")
    with pytest.raises(RuntimeError) as info:
        torch.ones(3, device="tpu:0") + torch.ones(3, device="tpu:1")
    assert "tpu:1" in str(info.value) or "tpu:0" in str(info.value)


def test_cpu_zero_dim_tensor_is_not_a_mismatch():
    # PyTorch lets a 0-dim CPU tensor join a device op (it becomes a scalar)
    r = torch.tensor(2.0) * torch.ones(3, device=TPU)
    assert r.device.type == TPU
    torch.testing.assert_close(r.cpu(), torch.full((3,), 2.0))


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.ones(1, device=d),
        lambda d: torch.empty(2, device=d),
        lambda d: torch.ones(1).to(d),
    ],
    ids=["ones", "empty", "to"],
)
def test_invalid_device_index_raises(make):
    bad = f"tpu:{torch.tpu.device_count() + 95}"  # tpu:99 with 4 devices
    with pytest.raises(RuntimeError) as info:
        make(bad)
    message = str(info.value)
    assert bad.split(":")[1] in message, f"message does not name the index: {message!r}"
    assert str(torch.tpu.device_count()) in message, (
        f"message does not give the device count: {message!r}"
    )


def test_device_count_index_is_invalid():
    n = torch.tpu.device_count()
    with pytest.raises(RuntimeError) as info:
        torch.ones(1, device=f"tpu:{n}")
    assert str(n) in str(info.value), repr(str(info.value))
    with pytest.raises((RuntimeError, ValueError)):
        torch.tpu.set_device(n)
    assert 0 <= torch.tpu.current_device() < n


def _import_in_child(hide=(), **env):
    """Imports torch_tpu in a child with `env`; `hide` names Python packages that the child
    cannot find (as on a machine without them)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}
    full.update(env)
    full["PYTHONPATH"] = ROOT + os.pathsep + full.get("PYTHONPATH", "")
    code = (
        "import sys\n"
        + "".join(f"sys.modules[{name!r}] = None\n" for name in hide)
        + "try:\n"
        "    import torch_tpu\n"
        "except BaseException as e:\n"
        "    print('EXC', type(e).__name__, isinstance(e, ImportError), str(e).replace(chr(10), ' '))\n"
        "    sys.exit(0)\n"
        "print('IMPORTED')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_platform_tpu_on_a_machine_without_a_tpu():
    # libtpu installed (it compiles for TPUs without one: torch_tpu.targets), no TPU here.
    from torch_tpu._runtime.plugin import tpu_present

    if tpu_present():
        pytest.skip("this machine has a TPU")
    line = _import_in_child(TORCH_TPU_PLATFORM="tpu")
    assert line.startswith("EXC "), line
    _, name, is_import_error, message = line.split(" ", 3)
    assert is_import_error == "True", f"{name} is not an ImportError: {message}"
    assert "this machine has no TPU" in message and "TORCH_TPU_PJRT_PLUGIN" in message


def test_plugin_path_that_does_not_exist():
    line = _import_in_child(TORCH_TPU_PJRT_PLUGIN="/nonexistent.so")
    assert line.startswith("EXC "), line
    _, name, is_import_error, message = line.split(" ", 3)
    assert is_import_error == "True", f"{name} is not an ImportError: {message}"
    assert "/nonexistent.so" in message


def test_platform_tpu_without_libtpu():
    line = _import_in_child(hide=("libtpu",), TORCH_TPU_PLATFORM="tpu")
    assert line.startswith("EXC "), line
    _, name, is_import_error, message = line.split(" ", 3)
    assert is_import_error == "True", f"{name} is not an ImportError: {message}"
    assert "libtpu" in message
    assert "pip install libtpu" in message
