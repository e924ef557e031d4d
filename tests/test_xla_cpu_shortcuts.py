"""TORCH_TPU_XLA_CPU_SHORTCUTS=0: the CPU plugin runs without any path that exists only for
XLA:CPU (csrc/runtime/xla_cpu_shortcuts.h lists them), so tests run what a TPU or GPU runs.
Each check runs in a fresh process, since the switch is read once at start-up."""

import json

import pytest
from fresh_process import run_python

# Runs ops that have a CPU-only shortcut (host kernels, vector trig, column reductions, raw
# pointer copies, pinned programs) and reports what the process took and how far each result
# is from PyTorch's CPU.
PROBE = r"""
import glob, json, os, torch, torch_tpu
import torch.nn.functional as F
torch.manual_seed(0)
results = {}
def compare(name, fn, *inputs):
    want = fn(*inputs)
    got = fn(*[t.to("tpu") for t in inputs]).cpu()
    results[name] = (got - want).abs().max().item()
x = torch.randn(64, 32); w = torch.randn(32, 48)
compare("matmul", torch.matmul, x, w)
compare("sin", torch.sin, torch.randn(100_000))
compare("log1p", torch.log1p, torch.rand(100_000))
compare("column_sum", lambda t: (t * 2).sum(0), torch.randn(256, 64))
compare("layer_norm", lambda t: F.layer_norm(t, (32,)), x)
compare("conv2d", lambda a, b: F.conv2d(a, b, padding=1), torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3))
q = torch.randn(2, 3, 16, 8)
compare("attention", lambda a: F.scaled_dot_product_attention(a, a, a, is_causal=True), q)
nan = float("nan")
a, b = torch.tensor([nan, 1.0, 2.0]), torch.tensor([1.0, nan, 3.0])
got = torch.maximum(a.to("tpu"), b.to("tpu")).cpu()
results["nan_maximum"] = [str(v) for v in got.tolist()]
y = torch.ones(8, device="tpu")
for _ in range(40):  # hot enough to be pinned where pinning is on
    y = y + 1
results["hot_loop"] = y.cpu()[0].item()
info = torch_tpu._C._plugin_info()
programs = "".join(open(p).read() for p in glob.glob(os.environ["TORCH_TPU_DUMP_PROGRAMS"] + "/*"))
print(json.dumps({
    "shortcuts": info["xla_cpu_shortcuts"],
    "host_matmul_installed": torch_tpu._C._host_matmul_installed(),
    "custom_calls": programs.count("custom_call"),
    "pinned": torch_tpu.metrics.snapshot()["pinned_programs"],
    "results": results,
}))
"""


def _probe(tmp_path, **env) -> dict:
    result = run_python(PROBE, TORCH_TPU_DUMP_PROGRAMS=str(tmp_path), **env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _assert_match_the_cpu(results):
    for name, error in results.items():
        if name == "nan_maximum":
            assert error == ["nan", "nan", "3.0"], error
        elif name == "hot_loop":
            assert error == 41.0
        else:
            assert error < 1e-4, f"{name}: {error}"


def test_off_takes_no_shortcut_and_matches_the_cpu(tmp_path):
    report = _probe(tmp_path, TORCH_TPU_XLA_CPU_SHORTCUTS="0", TORCH_TPU_PIN_PROGRAMS="4")
    assert report["shortcuts"] is False
    assert report["host_matmul_installed"] is False
    assert report["custom_calls"] == 0, "a host kernel ran as a custom call"
    assert report["pinned"] == 0, "a program was pinned"
    _assert_match_the_cpu(report["results"])


def test_on_by_default_takes_them(tmp_path):
    report = _probe(tmp_path, TORCH_TPU_PIN_PROGRAMS="4")
    assert report["shortcuts"] is True
    assert report["host_matmul_installed"] is True
    assert report["custom_calls"] > 0
    assert report["pinned"] > 0
    _assert_match_the_cpu(report["results"])


@pytest.mark.parametrize("value", ["2", "off", "yes"])
def test_a_bad_value_is_refused_by_name(value):
    result = run_python("import torch_tpu", TORCH_TPU_XLA_CPU_SHORTCUTS=value)
    assert result.returncode != 0
    assert f"TORCH_TPU_XLA_CPU_SHORTCUTS must be 0 or 1, got '{value}'" in result.stderr
