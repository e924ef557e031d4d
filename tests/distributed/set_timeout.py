"""torch.distributed.set_timeout (provided for TorchTitan where torch 2.13 lacks it)
shortens the group's timeout: with a 30 s timeout at init and 2 s set afterwards, the
ranks waiting for a silent peer raise in seconds."""

import datetime
import os
import time

from common import TIMEOUT, dist, init, torch

rank, world = init("tpu")
import torchtitan.distributed.utils  # noqa: F401,E402  (loading TorchTitan provides it)

assert TIMEOUT.total_seconds() == 30, TIMEOUT
t = torch.ones(8, device="tpu")
dist.all_reduce(t)
dist.set_timeout(datetime.timedelta(seconds=2))
if rank == world - 1:
    time.sleep(12)  # never joins the next collective
    os._exit(17)
start = time.monotonic()
try:
    dist.all_reduce(t)
    t.cpu()
except Exception as error:
    print(f"rank {rank}: raised after {time.monotonic() - start:.1f}s: {type(error).__name__}")
    os._exit(3)
print(f"rank {rank}: no error", flush=True)
os._exit(0)
