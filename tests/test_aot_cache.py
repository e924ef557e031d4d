"""Warm starts of torch.compile(backend="tpu") through PyTorch's AOTAutograd cache: a
fresh process on warm caches loads every graph instead of tracing it, computes the same
numbers and compiles no program; a changed shape, model or torch_tpu misses; a damaged
entry or TORCH_TPU_AOT_CACHE=0 compiles as usual."""

import glob
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A compiled training step (forward, backward, SGD step) and a compiled no-grad call.
# torch.arange has no tensor input: a graph that comes back from the cache with it
# folded into a constant would run it eagerly (a compile) and not be replayed.
STEP = """
import gc, hashlib, json, os, torch, torch_tpu
from torch import nn
from torch._dynamo.utils import counters

if os.environ.get("SALT"):
    import torch_tpu.compile.aot_cache as aot_cache
    aot_cache.salt = lambda: os.environ["SALT"]
width = int(os.environ.get("WIDTH", "8"))
act = {"relu": nn.ReLU(), "gelu": nn.GELU()}[os.environ.get("ACT", "relu")]
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(width, 16), act, nn.Linear(16, 4)).to("tpu")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(6, width).to("tpu"), torch.randn(6, 4).to("tpu")

@torch.compile(backend="tpu")
def step():
    shift = torch.arange(width, device="tpu") / width
    loss = nn.functional.mse_loss(model(x + shift), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss

@torch.compile(backend="tpu")
def predict(inputs):
    with torch.no_grad():
        return model(inputs).sum()

losses = [step().item() for _ in range(3)]
out = predict(x).item()
aot = counters["aot_autograd"]
print(json.dumps({
    "losses": losses,
    "predict": out,
    "weight": model[0].weight.detach().cpu().flatten().tolist(),
    "hits": aot["autograd_cache_hit"],
    "misses": aot["autograd_cache_miss"],
    "saved": aot["autograd_cache_saved"],
    "bypassed": aot["autograd_cache_bypass"],
    "graphs": sorted(
        hashlib.sha256(code._gm.code.encode()).hexdigest()
        for code in gc.get_objects()
        if type(code).__name__ == "GraphCode" and code._gm is not None
    ),
    "disk_hits": torch_tpu.cache.stats()["hits"],
}))
"""


def run(dirs, **env):
    """Runs STEP in a fresh process on the cache directories `dirs`; its JSON and stderr."""
    environment = {k: v for k, v in os.environ.items() if k != "TORCH_TPU_AOT_CACHE"}
    environment.update(
        TORCHINDUCTOR_CACHE_DIR=str(dirs / "inductor"),
        TORCH_TPU_CACHE_DIR=str(dirs / "torch_tpu"),
        **{"TORCH_TPU_AOT_CACHE": "1", **env},
    )
    done = subprocess.run(
        [sys.executable, "-c", STEP],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """Cache directories after one cold process, and that process's output."""
    dirs = tmp_path_factory.mktemp("aot_cache")
    cold, _ = run(dirs)
    return dirs, cold


def test_cold_process_saves_every_graph(warm):
    _, cold = warm
    # The step's forward+backward, its optimizer graph after the graph break, predict.
    assert cold["hits"] == 0 and cold["bypassed"] == 0
    assert cold["misses"] >= 3 and cold["saved"] == cold["misses"]


def test_warm_process_loads_every_graph_and_computes_the_same(warm):
    dirs, cold = warm
    again, stderr = run(dirs)
    assert again["hits"] == cold["misses"] and again["misses"] == 0
    for field in ("losses", "predict", "weight"):
        assert again[field] == cold[field], field
    # The graphs came back whole (a call without tensor inputs, torch.arange, folded
    # into a constant would change the code), and their programs from the disk cache.
    assert len(again["graphs"]) == 4 and again["graphs"] == cold["graphs"]  # 3 + a backward
    assert again["disk_hits"] >= again["hits"]
    assert "AOTAutograd cache" not in stderr


@pytest.mark.parametrize(
    "change",
    [{"WIDTH": "9"}, {"SALT": "another torch_tpu build"}],
    ids=["shape", "torch_tpu"],
)
def test_a_changed_shape_or_build_misses(warm, change):
    dirs, cold = warm
    changed, _ = run(dirs, **change)
    assert changed["hits"] == 0 and changed["misses"] == cold["misses"]
    if "SALT" in change:  # same model and shapes: the same numbers, traced again
        assert changed["losses"] == cold["losses"]


def test_a_changed_model_misses_and_computes_what_it_would_uncached(warm, tmp_path):
    dirs, cold = warm
    changed, _ = run(dirs, ACT="gelu")
    uncached, _ = run(tmp_path, ACT="gelu", TORCH_TPU_AOT_CACHE="0")
    # The step's graph and predict hold the activation; the optimizer's graph may hit.
    assert changed["misses"] >= 2 and changed["hits"] <= 1
    assert changed["losses"] != cold["losses"]
    for field in ("losses", "predict", "weight"):
        assert changed[field] == uncached[field], field


def test_switched_off_the_cache_is_not_consulted(warm):
    dirs, cold = warm
    off, _ = run(dirs, TORCH_TPU_AOT_CACHE="0")
    assert off["hits"] == off["misses"] == off["saved"] == 0
    assert off["losses"] == cold["losses"]


def test_a_damaged_entry_compiles_as_usual_with_a_note(tmp_path):
    first, _ = run(tmp_path)
    entries = glob.glob(str(tmp_path / "inductor" / "aotautograd" / "*" / "*"))
    assert entries
    for path in entries:
        with open(path, "wb") as file:
            file.write(b"not a pickle")
    again, stderr = run(tmp_path)
    assert again["hits"] == 0
    assert again["losses"] == first["losses"] and again["predict"] == first["predict"]
    # One note that says why, instead of PyTorch's warning and traceback per entry.
    assert stderr.count("did not go through PyTorch's AOTAutograd cache") == 1
    assert "unable to load" in stderr and "Traceback" not in stderr
