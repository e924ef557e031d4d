"""The multi-process PJRT client: under torchrun each rank creates its client with the
job's c10d store and its node id (the path of the GPU and TPU plugins), checked here on
the CPU plugin with TORCH_TPU_MULTIPROCESS_CLIENT=1, and the plan for each platform."""

import datetime
import os
import sys

import pytest
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed"))

from launch import free_port, run_ranks  # noqa: E402

from torch_tpu._runtime import job as _job  # noqa: E402

# A rank that does not come fails the others in 30 s, well inside each launch's deadline.
FORCED = {"TORCH_TPU_MULTIPROCESS_CLIENT": "1", "TORCH_TPU_JOB_TIMEOUT": "30"}


def test_ranks_share_the_job_store_without_torchruns_agent():
    # Rank 0 hosts the job's store at MASTER_PORT + 1.
    for r in run_ranks("job_client.py", 2, timeout=120, env=FORCED):
        assert "OK" in r.output


def test_ranks_use_torchruns_agent_store():
    port = free_port()
    agent = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    env = dict(FORCED, MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True")
    for r in run_ranks("job_client.py", 3, timeout=150, env=env):
        assert "OK" in r.output
    assert agent.check(["torch_tpu/pjrt/torch_tpu/platform/2"])


def test_a_rank_that_never_starts_is_named_at_import():
    env = dict(FORCED, TORCH_TPU_JOB_TIMEOUT="3")
    ranks = run_ranks("job_client.py", 2, "missing", timeout=90, env=env, check=False)
    assert ranks[1].returncode == 0
    assert ranks[0].returncode == 3, ranks[0].output
    assert "process 1 of 2 did not create its PJRT client within 3 s" in ranks[0].output


def torchrun_env(rank, world, local_world=None, **extra):
    env = {
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank % (local_world or world)),
        "LOCAL_WORLD_SIZE": str(local_world or world),
    }
    env.update(extra)
    return env


def test_the_gpu_plugin_gets_node_options_and_only_the_ranks_gpu():
    job = _job.plan(torchrun_env(5, 8, local_world=4), "cuda")
    assert job.options == [("node_id", 5), ("num_nodes", 8), ("visible_devices", [1])]
    assert job.environment == {}


def test_each_rank_of_a_tpu_host_gets_its_own_chip():
    job = _job.plan(torchrun_env(2, 4), "tpu")
    assert job.options == []
    assert job.environment["TPU_VISIBLE_CHIPS"] == "2"
    assert job.environment["TPU_PROCESS_BOUNDS"] == "2,2,1"
    assert job.environment["TPU_PROCESS_PORT"] == "8478"
    assert job.environment["TPU_PROCESS_ADDRESSES"].count("localhost:") == 4
    # The user's own layout wins, and several hosts need their metadata: left to libtpu.
    assert _job.plan(torchrun_env(2, 4, TPU_VISIBLE_CHIPS="0"), "tpu").environment == {}
    assert _job.plan(torchrun_env(2, 8, local_world=4), "tpu").environment == {}


@pytest.mark.parametrize(
    "env, platform",
    [
        (torchrun_env(0, 1), "cuda"),  # one rank
        ({"RANK": "0", "WORLD_SIZE": "2"}, "cuda"),  # not under torchrun
        (torchrun_env(0, 2), "cpu"),  # auto: the CPU plugin has no cross-process collectives
        (torchrun_env(0, 2, TORCH_TPU_MULTIPROCESS_CLIENT="0"), "tpu"),
    ],
)
def test_a_single_process_client_where_no_job_needs_one(env, platform):
    assert _job.plan(env, platform) is None


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="TORCH_TPU_MULTIPROCESS_CLIENT='maybe'"):
        _job.plan(torchrun_env(0, 2, TORCH_TPU_MULTIPROCESS_CLIENT="maybe"), "cuda")
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        _job.plan({"WORLD_SIZE": "two", "LOCAL_RANK": "0"}, "cuda")
    job = _job.plan(torchrun_env(0, 2), "cuda")
    with pytest.raises(RuntimeError, match="MASTER_ADDR and MASTER_PORT"):
        _job.connect_store({}, job)


def test_the_store_timeout_follows_the_job_timeout():
    job = _job.plan(torchrun_env(0, 2, TORCH_TPU_JOB_TIMEOUT="7"), "cuda")
    assert job.timeout_s == 7.0
    assert datetime.timedelta(seconds=job.timeout_s).total_seconds() == 7.0


def test_the_xla_engine_joins_processes_only_through_a_multi_process_client():
    from torch_tpu.distributed import xla_device_ids

    assert xla_device_ids([(7, 0), (7, 1), (7, 2)]) == ([0, 1, 2], "")
    # Separate processes: global device ids where the client spans processes (GPU, TPU)...
    assert xla_device_ids([(7, 0), (8, 1)], "") == ([0, 1], "")
    # ...host staging where it does not, saying why.
    devices, why = xla_device_ids([(7, 0), (8, 0)], "the cpu plugin runs no XLA collectives")
    assert devices == [] and "separate processes and the cpu plugin" in why
    devices, why = xla_device_ids([(7, 3), (8, 3)], "")
    assert devices == [] and "ranks share devices (device ids by rank: [3, 3])" in why
