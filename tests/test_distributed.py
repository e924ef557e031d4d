"""torch.distributed on tpu: each test launches real ranks (separate processes, like
torchrun) running a script from tests/distributed/, with a deadline, and every rank
checks its results against torch on the CPU. See tests/distributed/launch.py."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed"))

from launch import run_ranks  # noqa: E402

STRICT = {"TORCH_TPU_EAGER_MODE": "strict"}
FUSED = {"TORCH_TPU_EAGER_MODE": "defer_and_fuse"}


@pytest.mark.parametrize(
    "world, backend, env",
    [(2, "tpu", STRICT), (4, "default", STRICT), (2, "tpu_dist", FUSED), (3, "tpu", FUSED)],
    ids=["2-tpu-strict", "4-default-strict", "2-tpu_dist-fused", "3-tpu-fused"],
)
def test_collectives(world, backend, env):
    """Every collective, dtype, reduction and view; async works; p2p; functional and
    object collectives; cpu tensors; subgroups."""
    for r in run_ranks("collectives.py", world, backend, env=env, timeout=180):
        assert f"rank {r.rank}: OK" in r.output


def test_bad_input_raises_clear_errors_and_the_group_survives():
    for r in run_ranks("bad_input.py", 2, timeout=90):
        assert f"rank {r.rank}: OK" in r.output


@pytest.mark.parametrize("how", ["die", "hang"])
def test_a_lost_rank_makes_the_others_raise_within_the_timeout(how):
    ranks = run_ranks(
        "dead_rank.py", 3, how, timeout=60, check=False, env={"DIST_TEST_TIMEOUT": "5"}
    )
    assert ranks[-1].returncode == 17
    for r in ranks[:-1]:
        assert r.returncode == 3, r.output
        assert f"rank {r.rank}: raised after" in r.output, r.output
        seconds = float(r.output.split("raised after ")[1].split("s:")[0])
        assert seconds < 20, r.output


def test_init_without_rendezvous_raises():
    (r,) = run_ranks("no_rendezvous.py", 1, timeout=60)
    assert "MASTER_ADDR" in r.output


@pytest.mark.parametrize("env", [STRICT, FUSED], ids=["strict", "fused"])
def test_ddp_equals_one_process_on_the_whole_batch(env):
    """Both gradient_as_bucket_view settings, no_sync(), find_unused_parameters=True."""
    cases = "ddp,ddp_bucket_view,ddp_no_sync,ddp_unused"
    for r in run_ranks("training.py", 2, cases, env=env, timeout=180):
        assert f"rank {r.rank}: OK" in r.output


@pytest.mark.parametrize("env", [STRICT, FUSED], ids=["strict", "fused"])
def test_fsdp2_equals_one_process_on_the_whole_batch(env):
    """fully_shard per block and root; reshard_after_forward on and off; bfloat16 params
    with float32 reduction; activation checkpointing."""
    cases = "fsdp,fsdp_keep,fsdp_mixed,fsdp_ckpt"
    for r in run_ranks("training.py", 2, cases, env=env, timeout=180):
        assert f"rank {r.rank}: OK" in r.output


def test_hsdp_on_a_2x2_mesh():
    for r in run_ranks("training.py", 4, "hsdp", timeout=180):
        assert f"rank {r.rank}: OK" in r.output


@pytest.mark.parametrize("world, env", [(2, STRICT), (4, FUSED)], ids=["2-strict", "4-fused"])
def test_dtensor_and_tensor_parallel_equal_one_device(world, env):
    for r in run_ranks("tensor_parallel.py", world, env=env, timeout=180):
        assert f"rank {r.rank}: OK" in r.output


@pytest.mark.parametrize("saved_on, loaded_on", [(2, 4), (4, 2)])
def test_dcp_sharded_checkpoint_loads_on_another_number_of_ranks(tmp_path, saved_on, loaded_on):
    run_ranks("checkpoint.py", saved_on, "save", str(tmp_path), timeout=180)
    for r in run_ranks("checkpoint.py", loaded_on, "load", str(tmp_path), timeout=180):
        assert f"rank {r.rank}: OK" in r.output


@pytest.mark.parametrize(
    "world, case, env",
    [
        (2, "gpipe", STRICT),
        (4, "1f1b", STRICT),
        (2, "1f1b", FUSED),
        (2, "manual", STRICT),
        (2, "manual", FUSED),
        (2, "mpmd", STRICT),
        (2, "mpmd", FUSED),
        (2, "mpmd", {"TORCH_TPU_EAGER_MODE": "debug"}),
    ],
    ids=[
        "gpipe-2-strict",
        "1f1b-4-strict",
        "1f1b-2-fused",
        "manual-strict",
        "manual-fused",
        "mpmd-strict",
        "mpmd-fused",
        "mpmd-debug",
    ],
)
def test_pipelines_and_mpmd(world, case, env):
    for r in run_ranks("pipeline.py", world, case, env=env, timeout=180):
        assert f"rank {r.rank}: OK" in r.output


def test_functional_collectives_under_torch_compile():
    for r in run_ranks("compiled.py", 2, timeout=180):
        assert f"rank {r.rank}: OK" in r.output


def test_set_timeout_shortens_the_groups_timeout():
    ranks = run_ranks("set_timeout.py", 2, timeout=60, check=False, env={"DIST_TEST_TIMEOUT": "30"})
    assert ranks[-1].returncode == 17
    (r,) = ranks[:-1]
    assert r.returncode == 3, r.output
    seconds = float(r.output.split("raised after ")[1].split("s:")[0])
    assert seconds < 10, r.output
