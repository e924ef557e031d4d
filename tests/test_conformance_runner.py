"""python -m torch_tpu.conformance on a small synthetic device-generic test file: outcomes,
a crash isolated to its test (the file restarts and runs the tests after it), a per-test
timeout, the table and the JSON, and the exit code for a missing folder.

The file runs once for the whole module (three pytest processes: the crash and the
timeout each restart it), so the module stays at a few seconds of torch_tpu imports."""

import contextlib
import io
import json
import subprocess
import sys
import textwrap

import pytest

from torch_tpu.conformance import main, report

# Test methods run in name order: the crash comes before a passing test and the sleeper, so
# only the restarts can reach them.
SYNTHETIC = textwrap.dedent(
    """
    import os
    import signal
    import time
    import unittest

    import torch
    from torch.testing._internal.common_device_type import instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase


    class TestSynthetic(TestCase):
        def test_a_pass(self, device):
            x = torch.arange(6.0).reshape(2, 3)
            self.assertEqual((x.to(device) * 2).cpu(), x * 2)

        def test_b_fail(self, device):
            self.assertTrue(False, "value 12 at 0x7f00aa is wrong")

        def test_c_skip(self, device):
            raise unittest.SkipTest("not on this device")

        def test_d_crash(self, device):
            os.kill(os.getpid(), signal.SIGSEGV)

        def test_e_after_crash(self, device):
            self.assertEqual(torch.ones(3, device=device).sum().item(), 3.0)

        def test_f_sleeps(self, device):
            time.sleep(60)

        @unittest.expectedFailure
        def test_g_xfail(self, device):
            self.assertTrue(False)


    instantiate_device_type_tests(TestSynthetic, globals())


    class TestNotDeviceGeneric(TestCase):  # no device: the runner leaves it out
        def test_cpu_only(self):
            pass
    """
)
CLASS = "test_synthetic.py::TestSyntheticPRIVATEUSE1::"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Runs the runner once on the synthetic file: (exit code, printed text, JSON)."""
    folder = tmp_path_factory.mktemp("conformance")
    tests = folder / "test"
    tests.mkdir()
    (tests / "test_synthetic.py").write_text(SYNTHETIC)
    out = folder / "out.json"
    printed = io.StringIO()  # module scope has no capsys
    with contextlib.redirect_stdout(printed):
        code = main([str(tests), "test_synthetic", "--test-timeout", "3", "--json", str(out)])
    return code, printed.getvalue(), json.loads(out.read_text())


def _outcomes(data):
    return {t["nodeid"].removeprefix(CLASS): t["outcome"] for t in data["tests"]}


def test_each_test_has_its_outcome(run):
    code, _, data = run
    assert code == 0
    assert _outcomes(data) == {
        "test_a_pass_tpu": "passed",
        "test_b_fail_tpu": "failed",
        "test_c_skip_tpu": "skipped",
        "test_d_crash_tpu": "crashed",
        "test_e_after_crash_tpu": "passed",
        "test_f_sleeps_tpu": "timeout",
        "test_g_xfail_tpu": "xfailed",
    }
    assert data["files"][0]["attempts"] == 3  # the crash and the timeout restarted it


def test_crash_and_timeout_are_recorded_on_their_tests(run):
    _, text, data = run
    by_id = {t["nodeid"]: t for t in data["tests"]}
    crash, timeout = by_id[CLASS + "test_d_crash_tpu"], by_id[CLASS + "test_f_sleeps_tpu"]
    assert crash["cause"] == "SIGSEGV"
    assert crash["raw"] == "Fatal Python error: Segmentation fault"  # faulthandler's report
    assert "in test_d_crash" in crash["log_tail"]
    assert 3 <= timeout["seconds"] < 30
    assert f"- crashed (SIGSEGV): `{CLASS}test_d_crash_tpu`" in text
    assert f"`{CLASS}test_f_sleeps_tpu`" in text


def test_failure_cause_is_normalized(run):
    _, text, data = run
    [group] = data["groups"]
    assert group["cause"] == "AssertionError: False is not true : value N at 0x? is wrong"
    assert group["examples"] == [CLASS + "test_b_fail_tpu"]
    assert "1. 1 x AssertionError: False is not true : value N at 0x? is wrong" in text
    failed = next(t for t in data["tests"] if t["outcome"] == "failed")
    assert failed["raw"] == "AssertionError: False is not true : value 12 at 0x7f00aa is wrong"


def test_table_row(run):
    _, text, data = run
    row = next(line for line in text.splitlines() if line.startswith("| test_synthetic.py"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # passed failed errors skipped xfailed crashed timeout not-run pass% (2 of 5 ran)
    assert cells[1:10] == ["2", "1", "0", "1", "1", "1", "1", "0", "40.0"]
    assert data["total"]["pass_percent"] == pytest.approx(40.0)
    assert "| TOTAL" in text


def test_missing_folder_is_exit_code_2(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main([str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err
    (tmp_path / "test").mkdir()
    assert main([str(tmp_path / "test"), "test_view_ops"]) == 2
    assert f"no test_view_ops.py in {tmp_path / 'test'}" in capsys.readouterr().err


def test_command_line_exit_code_2(tmp_path):
    missing = tmp_path / "nowhere"
    result = subprocess.run(
        [sys.executable, "-m", "torch_tpu.conformance", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert f"no folder {missing}: pass the test/ folder of a PyTorch checkout" in result.stderr


@pytest.mark.parametrize(
    "message, expected",
    [
        (
            "shape '[2, 3]' is invalid for input of size 7",
            "shape '[...]' is invalid for input of size N",
        ),
        ("Expected tpu:0 and cpu, got torch.float32", "Expected tpu and cpu, got DTYPE"),
        (
            "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
            "mat1 and mat2 shapes cannot be multiplied (NxN and NxN)",
        ),
        ("'aten::log1p' has no lowering at (0, 1)", "'aten::log1p' has no lowering at (...)"),
        ("Float did not match Half\nsecond line", "DTYPE did not match DTYPE"),
    ],
)
def test_normalize_message(message, expected):
    assert report.normalize_cause("RuntimeError", message) == f"RuntimeError: {expected}"


def test_cpu_check_maps_tests_to_the_cpu_device_and_counts_them_apart():
    from torch_tpu.conformance import cpu_check, report

    assert (cpu_check.cpu_nodeid("test_x.py::TestFooPRIVATEUSE1::test_bar_tpu_float32")
            == "test_x.py::TestFooCPU::test_bar_cpu_float32")  # fmt: skip
    assert (
        cpu_check.cpu_nodeid("t.py::TestOldTPU::test_flatten_tpu")
        == "t.py::TestOldCPU::test_flatten_cpu"
    )
    records = [report.TestRecord("f.py", f"f.py::T::t{i}", "passed") for i in range(8)]
    records += [report.TestRecord("f.py", "f.py::T::bad", "failed", fails_on_cpu=True),
                report.TestRecord("f.py", "f.py::T::ours", "failed")]  # fmt: skip
    row = report.summary_row("f.py", records, 1.0)
    assert row["pass_percent"] == 80.0
    assert row["fail_on_cpu_too"] == 1
    assert row["pass_percent_without_them"] == pytest.approx(100 * 8 / 9)
    groups = report.group_failures(records)
    assert {g.cause for g in groups} == {"[fails on CPU too] (no message)", "(no message)"}


def test_ops_are_compiled_for_latency_unless_the_user_chose(tmp_path, monkeypatch):
    from torch_tpu.conformance import runner

    monkeypatch.delenv("TORCH_TPU_FAST_OP_COMPILE", raising=False)
    env = runner.child_env(runner.Options(), tmp_path / "p", tmp_path / "d")
    assert env["TORCH_TPU_FAST_OP_COMPILE"] == "2"
    monkeypatch.setenv("TORCH_TPU_FAST_OP_COMPILE", "0")
    env = runner.child_env(runner.Options(), tmp_path / "p", tmp_path / "d")
    assert env["TORCH_TPU_FAST_OP_COMPILE"] == "0"


MANY = textwrap.dedent(
    """
    import torch
    from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase


    class TestMany(TestCase):
        @dtypes(torch.float32, torch.float64, torch.int32, torch.int64, torch.int16, torch.bool)
        def test_ones(self, device, dtype):
            self.assertEqual(torch.ones(2, device=device, dtype=dtype).cpu(), torch.ones(2, dtype=dtype))

        @dtypes(torch.float32, torch.float64, torch.int32, torch.int64, torch.int16, torch.bool)
        def test_zeros(self, device, dtype):
            self.assertEqual(torch.zeros(2, device=device, dtype=dtype).cpu(), torch.zeros(2, dtype=dtype))


    instantiate_device_type_tests(TestMany, globals())
    """
)


def test_sample_is_the_same_tests_every_run_and_jobs_keep_the_files_order(tmp_path):
    """--sample 5 of 12 tests in each of two files, the files run two at a time: five
    records a file, the same five on a second run (chosen by id, not by chance), and the
    table and JSON list the files in the order they were named."""
    tests = tmp_path / "test"
    tests.mkdir()
    for name in ("test_many_b.py", "test_many_a.py"):
        (tests / name).write_text(MANY)

    def sampled(out):
        with contextlib.redirect_stdout(io.StringIO()):
            code = main([str(tests), "test_many_b", "test_many_a", "--sample", "5",
                         "--jobs", "2", "--json", str(out)])  # fmt: skip
        assert code == 0
        data = json.loads(out.read_text())
        assert [f["file"] for f in data["files"]] == ["test_many_b.py", "test_many_a.py"]
        by_file = {}
        for t in data["tests"]:
            assert t["outcome"] == "passed"
            by_file.setdefault(t["file"], set()).add(t["nodeid"].split("::")[-1])
        return by_file

    first = sampled(tmp_path / "1.json")
    assert [len(first[f]) for f in ("test_many_b.py", "test_many_a.py")] == [5, 5]
    assert first["test_many_a.py"] != first["test_many_b.py"]  # ids name their file
    assert sampled(tmp_path / "2.json") == first


TWINS = textwrap.dedent(
    """
    import unittest

    import torch
    from torch.testing._internal.common_device_type import (
        dtypes, dtypesIfPRIVATEUSE1, instantiate_device_type_tests)
    from torch.testing._internal.common_utils import TestCase


    class TestTwins(TestCase):
        def test_ours(self, device):
            self.assertEqual(torch.device(device).type, "cpu")

        def test_everywhere(self, device):
            self.assertTrue(False)

        def test_cpu_skips(self, device):
            if torch.device(device).type == "cpu":
                raise unittest.SkipTest("not on the CPU")
            self.assertTrue(False)

        @dtypesIfPRIVATEUSE1(torch.float32, torch.float16)
        @dtypes(torch.float32)
        def test_dtype(self, device, dtype):
            self.assertNotEqual(dtype, torch.float16)


    instantiate_device_type_tests(TestTwins, globals())
    """
)


def test_check_on_cpu_tells_our_failures_from_tests_the_cpu_does_not_pass(tmp_path, monkeypatch):
    """A failure the CPU twin passes is ours; one it fails too, skips, or does not have (a
    dtype only tpu is tested with, which pytest's command line would refuse) is not."""
    # With this hash seed (CPython 3.11) test_dtype is the first test instantiated, the one
    # PyTorch alone would give its default dtypes instead of @dtypesIfPRIVATEUSE1's.
    monkeypatch.setenv("PYTHONHASHSEED", "2")
    tests = tmp_path / "test"
    tests.mkdir()
    (tests / "test_twins.py").write_text(TWINS)
    out = tmp_path / "out.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([str(tests), "test_twins", "--check-on-cpu", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    verdict = {
        t["nodeid"].split("::")[-1]: (t["outcome"], t["fails_on_cpu"], t["cpu_outcome"])
        for t in data["tests"]
    }
    assert verdict == {
        "test_ours_tpu": ("failed", False, ""),
        "test_everywhere_tpu": ("failed", True, ""),
        "test_cpu_skips_tpu": ("failed", True, "skipped"),
        "test_dtype_tpu_float32": ("passed", False, ""),
        "test_dtype_tpu_float16": ("failed", True, "skipped"),
    }
    assert data["files"][0]["pass_percent_without_them"] == 50.0


SELF_CLASS_SUPER = textwrap.dedent(
    """
    import torch
    from torch.testing._internal.common_device_type import instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase


    class TestOldSetUp(TestCase):
        def setUp(self):
            super(self.__class__, self).setUp()
            self.scale = 3

        def tearDown(self):
            super(self.__class__, self).tearDown()

        def test_scaled(self, device):
            self.assertEqual((torch.ones(2, device=device) * self.scale).sum().item(), 6.0)


    instantiate_device_type_tests(TestOldSetUp, globals())
    """
)


def test_setup_calling_super_of_its_own_class_runs_as_under_older_torch(tmp_path):
    """v2.6.0's test_linalg.py calls ``super(self.__class__, self).setUp()``: under torch
    2.13's device classes (subclasses of the generic class) that recursed without end, on
    the CPU too, so none of its tests ran. The runner's plugin names the generic class."""
    tests = tmp_path / "test"
    tests.mkdir()
    (tests / "test_old_setup.py").write_text(SELF_CLASS_SUPER)
    out = tmp_path / "out.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([str(tests), "test_old_setup", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [(t["nodeid"].split("::")[-1], t["outcome"]) for t in data["tests"]] == [
        ("test_scaled_tpu", "passed")
    ]
