"""Tiered compilation of small one-op programs on the CPU platform: a new op on small
tensors is first compiled without LLVM's optimizations (quick to compile), and replaced by
the optimized program once it has run 16 times. Results are the same in both tiers, the
replacement is no recompile, large ops skip the quick tier, and a restarted process loads
both tiers from the disk cache instead of compiling them."""

import json

import pytest
import torch
from fresh_process import run_python

import torch_tpu

TIER_UP_RUNS = 16

pytestmark = pytest.mark.skipif(
    torch_tpu.platform() != "cpu", reason="tiers are a CPU-platform compile option"
)


def snapshot():
    torch.tpu.synchronize()
    return torch_tpu.metrics.snapshot()


def test_a_hot_small_op_is_optimized_once_and_keeps_its_results(strict):
    x = torch.randn(37, 3)  # a shape no other test uses: a new program
    t = x.to("tpu")
    before = snapshot()
    tier_ups = []
    for run in range(1, 41):
        scale = 0.25 * run
        torch.testing.assert_close((torch.cos(t) * scale).cpu(), torch.cos(x) * scale)
        tier_ups.append(snapshot()["tier_ups"] - before["tier_ups"])
    after = snapshot()
    # cos and the multiply each tier up once, on their 16th run; never again.
    assert tier_ups[TIER_UP_RUNS - 2] == 0
    assert tier_ups[TIER_UP_RUNS - 1] == 2
    assert tier_ups[-1] == 2
    # Two programs compiled for the new shape; the tier-ups are not counted as compiles.
    assert after["compiles"] - before["compiles"] == 2


def test_a_large_op_is_optimized_from_the_start(strict):
    x = torch.randn(129, 65)  # 33 KB in, 33 KB out: past the quick tier's bound
    t = x.to("tpu")
    before = snapshot()
    for _ in range(TIER_UP_RUNS + 4):
        torch.testing.assert_close(torch.sinh(t).cpu(), torch.sinh(x))
    assert snapshot()["tier_ups"] == before["tier_ups"]


RESTART = """
import json, torch, torch_tpu
torch_tpu.set_eager_mode("strict")
x = torch.arange(45, dtype=torch.float32).reshape(5, 9) / 7
t = x.to("tpu")
for run in range(20):
    torch.testing.assert_close(torch.tanh(t + run).cpu(), torch.tanh(x + run))
print(json.dumps(torch_tpu.metrics.snapshot()))
"""


def run_restart(cache_dir, **env):
    out = run_python(
        RESTART,
        timeout=300,
        drop=("TORCH_TPU_LOG_RECOMPILES",),
        TORCH_TPU_CACHE_DIR=str(cache_dir),
        **env,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_restart_loads_both_tiers_from_disk(tmp_path):
    first = run_restart(tmp_path)
    assert first["tier_ups"] >= 2  # the add and the tanh
    assert first["compiles"] > 0
    second = run_restart(tmp_path)
    assert second["compiles"] == 0
    assert second["tier_ups"] == first["tier_ups"]
    assert second["disk_hits"] >= 2 * first["tier_ups"]


@pytest.mark.parametrize("level", ["0", "2"])
def test_other_compile_levels_do_not_tier(tmp_path, level):
    counts = run_restart(tmp_path, TORCH_TPU_FAST_OP_COMPILE=level)
    assert counts["tier_ups"] == 0
