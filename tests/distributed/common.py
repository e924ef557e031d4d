"""What every worker script shares: start torch_tpu and the process group from the
environment torchrun (or launch.py) sets, with a short timeout."""

from __future__ import annotations

import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import torch_tpu  # noqa: E402,F401

TIMEOUT = datetime.timedelta(seconds=int(os.environ.get("DIST_TEST_TIMEOUT", "30")))


def init(backend: str | None = None) -> tuple[int, int]:
    dist.init_process_group(backend, timeout=TIMEOUT)
    return dist.get_rank(), dist.get_world_size()


def finish() -> None:
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {os.environ['RANK']}: OK", flush=True)


def assert_close(actual: torch.Tensor, expected: torch.Tensor, what: str, **tol) -> None:
    actual = actual.cpu() if isinstance(actual, torch.Tensor) else actual
    try:
        torch.testing.assert_close(actual, expected, **tol)
    except AssertionError as error:
        raise AssertionError(f"rank {dist.get_rank()}: {what}: {error}") from None
