"""Runs a worker script as N ranks the way torchrun does (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), with a hard deadline: a deadlock fails in
seconds, and every rank's output is in the failure message."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass

from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@dataclass
class Rank:
    rank: int
    returncode: int
    output: str


def run_ranks(
    worker: str,
    world_size: int,
    *args: str,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> list[Rank]:
    """Starts ``tests/distributed/<worker>`` on ``world_size`` ranks; returns each rank's
    exit code and output. With ``check``, fails unless every rank exits 0."""
    port = str(free_port(count=2))  # the job store takes MASTER_PORT + 1
    base = dict(os.environ)
    base.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=port,
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        OMP_NUM_THREADS="1",
        PYTHONPATH=ROOT + os.pathsep + base.get("PYTHONPATH", ""),
        PYTHONUNBUFFERED="1",
    )
    base.pop("TORCH_TPU_CPU_DEVICES", None)
    base.update(env or {})
    procs = []
    for rank in range(world_size):
        rank_env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append(
            subprocess.Popen(
                [sys.executable, os.path.join(HERE, worker), *args],
                env=rank_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    deadline = time.monotonic() + timeout
    results, timed_out = [], False
    for rank, proc in enumerate(procs):
        try:
            output, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            for p in procs:
                p.kill()
            output, _ = proc.communicate()
        results.append(Rank(rank, proc.returncode, output))
    if timed_out or (check and any(r.returncode != 0 for r in results)):
        report = "\n".join(
            f"--- rank {r.rank} (exit {r.returncode}) ---\n{r.output[-6000:]}" for r in results
        )
        what = f"still running after {timeout:.0f} s (deadlock?)" if timed_out else "failed"
        raise AssertionError(f"{worker} on {world_size} ranks {what}\n{report}")
    return results
