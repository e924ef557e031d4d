"""The pytest plugin of ``python -m torch_tpu.conformance``, loaded in each pytest process
with ``-p torch_tpu.conformance._plugin``, so before the test file is collected.

It imports torch_tpu before any test module can import PyTorch's common_device_type, which
decides when it is imported which device types get test classes: the tpu device must exist
by then. It appends one JSON
line per event to the runner's progress file, flushed at once, so that when a test
crashes the process the runner still knows which test was running. It leaves out the
tests the runner lists in its deselect file (those already done before a restart), and,
unless asked not to, the tests that are not instantiated for a device.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import textwrap
import time
from typing import IO

import pytest
import torch

import torch_tpu  # before common_device_type: see above
from torch_tpu.conformance import runner
from torch_tpu.conformance.report import first_line, normalize_cause

_progress: IO[str] | None = None


def _emit(event: dict) -> None:
    global _progress
    path = os.environ.get(runner.PROGRESS_ENV)
    if not path:
        return
    if _progress is None:
        _progress = open(path, "a", encoding="utf-8")  # open for the whole session
    event["t"] = time.time()
    _progress.write(json.dumps(event) + "\n")
    _progress.flush()  # in the kernel's hands now: a crash right after does not lose it


def _bypass_device_restrictions() -> str | None:
    """Lets @onlyCUDA-style gates run their tests on tpu (PrivateUse1TestBase's switch,
    where this torch has it). Returns a problem, if any."""
    from torch.testing._internal import common_device_type

    base = common_device_type.PrivateUse1TestBase
    if not hasattr(base, "bypass_device_restrictions"):
        return f"torch {torch.__version__} has no PrivateUse1TestBase.bypass_device_restrictions"
    base.bypass_device_restrictions = True
    return None


def _look_up_dtypes_by_backend_name() -> None:
    """Makes ``@dtypesIfPRIVATEUSE1`` hold for every test. It files its dtypes under the
    backend's name ("tpu"), which the class's ``device_type`` becomes only once the first
    test has been instantiated (its setUpClass renames it): the test instantiated first in
    a file, which depends on the hash seed, would get the default dtypes instead."""
    from torch.testing._internal import common_device_type

    base = common_device_type.PrivateUse1TestBase
    default = base._get_dtypes.__func__
    name = torch._C._get_privateuse1_backend_name()

    def _get_dtypes(cls, test):
        dtypes = getattr(test, "dtypes", None)
        if cls.device_type == "privateuse1" and dtypes and name in dtypes:
            return dtypes[name]
        return default(cls, test)

    base._get_dtypes = classmethod(_get_dtypes)


def _named_super(function, generic_class):
    """`function` (a method of `generic_class`) recompiled with ``super(self.__class__,
    self)`` replaced by ``super(<generic_class>, self)``; None if it has no such call."""
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError):
        return None
    source = textwrap.dedent("".join(lines))
    if "super(self.__class__, self)" not in source:
        return None
    name = f"_conformance_generic_{generic_class.__name__}"
    function.__globals__[name] = generic_class  # the class leaves the module's scope
    source = source.replace("super(self.__class__, self)", f"super({name}, self)")
    code = compile("\n" * (first - 1) + source, function.__code__.co_filename, "exec")
    defined: dict = {}
    exec(code, function.__globals__, defined)
    return defined[function.__name__]


def _generic_classes_call_their_own_super() -> None:
    """v2.6.0's ``test_linalg.py`` calls ``super(self.__class__, self).setUp()`` in its
    ``setUp``. Torch 2.6 copied the generic class's members into each device class; torch
    2.13 makes the device class a subclass of the generic one, so that call finds the same
    ``setUp`` again and recurses until the stack runs out, on every device, the CPU too.
    The call is rewritten to name the generic class, which is what it meant."""
    from torch.testing._internal import common_device_type

    original = common_device_type.instantiate_device_type_tests

    def instantiate_device_type_tests(generic_test_class, scope, *args, **kwargs):
        for name in ("setUp", "tearDown"):
            method = generic_test_class.__dict__.get(name)
            fixed = _named_super(method, generic_test_class) if method is not None else None
            if fixed is not None:
                setattr(generic_test_class, name, fixed)
        return original(generic_test_class, scope, *args, **kwargs)

    common_device_type.instantiate_device_type_tests = instantiate_device_type_tests


def pytest_configure(config: pytest.Config) -> None:
    problem = None
    _look_up_dtypes_by_backend_name()
    _generic_classes_call_their_own_super()
    if os.environ.get(runner.BYPASS_ENV) == "1":
        problem = _bypass_device_restrictions()
    _emit(
        {
            "event": "session",
            "pid": os.getpid(),
            "torch": torch.__version__,
            "eager_mode": torch_tpu.get_eager_mode(),
            "fallback": torch_tpu._C._get_fallback_mode(),
            "problem": problem,
        }
    )


def _is_device_test(item: pytest.Item) -> bool:
    """A test of a class instantiate_device_type_tests made for tpu (``*PRIVATEUSE1``):
    the others (plain TestCase classes) run on the CPU whatever the device."""
    device_type = getattr(getattr(item, "cls", None), "device_type", None)
    return device_type in ("privateuse1", torch._C._get_privateuse1_backend_name())


def _ids_in(variable: str) -> set[str] | None:
    path = os.environ.get(variable)
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip()}


def _sample_key(nodeid: str) -> str:
    # Seed 0 hashes the id alone (the sample every earlier run took); another seed picks
    # another, equally spread, sample.
    seed = os.environ.get(runner.SAMPLE_SEED_ENV, "0")
    text = nodeid if seed == "0" else f"{seed}:{nodeid}"
    return hashlib.sha1(text.encode()).hexdigest()


def _sampled(items: list[pytest.Item]) -> set[str] | None:
    """The node ids of ``--sample N``: the N tests whose ids hash lowest. The choice
    depends on the ids alone, so every run, restart and machine picks the same tests,
    spread over the whole file (ops, dtypes and classes alike)."""
    size = os.environ.get(runner.SAMPLE_ENV)
    if not size or len(items) <= int(size):
        return None
    return set(sorted((item.nodeid for item in items), key=_sample_key)[: int(size)])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    done = _ids_in(runner.DESELECT_ENV) or set()
    # Ids a test file may not have (the CPU twin of a tpu-only dtype) are no error here,
    # as they would be on pytest's command line.
    selected = _ids_in(runner.SELECT_ENV)
    every_class = os.environ.get(runner.ALL_TESTS_ENV) == "1"
    candidates = [item for item in items if every_class or _is_device_test(item)]
    sample = _sampled(candidates)
    kept, dropped = [], []
    for item in items:
        wanted = item.nodeid not in done and (every_class or _is_device_test(item))
        wanted = wanted and (sample is None or item.nodeid in sample)
        wanted = wanted and (selected is None or item.nodeid in selected)
        (kept if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_finish(session: pytest.Session) -> None:
    _emit({"event": "collected", "nodeids": [item.nodeid for item in session.items]})


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if not report.failed:
        return
    text = str(report.longrepr)
    # pytest marks the exception's lines of the report with "E   ".
    marked = "\n".join(line[1:] for line in text.splitlines() if line.startswith("E "))
    name, message = runner.last_exception(marked or text)
    raw = (f"{name}: {message}" if name else message)[:300]
    cause = normalize_cause(name, message)
    _emit({"event": "collect_error", "nodeid": report.nodeid, "cause": cause, "raw": raw})


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    _emit({"event": "start", "nodeid": nodeid})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Keeps the exception of a failed phase on its report: the report's text has been
    formatted already, the exception's class and message are what causes group by."""
    report = yield
    if report.failed and call.excinfo is not None:
        try:
            message = str(call.excinfo.value)
        except Exception:  # a __str__ that fails is no reason to lose the report
            message = ""
        report._conformance_exception = (call.excinfo.type.__name__, message)
    return report


def _skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return first_line(str(report.longrepr[2]).removeprefix("Skipped: "))
    return first_line(getattr(report, "wasxfail", "") or "")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    event = {
        "event": "report",
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "duration": report.duration,
        "xfail": hasattr(report, "wasxfail"),  # an expected failure reports as skipped
        "cause": "",
        "raw": "",
    }
    if report.failed:
        exception = getattr(report, "_conformance_exception", None)
        if exception is None:  # reported by something else than an exception in the test
            crash = getattr(report.longrepr, "reprcrash", None)
            text = crash.message if crash is not None else str(report.longrepr)
            name, _, message = first_line(text).partition(": ")
            exception = (name, message)
        name, message = exception
        event["cause"] = normalize_cause(name, message)
        event["raw"] = f"{name}: {first_line(message)}"[:300] if message.strip() else name
    elif report.skipped:
        event["raw"] = _skip_reason(report)
    _emit(event)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _emit({"event": "finish", "exitstatus": int(exitstatus)})
