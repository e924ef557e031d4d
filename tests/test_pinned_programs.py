"""Hot op programs pinned to their device (CPU platform): a portable program that has run
32 times on one device gets a copy loaded for that device alone, which the plugin runs
without the per-call device assignment a portable run costs. Results stay the same before
and after the switch, on the pinned device and on any other, also for a program that a
restarted process loaded from the disk cache (XLA:CPU cannot re-serialize those: the copy
comes from the disk entry), and TORCH_TPU_PIN_PROGRAMS=0 turns pinning off."""

import json

import pytest
import torch
from fresh_process import run_python

import torch_tpu

PIN_RUNS = 32
TIER_UP_RUNS = 16

pytestmark = pytest.mark.skipif(
    torch_tpu.platform() != "cpu", reason="programs are pinned on the CPU platform"
)


def pinned_count():
    torch.tpu.synchronize()
    return torch_tpu.metrics.snapshot()["pinned_programs"]


def test_a_hot_large_op_is_pinned_on_its_32nd_run_and_keeps_its_results(strict):
    x = torch.randn(131, 67)  # past the quick tier: optimized from the start
    t = x.to("tpu")
    before = pinned_count()
    pins = []
    for run in range(1, PIN_RUNS + 9):
        torch.testing.assert_close(torch.sinh(t).cpu(), torch.sinh(x))
        pins.append(pinned_count() - before)
    assert pins[PIN_RUNS - 2] == 0
    assert pins[PIN_RUNS - 1] == 1
    assert pins[-1] == 1  # once only


def test_a_small_op_is_pinned_after_its_tier_up(strict):
    x = torch.randn(11, 5)
    t = x.to("tpu")
    before = pinned_count()
    pins = []
    for run in range(1, TIER_UP_RUNS + PIN_RUNS + 5):
        torch.testing.assert_close((torch.atan(t) + run).cpu(), torch.atan(x) + run)
        pins.append(pinned_count() - before)
    # The quick version is replaced before it could be pinned; the optimized one starts
    # counting its own runs at the tier-up. atan and the add: two programs.
    assert pins[TIER_UP_RUNS + PIN_RUNS - 2] == 0
    assert pins[TIER_UP_RUNS + PIN_RUNS - 1] == 2
    assert pins[-1] == 2


@pytest.mark.skipif(torch.tpu.device_count() < 2, reason="needs 2 tpu devices")
def test_a_program_pinned_to_one_device_still_runs_on_another(strict):
    x = torch.randn(133, 69)
    t0 = x.to("tpu:0")
    for _ in range(PIN_RUNS + 2):
        torch.cosh(t0).cpu()
    t1 = x.to("tpu:1")
    for _ in range(3):
        y = torch.cosh(t1)
        assert y.device == torch.device("tpu:1")
        torch.testing.assert_close(y.cpu(), torch.cosh(x))
    torch.testing.assert_close(torch.cosh(t0).cpu(), torch.cosh(x))


def test_in_place_updates_of_a_pinned_program_land_in_their_tensor(strict):
    x = torch.randn(140, 70)
    t = x.to("tpu")
    view = t[3:90]  # a view of the same storage, written through the pinned program
    expected = x.clone()
    for _ in range(PIN_RUNS + 6):
        view.mul_(1.01)
        expected[3:90].mul_(1.01)
    torch.testing.assert_close(t.cpu(), expected)


HOT_LOOP = """
import json, torch, torch_tpu
torch_tpu.set_eager_mode("strict")
x = torch.linspace(-3, 3, 9000).reshape(90, 100)
t = x.to("tpu")
for run in range(40):
    torch.testing.assert_close(torch.erf(t * run).cpu(), torch.erf(x * run))
print(json.dumps(torch_tpu.metrics.snapshot()))
"""


def run_script(script, **env):
    """Runs `script` in a fresh process with `env` added; returns its stdout's last line as
    JSON and its stderr."""
    out = run_python(script, **env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def run_hot_loop(cache_dir, **env):
    return run_script(HOT_LOOP, TORCH_TPU_CACHE_DIR=str(cache_dir), **env)[0]


def test_programs_loaded_from_the_disk_cache_are_pinned_and_run_correctly(tmp_path):
    first = run_hot_loop(tmp_path)
    assert first["compiles"] >= 2 and first["pinned_programs"] == 2  # erf and the multiply
    # The restarted process loads both from disk; their copies come from the disk entries
    # (a loaded XLA:CPU executable re-serializes without its kernels, and a copy made from
    # those bytes failed its first run).
    second = run_hot_loop(tmp_path)
    assert second["compiles"] == 0
    assert second["pinned_programs"] == 2


def test_pinning_can_be_turned_off(tmp_path):
    off = run_hot_loop(tmp_path, TORCH_TPU_PIN_PROGRAMS="0")
    assert off["pinned_programs"] == 0


SORT_THEN_ADD = """
import json, torch, torch_tpu
torch_tpu.set_eager_mode("strict")
x = torch.randn(5000)
t = x.to("tpu")
for _ in range(3):
    torch.testing.assert_close(torch.sort(t)[0].cpu(), torch.sort(x)[0])
after_sort = torch_tpu.metrics.snapshot()["pinned_programs"]
for run in range(3):
    torch.testing.assert_close((t * run).cpu(), x * run)
print(json.dumps(torch_tpu.metrics.snapshot()["pinned_programs"] - after_sort))
"""


def test_a_program_that_cannot_be_serialized_stays_portable_and_others_still_pin():
    # XLA:CPU cannot always serialize a sort's comparator ("`LessThan` is not serializable");
    # that must not turn pinning off for the multiply that follows. Pinning after the first
    # run (and no quick tier) makes the second run of each program the pinned one.
    pinned, stderr = run_script(
        SORT_THEN_ADD,
        TORCH_TPU_CACHE_DIR="off",
        TORCH_TPU_PIN_PROGRAMS="1",
        TORCH_TPU_FAST_OP_COMPILE="0",
    )
    assert "programs run portably" not in stderr
    assert pinned == 1  # the multiply


def test_a_malformed_pin_count_is_refused():
    out = run_python(
        "import torch, torch_tpu; torch.ones(2, device='tpu') + 1", TORCH_TPU_PIN_PROGRAMS="often"
    )
    assert out.returncode != 0
    assert "TORCH_TPU_PIN_PROGRAMS must be a count of runs (0: never), got 'often'" in out.stderr
