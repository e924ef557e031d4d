"""Shared pytest setup for torch_tpu's Python tests: makes the repository importable,
points the disk compile cache at a temporary directory (never the user's ~/.cache; it
is warm across test files and removed at exit), gives the CPU plugin 4 devices, and imports
torch_tpu once, so every test file sees the ``tpu`` device."""

import atexit
import os
import shutil
import sys
import tempfile

_CACHE_DIR = tempfile.mkdtemp(prefix="torch_tpu_test_cache_")
os.environ["TORCH_TPU_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
# The multi-device tests need 4 devices whatever the machine's core count (by default the CPU
# plugin has one per core, at most 4); tests of the default clear this in their subprocess.
os.environ.setdefault("TORCH_TPU_CPU_DEVICES", "4")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_tpu  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "xla_cpu_shortcut: checks a path that exists only for XLA:CPU (listed in "
        "csrc/runtime/xla_cpu_shortcuts.h); it does not apply with TORCH_TPU_XLA_CPU_SHORTCUTS=0",
    )


def pytest_collection_modifyitems(config, items):
    # With the shortcuts off the process runs the accelerator path, where these paths do not
    # exist: their tests report as skipped (never passed), with the reason.
    if torch_tpu._C._plugin_info().get("xla_cpu_shortcuts", True):
        return
    skip = pytest.mark.skip(reason="an XLA:CPU shortcut, off with TORCH_TPU_XLA_CPU_SHORTCUTS=0")
    for item in items:
        if "xla_cpu_shortcut" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def strict():
    """Runs the test in the strict eager mode (each op its own program, run at once)."""
    with torch_tpu.eager_mode("strict"):
        yield


@pytest.fixture
def native():
    """Fails the test if anything falls back to the CPU."""
    previous = torch_tpu._C._get_fallback_mode()
    torch_tpu._C._set_fallback_mode("error")
    try:
        yield
    finally:
        torch_tpu._C._set_fallback_mode(previous)


@pytest.fixture(autouse=True)
def _no_error_left_pending():
    """A deferred error (a bad index in defer_and_fuse) that a test leaves unread would
    surface in whichever test waits next: raise it here, in the test that caused it."""
    yield
    torch.tpu.synchronize()


_opinfo_passed: set[tuple[str, str, str, str]] = set()


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed and "test_opinfo.py::test_opinfo[" in report.nodeid:
        case = report.nodeid.split("[", 1)[1].rstrip("]")
        name, dtype, mode, eager = case.rsplit("-", 3)
        _opinfo_passed.add((name, dtype, mode, eager))


def pytest_terminal_summary(terminalreporter):
    for eager in sorted({e for *_, e in _opinfo_passed}):
        passed = [(n, d, m) for n, d, m, e in _opinfo_passed if e == eager]
        forward = {(n, d) for n, d, m in passed if m == "forward"}
        grads = {(n, d) for n, d, m in passed if m == "grad"}
        ops = {n for n, _ in forward}
        terminalreporter.write_line(
            f"OpInfo conformance ({eager}): {len(forward)} (op, dtype) pairs pass on tpu across "
            f"{len(ops)} OpInfos; gradients match for {len(grads)} of them (float32)"
        )
