"""TorchTitan, unchanged, on tpu: its Llama 3 and Qwen3 debug configs under torchrun
(FSDP2, compiled, tensor parallel with activation checkpointing, checkpoint and resume),
natively (TORCH_TPU_CPU_FALLBACK=error), with the local assets of torch_tpu.titan.assets;
and the pod recipes' dry runs."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Small enough for two CPU cores; everything else is TorchTitan's debug config.
SMALL = [
    "--training.local_batch_size",
    "2",
    "--training.seq_len",
    "128",
    "--validator.no-enable",
    "--debug.seed",
    "42",
    # FSDP2 in torch 2.13 cannot shard TorchTitan 0.3.0's default spmd_types parameters.
    "--parallelism.spmd_backend",
    "partial_dtensor",
]
STEP = re.compile(r"step:\s*(\d+)\s+loss:\s*([0-9.]+).*?tps:\s*([0-9,]+).*?mfu:\s*([0-9.]+)%")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """Built in a subprocess: it imports the whole standard library to read its docs."""
    root = tmp_path_factory.mktemp("titan")
    result = subprocess.run(
        [sys.executable, "-m", "torch_tpu.titan.assets", str(root), "--documents", "400"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "wrote 400 documents" in result.stdout, result.stdout
    return root


def titan(cwd, nproc: int, *args: str, timeout: int = 400) -> dict[int, tuple[float, int, float]]:
    """Runs ``torchrun -m torchtitan.train`` and returns {step: (loss, tokens/s, mfu %)}
    as rank 0 printed them."""
    env = {**os.environ, "TORCH_TPU_CPU_FALLBACK": "error", "PYTHONPATH": ROOT}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")  # nothing comes from the network
    env.pop("TORCH_TPU_CPU_DEVICES", None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        f"--master_port={free_port()}",
        "--local-ranks-filter",
        "0",
        "-m",
        "torchtitan.train",
        *args,
    ]
    result = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    output = ANSI.sub("", result.stdout + result.stderr)
    assert result.returncode == 0, output[-6000:]
    steps = {}
    for match in STEP.finditer(output):
        steps[int(match[1])] = (float(match[2]), int(match[3].replace(",", "")), float(match[4]))
    assert steps, output[-4000:]
    return steps


def assert_learns(steps):
    """Loss falls: single steps of a batch of two are noisy, so the last two against
    the first."""
    ordered = [steps[step][0] for step in sorted(steps)]
    assert max(ordered[-2:]) < ordered[0], steps


def test_assets_are_what_torchtitan_reads(assets):
    from datasets import load_dataset
    from torchtitan.components.tokenizer import HuggingFaceTokenizer

    tokenizer = HuggingFaceTokenizer(tokenizer_path=str(assets / "tests/assets/tokenizer"))
    assert 256 < tokenizer.get_vocab_size() <= 2048  # the debug models' vocabulary
    text = "Return the number of items in a container."
    ids = tokenizer.encode(text, add_bos=True, add_eos=True)
    assert ids[0] == tokenizer.bos_id and ids[-1] == tokenizer.eos_id
    assert tokenizer.decode(ids[1:-1]) == text
    dataset = load_dataset(str(assets / "tests/assets/c4_test"), split="train")
    assert len(dataset) >= 100 and all(len(row["text"]) >= 200 for row in dataset.select(range(20)))


def test_llama3_fsdp_trains_and_compiled_matches_eager(assets):
    config = ["--module", "llama3", "--config", "llama3_debugmodel", *SMALL]
    config += ["--training.steps", "5", "--checkpoint.no-enable"]
    eager = titan(assets, 2, *config)
    compiled = titan(assets, 2, *config, "--compile.enable")
    for step, (loss, tps, mfu) in eager.items():
        assert compiled[step][0] == pytest.approx(loss, rel=2e-3), (eager, compiled)
        assert tps > 0 and 0 < mfu < 100  # MFU against the measured peak of this CPU
    assert_learns(eager)


def test_llama3_tensor_parallel_with_full_activation_checkpointing(assets):
    """4 ranks: FSDP over 2 x tensor parallel 2, every block recomputed in backward."""
    config = "--module llama3 --config llama3_debugmodel --training.steps 4"
    config += " --checkpoint.no-enable --parallelism.data_parallel_shard_degree 2"
    config += " --parallelism.tensor_parallel_degree 2 activation-checkpoint:full"
    assert_learns(titan(assets, 4, *SMALL, *config.split()))


def test_qwen3_checkpoint_resume_is_exact(assets, tmp_path):
    """Train 4 steps saving at 2 and 4; drop step 4 and train again: TorchTitan resumes
    from step 2 (model, optimizer, data loader) and steps 3-4 repeat to the last digit."""
    config = "--module qwen3 --config qwen3_debugmodel --training.steps 4"
    config += f" --checkpoint.enable --checkpoint.interval 2 --dump_folder {tmp_path}"
    whole = titan(assets, 2, *SMALL, *config.split())
    assert_learns(whole)
    checkpoints = tmp_path / "checkpoint"
    assert sorted(os.listdir(checkpoints)) == ["step-2", "step-4"]
    shutil.rmtree(checkpoints / "step-4")
    resumed = titan(assets, 2, *SMALL, *config.split())
    assert sorted(resumed) == [3, 4]
    for step in (3, 4):
        assert resumed[step][0] == whole[step][0], (whole, resumed)


def test_qwen3_tensor_parallel_compiled(assets):
    config = "--module qwen3 --config qwen3_debugmodel --training.steps 4 --compile.enable"
    config += " --checkpoint.no-enable --parallelism.data_parallel_shard_degree 2"
    config += " --parallelism.tensor_parallel_degree 2"
    assert_learns(titan(assets, 4, *SMALL, *config.split()))


@pytest.mark.parametrize("recipe", ["llama3_8b_v5p_128", "qwen3_235b_a22b_v7_512"])
def test_pod_recipe_dry_run_fits_its_chips(recipe):
    code = (
        "import sys; from torch_tpu.titan import dry_run as d; r = d.dry_run(sys.argv[1]); "
        "print(r.parameters, r.devices, r.state_bytes, r.total_bytes, r.hbm_bytes, "
        "r.flops_per_token, r.fits); print(d.format_table([r]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, recipe],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    first, table = result.stdout.split("\n", 1)
    parameters, devices, state, total, hbm, flops, fits = first.split()
    parameters, devices, state = int(parameters), int(devices), int(state)
    # Every parameter element is sharded over the whole pod: 16 bytes each of state.
    assert state == pytest.approx(16 * parameters / devices, rel=0.02)
    assert state < int(total) <= int(hbm) and fits == "True"
    assert 6 * parameters / 20 < float(flops)  # at least 6 FLOPs per active parameter
    assert recipe in table and "| yes |" in table


def test_dry_run_reports_a_recipe_that_does_not_fit(monkeypatch):
    code = (
        "from torch_tpu.titan import config_registry as c, dry_run as d\n"
        "import dataclasses\n"
        "c.PODS['v5p-128'] = dataclasses.replace(c.PODS['v5p-128'], hbm_bytes=10**9)\n"
        "raise SystemExit(d.main(['llama3_8b_v5p_128']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "| NO |" in result.stdout
