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
        env = runner.child_env(options, progress, deselect)
        env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "cpu"
        env[runner.ALL_TESTS_ENV] = "1"  # the CPU classes are not tpu's device classes
        command = [sys.executable, "-m", "pytest", *failed, "-q", "-p", "no:cacheprovider"]
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
        for nodeid in tracker.finished:
            outcome = runner._finished_record(result.file, nodeid, tracker.reports[nodeid]).outcome
            if outcome in ("failed", "error") and nodeid in failed:
                failed[nodeid].fails_on_cpu = True
