"""Runs PyTorch test files on the tpu device: one pytest process per file, watched through
the progress file its plugin (``_plugin.py``) writes, restarted past a test that crashes
the process or runs too long."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from torch_tpu.conformance import report
from torch_tpu.conformance.report import FileResult, TestRecord

# The variables the runner hands its plugin in each pytest process.
PROGRESS_ENV = "TORCH_TPU_CONFORMANCE_PROGRESS"
DESELECT_ENV = "TORCH_TPU_CONFORMANCE_DESELECT"
BYPASS_ENV = "TORCH_TPU_CONFORMANCE_BYPASS_DEVICE_RESTRICTIONS"
ALL_TESTS_ENV = "TORCH_TPU_CONFORMANCE_INCLUDE_NON_DEVICE_TESTS"
SAMPLE_ENV = "TORCH_TPU_CONFORMANCE_SAMPLE"
SAMPLE_SEED_ENV = "TORCH_TPU_CONFORMANCE_SAMPLE_SEED"
SELECT_ENV = "TORCH_TPU_CONFORMANCE_SELECT"  # a file of the only node ids to run

DEFAULT_FILES = (
    "test_view_ops.py",
    "test_shape_ops.py",
    "test_sort_and_select.py",
    "test_indexing.py",
    "test_unary_ufuncs.py",
    "test_binary_ufuncs.py",
    "test_reductions.py",
    "test_tensor_creation_ops.py",
    "test_nn.py",
)
MODES = ("strict", "debug", "defer_and_fuse")
FALLBACKS = ("silent", "warn", "error")

# Set in the user's environment, these would override --mode (torch_tpu reads them before
# TORCH_TPU_EAGER_MODE) or add device types besides tpu: the child runs without them.
_OVERRIDING_ENV = (
    "TORCH_TPU_LAUNCH_BLOCKING",
    "TPU_LAUNCH_BLOCKING",
    "TORCH_TPU_DEFER_AND_FUSE",
    "TPU_DEFER_AND_FUSE",
    "PYTORCH_TESTING_DEVICE_EXCEPT_FOR",
    "PYTORCH_TESTING_DEVICE_FOR_CUSTOM",
)
_NORMAL_EXITS = (0, 1, 5)  # pytest: all passed, some failed, nothing collected
_POLL_SECONDS = 0.2
_LOG_TAIL_LINES = 40
# The directory holding the torch_tpu package: the child must import this torch_tpu, and an
# editable checkout is not always on a fresh interpreter's path.
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class Options:
    mode: str = "strict"
    fallback: str = "silent"
    keyword: str | None = None
    file_timeout: float = 1800.0
    test_timeout: float = 300.0
    max_restarts: int = 50
    bypass_device_restrictions: bool = False
    include_non_device_tests: bool = False
    noconftest: bool = False
    check_on_cpu: bool = False
    sample: int | None = None  # at most this many tests per file, the same ones every run
    sample_seed: int = 0  # which sample: another seed, other tests (the same every run)


# --- the progress file -----------------------------------------------------------------


class ProgressReader:
    """Reads the JSON lines the plugin appends, as they come. A line still being written
    (no newline yet) waits for the next read; a line cut short by a crash is dropped."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:  # the plugin has not started yet
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        return [event for event in map(_parse_line, lines) if event is not None]


def _parse_line(line: bytes) -> dict | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


class Tracker:
    """Follows one pytest process's events: the tests that finished (with their setup,
    call and teardown reports), the one running now, what was collected."""

    def __init__(self) -> None:
        self.reports: dict[str, list[dict]] = {}
        self.started: dict[str, float] = {}  # nodeid -> the time its setup began
        self.finished: list[str] = []
        self.running: str | None = None
        self.collected: list[str] | None = None
        self.collect_errors: list[dict] = []
        self.session_finished = False

    def feed(self, events: Sequence[dict]) -> None:
        for event in events:
            kind, nodeid = event.get("event"), event.get("nodeid", "")
            if kind == "start":
                self.started[nodeid] = event.get("t", time.time())
                self.reports[nodeid] = []
                self.running = nodeid
            elif kind == "report":
                self.reports.setdefault(nodeid, []).append(event)
                if event.get("when") == "teardown":  # a test's last report
                    self.finished.append(nodeid)
                    if self.running == nodeid:
                        self.running = None
            elif kind == "collected":
                self.collected = list(event.get("nodeids", []))
            elif kind == "collect_error":
                self.collect_errors.append(event)
            elif kind == "finish":
                self.session_finished = True


def outcome_of(reports: Sequence[dict]) -> tuple[str, dict | None]:
    """A finished test's outcome from its phase reports, with the report that decided it:
    a failed setup or teardown is an error, a failed call a failure, a skip with
    ``wasxfail`` an expected failure."""
    phases = {r.get("when"): r for r in reports}
    for when in ("setup", "call"):
        phase = phases.get(when)
        if phase is None:
            continue
        if phase["outcome"] == "failed":
            return ("error" if when == "setup" else "failed"), phase
        if phase["outcome"] == "skipped":
            return ("xfailed" if phase.get("xfail") else "skipped"), phase
    teardown = phases.get("teardown")
    if teardown is not None and teardown["outcome"] == "failed":
        return "error", teardown
    return "passed", phases.get("call")


def _finished_record(file: str, nodeid: str, reports: Sequence[dict]) -> TestRecord:
    outcome, decisive = outcome_of(reports)
    decisive = decisive or {}
    return TestRecord(
        file=file,
        nodeid=nodeid,
        outcome=outcome,
        cause=decisive.get("cause", "") if outcome in ("failed", "error") else "",
        raw=decisive.get("raw", "") if outcome != "passed" else "",
        seconds=round(sum(r.get("duration", 0.0) for r in reports), 3),
    )


def describe_exit(returncode: int | None) -> str:
    """SIGSEGV for a process killed by signal 11, else its exit code."""
    if returncode is not None and returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


# --- one pytest process ----------------------------------------------------------------


@dataclasses.dataclass
class Attempt:
    tracker: Tracker
    returncode: int | None
    stopped: str | None  # "test timeout" or "file timeout" when the runner killed it
    timed_out: str | None  # the test that ran past --test-timeout
    log_tail: str


def child_env(options: Options, progress: Path, deselect: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OVERRIDING_ENV}
    env.update(
        PYTORCH_TESTING_DEVICE_ONLY_FOR="tpu",
        TORCH_TPU_CPU_FALLBACK=options.fallback,
        TORCH_TPU_EAGER_MODE=options.mode,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")])),
    )
    # The tests meet thousands of shapes and run each program a few times: compile ops
    # for latency (unless the user chose otherwise).
    env.setdefault("TORCH_TPU_FAST_OP_COMPILE", "2")
    env[PROGRESS_ENV] = str(progress)
    env[DESELECT_ENV] = str(deselect)
    if options.sample:
        env[SAMPLE_ENV] = str(options.sample)
        env[SAMPLE_SEED_ENV] = str(options.sample_seed)
    else:
        env.pop(SAMPLE_ENV, None)
        env.pop(SAMPLE_SEED_ENV, None)
    for name, wanted in (
        (BYPASS_ENV, options.bypass_device_restrictions),
        (ALL_TESTS_ENV, options.include_non_device_tests),
    ):
        if wanted:
            env[name] = "1"
        else:
            env.pop(name, None)
    return env


def pytest_command(file: str, options: Options) -> list[str]:
    command = [sys.executable, "-m", "pytest", file, "-q", "-p", "no:cacheprovider"]
    command += ["-p", "torch_tpu.conformance._plugin"]
    if options.noconftest:
        command.append("--noconftest")
    return command + (["-k", options.keyword] if options.keyword else [])


def _kill_group(process: subprocess.Popen) -> None:
    """Kills the pytest process and whatever it started (its own session's group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the whole group is already gone
        pass
    process.wait()


def _log_tail(log: Path, offset: int) -> str:
    """The end of what the process wrote to its log after ``offset``; where faulthandler
    reported a crash, its report (the Python stacks of the crash) instead."""
    with open(log, "rb") as f:
        f.seek(offset)
        lines = f.read().decode("utf-8", errors="replace").splitlines()
    marker = "Fatal Python error"  # after pytest's progress dots, on their line
    fatal = [i for i, line in enumerate(lines) if marker in line]
    if not fatal:
        return "\n".join(lines[-_LOG_TAIL_LINES:])[:10_000]
    first = lines[fatal[-1]]
    excerpt = [first[first.index(marker) :], *lines[fatal[-1] + 1 : fatal[-1] + 100]]
    return "\n".join(excerpt)[:10_000]


def _watch(
    process: subprocess.Popen,
    reader: ProgressReader,
    tracker: Tracker,
    options: Options,
    deadline: float,
) -> tuple[str | None, str | None]:
    """Waits for the process, killing it when a test or the file runs out of time:
    returns (why it was stopped, the test that timed out)."""
    while True:
        tracker.feed(reader.read())
        if process.poll() is not None:
            return None, None
        running = tracker.running
        if running is not None and time.time() - tracker.started[running] > options.test_timeout:
            _kill_group(process)
            return "test timeout", running
        if time.monotonic() > deadline:
            _kill_group(process)
            return "file timeout", None
        time.sleep(_POLL_SECONDS)


def run_attempt(
    test_dir: Path,
    file: str,
    options: Options,
    paths: dict[str, Path],
    deselect: Sequence[str],
    deadline: float,
) -> Attempt:
    """Runs pytest on ``file`` once, without the tests in ``deselect``."""
    paths["deselect"].write_text("".join(f"{nodeid}\n" for nodeid in deselect))
    paths["progress"].unlink(missing_ok=True)  # the plugin appends: not to an older run's
    reader, tracker = ProgressReader(paths["progress"]), Tracker()
    command = pytest_command(file, options)
    with open(paths["log"], "ab") as log:
        log.write(f"\n=== {' '.join(command)} ({len(deselect)} deselected)\n".encode())
        log.flush()
        offset = log.tell()
        process = subprocess.Popen(
            command,
            cwd=test_dir,  # PyTorch's tests import their helpers relative to test/
            env=child_env(options, paths["progress"], paths["deselect"]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: killed whole, and spared the user's ^C
        )
        try:
            stopped, timed_out = _watch(process, reader, tracker, options, deadline)
        finally:
            _kill_group(process)  # also what the tests left running
    tracker.feed(reader.read())  # what it wrote just before it exited
    return Attempt(tracker, process.returncode, stopped, timed_out, _log_tail(paths["log"], offset))


# --- one file, restarted past crashes and hangs ----------------------------------------


def _crash_place(tracker: Tracker) -> str:
    if tracker.session_finished:
        return "after the last test"
    return "at import or collection" if tracker.collected is None else "between tests"


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*): (.*)$")


def last_exception(log_tail: str) -> tuple[str, str]:
    """The last ``Name: message`` line of a log (a traceback's exception, pytest's
    ``ERROR: ...``), as (the name's last component, message); else ("", last line)."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    for line in reversed(lines):
        match = _EXCEPTION_LINE.match(line)
        if match:
            return match[1].rsplit(".", 1)[-1], match[2]
    return "", lines[-1] if lines else ""


def _file_level_records(file: str, attempt: Attempt) -> list[TestRecord]:
    """A process that ended badly with no test running: import or collection errors, a
    crash outside any test, pytest failing to start or stopping by itself."""
    tracker, tail = attempt.tracker, attempt.log_tail
    if tracker.collect_errors:
        return [
            TestRecord(
                file,
                e.get("nodeid") or file,
                "error",
                e.get("cause", ""),
                e.get("raw", ""),
                log_tail=tail,
            )  # fmt: skip
            for e in tracker.collect_errors
        ]
    how = describe_exit(attempt.returncode)
    if attempt.returncode is not None and attempt.returncode < 0:
        where = _crash_place(tracker)
        return [TestRecord(file, f"{file}::<{where}>", "crashed", f"{how} {where}", log_tail=tail)]
    name, message = last_exception(tail)
    cause = report.normalize_cause(name, message) or f"pytest {how}"
    raw = f"pytest {how}: {name + ': ' if name else ''}{message}"[:300]
    return [TestRecord(file, f"{file}::<pytest>", "error", cause, raw, log_tail=tail)]


def run_file(test_dir: Path, file: str, options: Options, work_dir: Path) -> FileResult:
    """Runs one test file to the end: each time the process dies in a test (crash or
    --test-timeout), that test is recorded and the file restarts without the tests
    already done."""
    stem = file.removesuffix(".py").replace(os.sep, "__")
    paths = {
        "log": work_dir / f"{stem}.log",
        "deselect": work_dir / f"{stem}.deselect.txt",
    }
    paths["log"].write_bytes(b"")  # a kept log from an earlier run would be appended to
    start = time.monotonic()
    deadline = start + options.file_timeout
    records: dict[str, TestRecord] = {}  # nodeid -> record, in the order they finished
    universe: list[str] | None = None  # what the first process collected
    notes: list[str] = []
    attempts = 0
    while True:
        attempts += 1
        paths["progress"] = work_dir / f"{stem}.{attempts}.progress.jsonl"  # one per process
        attempt = run_attempt(test_dir, file, options, paths, list(records), deadline)
        tracker = attempt.tracker
        universe = universe if universe is not None else tracker.collected
        for nodeid in tracker.finished:
            records[nodeid] = _finished_record(file, nodeid, tracker.reports[nodeid])
        if attempt.stopped == "file timeout":
            notes.append(f"file timeout after {options.file_timeout:g} s")
            break
        running = tracker.running
        if attempt.stopped == "test timeout" and running != attempt.timed_out:
            pass  # it finished as it was killed: the test now running just reruns
        elif running is not None and running in records:
            notes.append(f"the restart ran {running} again; stopped")  # deselection failed
            break
        elif running is not None:
            records[running] = _interrupted_record(file, running, attempt)
        elif attempt.stopped is None:
            # A normal exit code is not enough: pytest also exits with 1 when it fails to
            # start (a conftest.py it cannot load), before any session.
            normal = attempt.returncode in _NORMAL_EXITS and attempt.tracker.session_finished
            if not normal:
                for record in _file_level_records(file, attempt):
                    records[record.nodeid] = record
            elif attempt.returncode == 5 and not records:
                notes.append("no tests collected")
            break
        if universe is not None and all(nodeid in records for nodeid in universe):
            break  # the test that died was the last one
        if attempts > options.max_restarts:
            notes.append(f"stopped after {options.max_restarts} restarts")
            break
    for nodeid in universe or []:
        if nodeid not in records:
            records[nodeid] = TestRecord(file, nodeid, "not_run")
    kept = str(paths["log"])
    return FileResult(file, list(records.values()), time.monotonic() - start, attempts, notes, kept)


def _interrupted_record(file: str, nodeid: str, attempt: Attempt) -> TestRecord:
    """The test that was running when the process died or was killed."""
    seconds = round(time.time() - attempt.tracker.started[nodeid], 3)
    if attempt.stopped == "test timeout":
        cause = f"> {seconds:.0f} s"
        return TestRecord(
            file, nodeid, "timeout", cause, seconds=seconds, log_tail=attempt.log_tail
        )
    how = describe_exit(attempt.returncode)
    raw = report.first_line(attempt.log_tail) if attempt.log_tail.startswith("Fatal") else ""
    return TestRecord(file, nodeid, "crashed", how, raw, seconds, attempt.log_tail)
