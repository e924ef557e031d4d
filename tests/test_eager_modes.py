"""The eager-mode API and the debug mode: same results as strict, errors and NaNs
named at the operator that caused them."""

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu


def test_default_mode_is_strict_and_modes_switch():
    assert torch_tpu.get_eager_mode() == "strict"
    with torch_tpu.eager_mode("debug"):
        assert torch_tpu.get_eager_mode() == "debug"
    assert torch_tpu.get_eager_mode() == "strict"


def test_unknown_and_unimplemented_modes_are_clear_errors():
    with pytest.raises(ValueError, match="unknown tpu eager mode"):
        torch_tpu.set_eager_mode("fast")
    with pytest.raises(NotImplementedError, match="defer_and_fuse"):
        torch_tpu.set_eager_mode("defer_and_fuse")
    assert torch_tpu.get_eager_mode() == "strict"


def test_debug_mode_gives_strict_results():
    x = torch.randn(16, 16)
    expected = ((x @ x.T).relu().sum(dim=1) / 3).cpu()
    with torch_tpu.eager_mode("debug"):
        t = x.to("tpu")
        actual = ((t @ t.T).relu().sum(dim=1) / 3).cpu()
    torch.testing.assert_close(actual, expected)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_environment_selects_debug_mode():
    code = "import torch_tpu; print(torch_tpu.get_eager_mode())"
    assert _run(code, TORCH_TPU_EAGER_MODE="debug").stdout.strip() == "debug"
    assert _run(code, TPU_LAUNCH_BLOCKING="1").stdout.strip() == "debug"


def test_debug_nans_names_the_first_op_that_made_one():
    code = (
        "import torch, torch_tpu\n"
        "x = torch.tensor([1.0, -1.0], device='tpu')\n"
        "y = x * 2\n"
        "z = torch.sqrt(y)\n"
    )
    result = _run(code, TORCH_TPU_EAGER_MODE="debug", TORCH_TPU_DEBUG_NANS="1")
    assert result.returncode != 0
    assert "aten::sqrt" in result.stderr and "NaN" in result.stderr
    assert "aten::mul" not in result.stderr.split("RuntimeError")[-1]
