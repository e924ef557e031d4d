"""Runs one variant of a benchmark script in a fresh process: size buckets on, or off for
the variant "no buckets" (TORCH_TPU_DYNAMIC_BUCKETS=0), with an empty compile cache, and
reads the JSON line the script prints last (bench/dynamic.py, bench/generate.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile


def in_fresh_process(script: str, variant: str, argv: list[str], env: dict | None = None) -> dict:
    env = dict(os.environ, **(env or {}))
    env["TORCH_TPU_DYNAMIC_BUCKETS"] = "0" if variant == "no buckets" else "1"
    with tempfile.TemporaryDirectory() as cache:
        env["TORCH_TPU_CACHE_DIR"] = cache
        out = subprocess.run(
            [sys.executable, script, *argv, "--one", variant],
            env=env,
            capture_output=True,
            text=True,
        )
    if out.returncode != 0:
        raise SystemExit(f"variant {variant!r} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
