"""``python -m torch_tpu.conformance``'s command line: picks the files, runs each with
``runner``, runs the failures again on the CPU with ``cpu_check`` (``--check-on-cpu``) and
prints ``report``'s table. Apart from ``runner`` so that ``cpu_check``, which runs tests
the runner's way, and the runner do not import each other."""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from torch_tpu.conformance import cpu_check, report
from torch_tpu.conformance.report import FileResult
from torch_tpu.conformance.runner import DEFAULT_FILES, FALLBACKS, MODES, Options, run_file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_tpu.conformance",
        description="Runs PyTorch's device-generic test files on the tpu device and prints "
        "a table of the results.",
    )
    parser.add_argument("test_dir", help="the test/ folder of a PyTorch checkout")
    parser.add_argument("files", nargs="*", help=f"test files (default: {' '.join(DEFAULT_FILES)})")
    parser.add_argument("--mode", choices=MODES, default="strict", help="the eager mode")
    parser.add_argument(
        "--fallback",
        choices=FALLBACKS,
        default="silent",
        help="TORCH_TPU_CPU_FALLBACK in the tests (default: silent)",
    )
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest's -k")
    parser.add_argument("--file-timeout", type=float, default=1800.0, metavar="SECONDS")
    parser.add_argument("--test-timeout", type=float, default=300.0, metavar="SECONDS")
    parser.add_argument("--max-restarts", type=int, default=50, metavar="N")
    parser.add_argument(
        "--top", type=int, default=15, metavar="N", help="failure causes to print (default: 15)"
    )
    parser.add_argument("--json", metavar="OUT.json", help="write every test's record there")
    parser.add_argument(
        "--keep-logs", metavar="DIR", help="keep the pytest logs and progress files in DIR"
    )
    parser.add_argument(
        "--bypass-device-restrictions",
        action="store_true",
        help="run tests gated to other devices (@onlyCUDA, ...) on tpu as well",
    )
    parser.add_argument(
        "--include-non-device-tests",
        action="store_true",
        help="also run the files' tests that are not instantiated for a device "
        "(they run on the CPU)",
    )
    parser.add_argument(
        "--noconftest",
        action="store_true",
        help="do not load the checkout's test/conftest.py (an older checkout's does not "
        "load under a newer pytest)",
    )
    parser.add_argument(
        "--check-on-cpu",
        action="store_true",
        help="run the failed tests again on the CPU device and count those that fail there "
        "too apart (the test's fault, e.g. a checkout from another PyTorch release)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="run at most N tests of each file: the N whose ids hash lowest, the same "
        "tests every run (for the files with thousands of tests)",
    )
    parser.add_argument(
        "--sample-seed",
        type=int,
        default=0,
        metavar="S",
        help="with --sample: another seed picks another sample, as fixed and as spread "
        "(default 0: the ids' own hash)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="files run at the same time, each in its own pytest process (default: 1)",
    )
    return parser


_HINT = "pass the test/ folder of a PyTorch checkout"


def resolve_files(test_dir: Path, names: Sequence[str]) -> tuple[list[str], str | None]:
    """The files as pytest arguments relative to ``test_dir`` (absolute when outside it),
    or a message naming the first one missing."""
    if not test_dir.is_dir():
        return [], f"no folder {test_dir}: {_HINT}"
    files = []
    for name in names or DEFAULT_FILES:
        path = Path(name if name.endswith(".py") else name + ".py")
        candidates = [path] if path.is_absolute() else [test_dir / path, Path.cwd() / path]
        found = next((c.resolve() for c in candidates if c.is_file()), None)
        if found is None:
            hint = _HINT
            if (test_dir / "test" / path).is_file():
                hint = f"did you mean {test_dir / 'test'}?"
            return [], f"no {path} in {test_dir}: {hint}"
        root = test_dir.resolve()
        files.append(str(found.relative_to(root)) if found.is_relative_to(root) else str(found))
    return files, None


def _version_warning(test_dir: Path) -> str | None:
    """A PyTorch checkout's version.txt (one folder above test/) against the installed torch:
    test files from another release call helpers this torch lacks, or has changed."""
    import torch

    version_file = test_dir.parent / "version.txt"
    if not version_file.is_file():
        return None
    theirs = version_file.read_text().strip()
    ours = torch.__version__
    if theirs.split(".")[:2] == ours.split(".")[:2]:
        return None
    return f"warning: the tests are from PyTorch {theirs}, torch is {ours}: expect spurious errors"


def _options(args: argparse.Namespace) -> Options:
    return Options(
        mode=args.mode,
        fallback=args.fallback,
        keyword=args.keyword,
        file_timeout=args.file_timeout,
        test_timeout=args.test_timeout,
        max_restarts=args.max_restarts,
        bypass_device_restrictions=args.bypass_device_restrictions,
        include_non_device_tests=args.include_non_device_tests,
        noconftest=args.noconftest,
        check_on_cpu=args.check_on_cpu,
        sample=args.sample,
        sample_seed=args.sample_seed,
    )


def run_files(
    test_dir: Path,
    files: Sequence[str],
    options: Options,
    work_dir: Path,
    keep_logs: bool,
    jobs: int = 1,
) -> tuple[list[FileResult], bool]:
    """Runs the files, `jobs` at a time (each file's pytest process is its own), a line
    each as it finishes; stops early on ^C. Returns the results in the files' order and
    whether it was interrupted."""
    done: dict[str, FileResult] = {}

    def one(file: str) -> FileResult:
        result = run_file(test_dir, file, options, work_dir)
        result.log = result.log if keep_logs else None
        log = f" (log: {result.log})" if result.log else ""
        index = files.index(file) + 1
        print(f"[{index}/{len(files)}] {file}: {report.progress_line(result)}{log}", flush=True)
        done[file] = result
        return result

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        for future in [pool.submit(one, file) for file in files]:
            future.result()
    except KeyboardInterrupt:
        print("\ninterrupted: the table covers the files that finished", flush=True)
        pool.shutdown(wait=False, cancel_futures=True)
        return [done[f] for f in files if f in done], True
    pool.shutdown()
    return [done[f] for f in files], False


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a bad option (argparse said why)
        return int(exit_.code or 0)
    test_dir = Path(args.test_dir).expanduser()
    files, problem = resolve_files(test_dir, args.files)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import torch

    options = _options(args)
    warning = _version_warning(test_dir)
    if warning:
        print(warning, flush=True)
    print(
        f"torch {torch.__version__}, mode {options.mode}, fallback {options.fallback}: "
        f"{len(files)} file(s) from {test_dir}",
        flush=True,
    )
    keep = args.keep_logs is not None
    # absolute: each pytest process runs in the test folder and writes its progress here
    if keep:
        work_dir = Path(args.keep_logs).resolve()
    else:
        work_dir = Path(tempfile.mkdtemp(prefix="tpu_conformance_"))
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        results, interrupted = run_files(test_dir, files, options, work_dir, keep, args.jobs)
        if options.check_on_cpu and not interrupted:
            print("running the failed tests again on the CPU device ...", flush=True)
            cpu_check.check_on_cpu(test_dir, results, options, work_dir)
    finally:
        if not keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    print()
    print(report.format_report(results, args.top, options.check_on_cpu))
    if args.json:
        context = {
            "torch": torch.__version__,
            "test_dir": str(test_dir),
            "options": dataclasses.asdict(options),
        }
        Path(args.json).write_text(json.dumps(report.to_json(results, context), indent=1) + "\n")
    return 130 if interrupted else 0
