"""Ranks create the multi-process PJRT client (TORCH_TPU_MULTIPROCESS_CLIENT=1: the CPU
plugin accepts the store and node options and ignores them): each rank's client gets its
node id, the node count and the job's c10d store, through which every rank published
its platform (read back here over a separate connection), and collectives still work.
argv "missing": the last rank never imports torch_tpu, so the others must fail at
import with an error that names it, within TORCH_TPU_JOB_TIMEOUT."""

import os
import sys

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if sys.argv[1:] == ["missing"]:
    if rank == world - 1:
        os._exit(0)
    try:
        from common import torch  # noqa: F401  (imports torch_tpu)
    except RuntimeError as error:
        print(f"rank {rank}: import raised: {error}", flush=True)
        os._exit(3)
    print(f"rank {rank}: import did not raise", flush=True)
    os._exit(1)

from common import TIMEOUT, assert_close, dist, finish, init, torch  # noqa: E402

import torch_tpu  # noqa: E402

info = torch_tpu._C._job_info()
assert info["multi_process"], info
assert (info["node_id"], info["num_nodes"]) == (rank, world), info
options = dict(info["client_options"])
assert (options["node_id"], options["num_nodes"]) == (rank, world), options

plugin = torch_tpu._C._plugin_info()
agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
port = int(os.environ["MASTER_PORT"]) + (0 if agent else 1)
store = dist.TCPStore(os.environ["MASTER_ADDR"], port, is_master=False, timeout=TIMEOUT)
for node in range(world):
    published = store.get(f"torch_tpu/pjrt/torch_tpu/platform/{node}").decode()
    assert published == f"{plugin['platform_name']} {plugin['platform_version']}", published

init("tpu")
t = torch.full((5,), float(rank + 1), device="tpu")
dist.all_reduce(t)
assert_close(t, torch.full((5,), float(sum(range(1, world + 1)))), "all_reduce")
# The CPU plugin runs no XLA collectives across processes: host staging serves them.
assert torch_tpu.distributed.engine_name() == "host_staging(gloo)"
finish()
