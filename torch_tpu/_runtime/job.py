"""This process's place in a multi-process job, settled before the PJRT client exists.

Under torchrun (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``)
with more than one rank, plugins whose XLA collectives span processes get a
multi-process client: the GPU plugin is created with ``node_id``/``num_nodes`` and the
job's key-value store (torchrun's c10d store, under the prefix ``torch_tpu/pjrt/``),
through which it exchanges its topology and NCCL ids, and sees only the rank's own GPU
(``visible_devices = [LOCAL_RANK]``); on a TPU host each rank is given its own chip
(``TPU_VISIBLE_CHIPS=LOCAL_RANK`` and the process bounds of one host, where the user
set none) and libtpu gets the store too. Every process then checks, through the
store, that all loaded the same platform.

``TORCH_TPU_MULTIPROCESS_CLIENT``: ``auto`` (default: on for the tpu and cuda
platforms), ``1`` (also on the CPU plugin, which accepts the store and options but
runs no XLA collectives across processes: for testing the start-up path) or ``0``.
``TORCH_TPU_JOB_TIMEOUT`` (seconds, default 300) bounds the wait for the other ranks.

>>> job = plan({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
...             "LOCAL_WORLD_SIZE": "2"}, "cuda")
>>> job.options
[('node_id', 1), ('num_nodes', 2), ('visible_devices', [1])]
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

MULTI_PROCESS_PLATFORMS = ("tpu", "cuda")
_TPU_BASE_PORT = 8476
# Process bounds of one TPU host with one process per chip (the chips of a host form
# a 2-d block: 2 chips 1x2, 4 chips 2x2, 8 chips 2x4).
_TPU_HOST_PROCESS_BOUNDS = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,4,1"}


@dataclasses.dataclass
class JobPlan:
    node_id: int
    num_nodes: int
    local_rank: int
    options: list = dataclasses.field(default_factory=list)
    environment: dict = dataclasses.field(default_factory=dict)  # set before the client
    timeout_s: float = 300.0


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a whole number") from None


def _wanted(env: Mapping[str, str], platform: str) -> bool:
    text = env.get("TORCH_TPU_MULTIPROCESS_CLIENT", "auto").strip().lower() or "auto"
    if text not in ("auto", "1", "0", "on", "off", "true", "false"):
        raise ValueError(f"TORCH_TPU_MULTIPROCESS_CLIENT={text!r}: expected auto, 1 or 0")
    if text == "auto":
        return platform in MULTI_PROCESS_PLATFORMS
    return text in ("1", "on", "true")


def _tpu_chip_environment(env: Mapping[str, str], local_rank: int, local_size: int) -> dict:
    """libtpu gives a process every chip of its host unless told otherwise; one process
    per chip needs the chip and the host's process layout (PyTorch/XLA and JAX set the
    same variables). Only where the user set none, and only for one host."""
    if local_size <= 1 or any(k in env for k in ("TPU_VISIBLE_CHIPS", "TPU_PROCESS_BOUNDS")):
        return {}
    bounds = _TPU_HOST_PROCESS_BOUNDS.get(local_size)
    if bounds is None or _int(env, "WORLD_SIZE", 1) != local_size:
        return {}
    ports = [_TPU_BASE_PORT + i for i in range(local_size)]
    return {
        "TPU_VISIBLE_CHIPS": str(local_rank),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": bounds,
        "TPU_PROCESS_ADDRESSES": ",".join(f"localhost:{p}" for p in ports),
        "TPU_PROCESS_PORT": str(ports[local_rank]),
        "CLOUD_TPU_TASK_ID": str(local_rank),
    }


def plan(env: Mapping[str, str], platform: str) -> JobPlan | None:
    """The multi-process client's settings for this process, or None for a plain
    single-process client."""
    size = _int(env, "WORLD_SIZE", 1)
    if size <= 1 or "LOCAL_RANK" not in env or not _wanted(env, platform):
        return None
    rank = _int(env, "RANK", 0)
    local_rank = _int(env, "LOCAL_RANK", 0)
    local_size = _int(env, "LOCAL_WORLD_SIZE", 1)
    timeout_s = float(env.get("TORCH_TPU_JOB_TIMEOUT", "").strip() or 300)
    job = JobPlan(node_id=rank, num_nodes=size, local_rank=local_rank, timeout_s=timeout_s)
    if platform in ("cuda", "cpu"):
        # The CPU plugin accepts (and ignores) the node options: the path stays the same.
        job.options = [("node_id", rank), ("num_nodes", size)]
    if platform == "cuda":
        job.options.append(("visible_devices", [local_rank]))
    if platform == "tpu":
        job.environment = _tpu_chip_environment(env, local_rank, local_size)
    return job


def connect_store(env: Mapping[str, str], job: JobPlan):
    """The job's c10d store, prefixed so that the plugin's keys meet nobody else's.
    torchrun's agent hosts it at MASTER_ADDR:MASTER_PORT; without the agent, rank 0
    hosts one at MASTER_PORT + 1 (init_process_group's own takes MASTER_PORT)."""
    import datetime

    import torch.distributed as dist

    address = env.get("MASTER_ADDR", "").strip()
    port = _int(env, "MASTER_PORT")
    if not address or port is None:
        raise RuntimeError(
            "torch_tpu's multi-process client needs MASTER_ADDR and MASTER_PORT (torchrun "
            "sets them); set TORCH_TPU_MULTIPROCESS_CLIENT=0 for one client per process"
        )
    agent = env.get("TORCHELASTIC_USE_AGENT_STORE", "").strip().lower() == "true"
    if not agent:
        port += 1
    store = dist.TCPStore(
        address,
        port,
        world_size=job.num_nodes,
        is_master=not agent and job.node_id == 0,
        timeout=datetime.timedelta(seconds=job.timeout_s),
        wait_for_workers=False,
    )
    return dist.PrefixStore("torch_tpu/pjrt", store)


def initialize_client(initialize, plugin_path: str, platform: str, options: list) -> None:
    """Creates the runtime's PJRT client through ``initialize`` (``_C._initialize``),
    as a multi-process client where this process is one rank of several."""
    job = plan(os.environ, platform)
    if job is None:
        initialize(plugin_path, options)
        return
    os.environ.update(job.environment)
    store = connect_store(os.environ, job)
    initialize(
        plugin_path,
        options + job.options,
        store=store,
        node_id=job.node_id,
        num_nodes=job.num_nodes,
        timeout_s=job.timeout_s,
    )
