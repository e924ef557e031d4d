"""Code written for Google's TorchTPU runs unchanged where torch_tpu has the capability:
the eager-mode names, their environment variables and TorchTPU's torch.compile options
(see ../shared/TORCHTPU-API.md)."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Written against TorchTPU's names only (no torch_tpu import: torch loads it).
TORCHTPU_SCRIPT = textwrap.dedent(
    """
    import warnings
    import torch

    assert torch.tpu.eager_mode == torch.tpu.EagerMode.DEFER_NEVER
    x = torch.randn(8, 8, device="tpu")
    expected = (x @ x).relu().sum().item()

    torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    assert torch.tpu.eager_mode == torch.tpu.EagerMode.DEFER_AND_FUSE
    fused = (x @ x).relu().sum()
    assert abs(fused.item() - expected) < 1e-4
    torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_NEVER

    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        assert torch.tpu.eager_mode == torch.tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
        assert abs((x @ x).relu().sum().item() - expected) < 1e-4
    assert torch.tpu.eager_mode == torch.tpu.EagerMode.DEFER_NEVER

    options = {"async_compile": True, "num_dynamic_buckets": 4, "bucket_size": 128,
               "serializable": True, "name": "step"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = torch.compile(lambda t: (t @ t).relu().sum(), backend="tpu", options=options)
        assert abs(step(x).item() - expected) < 1e-4
    notes = [str(w.message) for w in caught if "TorchTPU compatibility" in str(w.message)]
    # The bucket options choose the buckets of dynamic sizes; the other three are noted.
    assert sorted(n.split("'")[1] for n in notes) == ["async_compile", "name", "serializable"], notes
    print("OK")
    """
)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd="/",
        env={**os.environ, "PYTHONPATH": ROOT, **env},
    )  # fmt: skip


def test_a_script_written_for_torchtpu_runs():
    result = _run(TORCHTPU_SCRIPT)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip() == "OK"


@pytest.mark.parametrize(
    "variable, mode",
    [
        ("TORCH_TPU_DEFER_AND_FUSE", "DEFER_AND_FUSE"),
        ("TORCH_TPU_LAUNCH_BLOCKING", "DEFER_NEVER_AND_LAUNCH_BLOCKING"),
        ("TPU_DEFER_AND_FUSE", "DEFER_AND_FUSE"),
    ],
)
def test_torchtpu_environment_variables_pick_the_mode(variable, mode):
    result = _run("import torch; print(torch.tpu.eager_mode.name)", **{variable: "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == mode


def test_eager_mode_names_map_onto_ours():
    assert {m.name: m.value for m in torch.tpu.EagerMode} == {
        "DEFER_NEVER": "strict",
        "DEFER_AND_FUSE": "defer_and_fuse",
        "DEFER_NEVER_AND_LAUNCH_BLOCKING": "debug",
    }
    previous = torch_tpu.get_eager_mode()
    try:
        torch.tpu.set_eager_mode("debug")  # called, not entered: stays set
        assert torch_tpu.get_eager_mode() == "debug"
        with pytest.raises(ValueError, match="unknown tpu eager mode 'fast'"):
            torch.tpu.eager_mode = "fast"
    finally:
        torch_tpu.set_eager_mode(previous)


def test_unknown_compile_options_are_named():
    torch._dynamo.reset()
    step = torch.compile(lambda t: t * 2, backend="tpu", options={"max_autotune": True})
    with pytest.raises(Exception, match="unknown option 'max_autotune'"):
        step(torch.ones(2, device="tpu"))
    torch._dynamo.reset()
    step = torch.compile(lambda t: t * 2, backend="tpu", options={"num_dynamic_buckets": 9})
    with pytest.raises(Exception, match="num_dynamic_buckets must be a whole number from 1 to 8"):
        step(torch.ones(2, device="tpu"))


def test_debug_checks_variable_is_accepted_and_bounds_stay_checked():
    # TorchTPU's TORCH_TPU_ENABLE_DEBUG_CHECKS turns bounds checks on; ours are always on,
    # in every eager mode, so the variable changes nothing but must not be refused.
    code = textwrap.dedent("""
        import torch
        x = torch.arange(4.0, device="tpu")
        for mode in ("strict", "defer_and_fuse"):
            with torch.tpu.set_eager_mode(mode):
                try:
                    x[torch.tensor([7], device="tpu")].cpu()
                    print("no error")
                except IndexError as e:
                    print("IndexError")
    """)
    result = _run(code, TORCH_TPU_ENABLE_DEBUG_CHECKS="1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["IndexError", "IndexError"]
