"""A rank that dies mid-job (argv "die") or stops answering (argv "hang") makes the
others raise within the group's timeout."""

import os
import sys
import time

from common import dist, init, torch

rank, world = init("tpu")
t = torch.ones(1 << 16, device="tpu")
dist.all_reduce(t)
if rank == world - 1:
    if sys.argv[1] == "hang":
        time.sleep(8)  # alive past the 5 s timeout, but never joins another collective
    os._exit(17)  # dies without a word, as a killed process does
start = time.monotonic()
try:
    for _ in range(3):
        dist.all_reduce(t)
        t.cpu()
except Exception as error:  # gloo's DistBackendError / RuntimeError
    print(
        f"rank {rank}: raised after {time.monotonic() - start:.1f}s: "
        f"{type(error).__name__}: {str(error)[:200]}",
        flush=True,
    )
    os._exit(3)
print(f"rank {rank}: no error", flush=True)
os._exit(0)
