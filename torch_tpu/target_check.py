"""Checks a script's programs for TPUs and GPUs without one.

    python -m torch_tpu.target_check --target v6e:1x1 --target h100 [--json F]
        [--warm-cache DIR] script.py ARGS...
    python -m torch_tpu.target_check --target v6e:1x1 --programs DIR [--jobs N]

The first form runs the script here, unchanged (on whatever platform torch_tpu picks, with the
XLA:CPU-only shortcuts off so the programs are the ones an accelerator runs), compiles every
program it compiles also for each target, and ends with a table per target. The second
compiles programs dumped with TORCH_TPU_DUMP_PROGRAMS (distinct texts once, over N processes).
Exit status 1 when a program is refused or does not fit the chip's memory, or the script
raised; 2 for bad arguments (an unknown target, a missing compiler).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import traceback

_OPTIONS_MARK = "\n// compile options: "


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_tpu.target_check",
        description="Compile every program of a script also for TPU/GPU targets, without one.",
    )
    parser.add_argument(
        "--target",
        action="append",
        required=True,
        metavar="NAME",
        help="v4|v5e|v5p|v6e|tpu7x[:TOPOLOGY] or a100|h100|h200|b200[:PxHxD]; repeatable",
    )
    parser.add_argument("--json", metavar="FILE", help="write every result to FILE")
    parser.add_argument(
        "--warm-cache",
        metavar="DIR",
        help="store the compiled programs in DIR, "
        "a compile cache the target's platform loads (TORCH_TPU_CACHE_DIR=DIR)",
    )
    parser.add_argument(
        "--programs", metavar="DIR", help="check the .mlir files of DIR instead of running a script"
    )
    parser.add_argument("--jobs", type=int, default=1, help="processes for --programs")
    parser.add_argument("--shard", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--top", type=int, default=10, help="programs listed per target")
    parser.add_argument("script", nargs="?", help="the script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return parser


def _split_key(text: str) -> tuple[str, bytes]:
    """A dumped program's text and compile options (a collective's key names them)."""
    at = text.rfind(_OPTIONS_MARK)
    if at < 0:
        return text, b""
    return text[:at], bytes.fromhex(text[at + len(_OPTIONS_MARK) :].strip())


def _label(path: str) -> str:
    base = os.path.basename(path)[: -len(".mlir")]
    number, _, label = base.partition("-")  # "00012-aten.add" or "00012_4242-aten.add"
    return label if number.replace("_", "").isdigit() and label else base


def _program_files(folder: str) -> list[str]:
    """The distinct programs of ``folder``: the first file of each text, sorted by name."""
    seen, files = set(), []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".mlir"):
            continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        text = text.replace("// tier: quick\n", "")
        if text not in seen:
            seen.add(text)
            files.append(path)
    return files


def _check_files(files: list[str], target_names: list[str], warm_cache: str | None) -> list[dict]:
    import torch_tpu  # noqa: F401  (the runtime and its bindings)
    from torch_tpu import _C, targets

    check = targets.start(target_names, warm_cache)
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            program, options = _split_key(f.read().replace("// tier: quick\n", ""))
        _C._target_check_submit(program, _label(path), options, path)
    return check.finish()


def _check_folder(args) -> list[dict]:
    files = _program_files(args.programs)
    if args.shard:
        index, count = (int(n) for n in args.shard.split("/"))
        return _check_files(files[index::count], args.target, args.warm_cache)
    jobs = max(1, min(args.jobs, len(files) or 1))
    if jobs == 1:
        return _check_files(files, args.target, args.warm_cache)
    # One process a shard: each loads the compilers once and compiles on its own core.
    outputs, procs = [], []
    folder = tempfile.mkdtemp(prefix="torch_tpu_target_shards_")
    try:
        for index in range(jobs):
            out = os.path.join(folder, f"{index}.json")
            command = [
                sys.executable,
                "-m",
                "torch_tpu.target_check",
                "--programs",
                args.programs,
                "--shard",
                f"{index}/{jobs}",
                "--json",
                out,
            ]
            for target in args.target:
                command += ["--target", target]
            if args.warm_cache:
                command += ["--warm-cache", args.warm_cache]
            outputs.append(out)
            procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
        codes = [p.wait() for p in procs]
        results = []
        for out, code in zip(outputs, codes):
            if not os.path.exists(out):
                raise RuntimeError(f"a target-check shard exited with {code} and wrote no results")
            with open(out) as f:
                results += json.load(f)
        return results
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_script(args) -> tuple[list[dict], int]:
    """Runs the script with every program also compiled for the targets; its results and
    exit status (1 where the script raised or exited non-zero)."""
    import torch_tpu  # noqa: F401
    from torch_tpu import targets

    check = targets.start(args.target, args.warm_cache)
    status = 0
    sys.argv = [args.script, *args.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    try:
        runpy.run_path(args.script, run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code
        if code not in (None, 0):
            print(f"target_check: {args.script} exited with {code}", file=sys.stderr)
            status = 1
    except BaseException:  # noqa: BLE001  (the table still covers what ran)
        traceback.print_exc()
        print(
            f"target_check: {args.script} raised (above); the table covers the programs "
            "compiled before that",
            file=sys.stderr,
        )
        status = 1
    return check.finish(), status


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if (args.programs is None) == (args.script is None):
        print("target_check: give a script to run, or --programs DIR", file=sys.stderr)
        return 2
    if os.environ.get("TORCH_TPU_XLA_CPU_SHORTCUTS") != "0" and args.script:
        # The programs an accelerator runs, with no XLA:CPU host kernel in them: the switch is
        # read when torch_tpu starts, which `python -m torch_tpu.target_check` has already
        # done, so start again with it set.
        env = dict(os.environ, TORCH_TPU_XLA_CPU_SHORTCUTS="0")
        argv = sys.argv[1:] if argv is None else argv
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, "-m", "torch_tpu.target_check", *argv], env)
    dump_dir = None
    if args.script and not os.environ.get("TORCH_TPU_DUMP_PROGRAMS"):
        # So that a refusal can name the program's file.
        dump_dir = tempfile.mkdtemp(prefix="torch_tpu_target_check_")
        os.environ["TORCH_TPU_DUMP_PROGRAMS"] = dump_dir
    from torch_tpu.targets import TargetNameError, TargetUnavailableError, parse, report

    try:
        for target in args.target:
            parse(target)
        if args.programs:
            results, status = _check_folder(args), 0
        else:
            results, status = _run_script(args)
    except (TargetNameError, TargetUnavailableError) as error:
        print(f"target_check: {error}", file=sys.stderr)
        return 2
    report.annotate(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.shard:
        return 0
    print(report.format_table(results, args.top))
    bad = report.failures(results)
    if dump_dir is not None:
        keep = {r["dump_path"] for r in bad}
        for name in os.listdir(dump_dir):
            if os.path.join(dump_dir, name) not in keep:
                os.remove(os.path.join(dump_dir, name))
        if not keep:
            os.rmdir(dump_dir)
    if bad:
        print(
            f"target_check: {len(bad)} program(s) refused or over the chip's memory",
            file=sys.stderr,
        )
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
