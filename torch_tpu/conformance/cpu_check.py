"""``--check-on-cpu``: runs each file's failed tests again on PyTorch's own CPU device and
marks those that fail there too. Such a failure is the test's, not tpu's: typically a test
file from another PyTorch release than the installed torch (a helper that changed, a NumPy
function that is gone), which the table then counts apart."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from torch_tpu.conformance import runner
from torch_tpu.conformance.report import FileResult

# TestFooPRIVATEUSE1::test_bar_tpu_float32 -> TestFooCPU::test_bar_cpu_float32
_CLASS = re.compile(r"(PRIVATEUSE1|TPU)(?=::)")
_DEVICE = re.compile(r"_tpu(?=(_|$|\[))")


def cpu_nodeid(nodeid: str) -> str:
    return _DEVICE.sub("_cpu", _CLASS.sub("CPU", nodeid))


def check_on_cpu(test_dir: Path, results: list[FileResult], options: runner.Options,
                 work_dir: Path) -> None:  # fmt: skip
    """Marks each failed tpu test whose CPU twin does not pass: it fails there too
    (``fails_on_cpu``), or it does not run there (``cpu_outcome`` "skipped": a test gated to
    CUDA, a dtype only accelerators are tested with)."""
    for result in results:
        failed = {
            cpu_nodeid(r.nodeid): r
            for r in result.records
            if r.outcome in ("failed", "error") and "::" in r.nodeid and "<" not in r.nodeid
        }
        if not failed:
            continue
        stem = result.file.removesuffix(".py").replace("/", "__")
        progress = work_dir / f"{stem}.cpu.progress.jsonl"
        progress.unlink(missing_ok=True)
        deselect = work_dir / f"{stem}.cpu.deselect.txt"
        deselect.write_text("")
        select = work_dir / f"{stem}.cpu.select.txt"
        select.write_text("".join(f"{nodeid}\n" for nodeid in failed))
        env = runner.child_env(options, progress, deselect)
        env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "cpu"
        env[runner.ALL_TESTS_ENV] = "1"  # the CPU classes are not tpu's device classes
        env[runner.SELECT_ENV] = str(select)
        env.pop(runner.SAMPLE_ENV, None)
        command = [sys.executable, "-m", "pytest", result.file, "-q", "-p", "no:cacheprovider"]
        command += ["-p", "torch_tpu.conformance._plugin"]
        if options.noconftest:
            command.append("--noconftest")
        with open(work_dir / f"{stem}.cpu.log", "wb") as log:
            try:
                subprocess.run(command, cwd=test_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=options.file_timeout)  # fmt: skip
            except subprocess.TimeoutExpired:
                pass
        tracker = runner.Tracker()
        tracker.feed(runner.ProgressReader(progress).read())
        finished = set(tracker.finished)
        collected = set(tracker.collected or [])
        for nodeid, record in failed.items():
            if nodeid in finished:
                reports = tracker.reports[nodeid]
                outcome = runner._finished_record(result.file, nodeid, reports).outcome
            elif tracker.collected is not None and nodeid not in collected:
                outcome = "skipped"  # the CPU has no such test (a dtype only others test)
            else:
                continue  # the CPU run did not get to it: no verdict
            if outcome in ("failed", "error"):
                record.fails_on_cpu = True
            elif outcome in ("skipped", "xfailed"):
                record.fails_on_cpu = True
                record.cpu_outcome = "skipped"
