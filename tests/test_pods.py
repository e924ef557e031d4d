"""Pods without a pod: meshes laid on the coordinates libtpu describes for real TPU slices,
and the XLA collective engine's programs compiled for pod-sized targets with the device
assignment a mesh's groups give them (torch_tpu.distributed.topology, torch_tpu.targets).
Needs libtpu and the CUDA plugin (scripts/setup.sh --test); no TPU or GPU."""

from __future__ import annotations

import json
import math

import pytest
from fresh_process import run_python

import torch_tpu  # noqa: F401
import torch_tpu.distributed.topology as topo
from torch_tpu import _C, targets
from torch_tpu.distributed.testing import run_threaded

# TPU slices, 2-d and 3-d, one and two cores a chip, with meshes over all their devices.
MESHES = [
    ("v5e:2x2", (2, 2)),
    ("v5e:4x4", (4, 4)),
    ("v5e:4x4", (2, 8)),
    ("v6e:4x4", (16,)),
    ("v6e:8x8", (8, 8)),
    ("v5p:2x2x2", (2, 4)),
    ("v5p:4x4x4", (4, 16)),
    ("v5p:4x4x4", (16, 4)),
    ("v4:2x2x2", (8, 2)),
    ("tpu7x:2x2x1", (4, 2)),
    ("tpu7x:4x4x4", (64, 2)),
    ("tpu7x:4x4x4", (32, 4)),
]


def neighbours(a, b, torus):
    return topo.torus_distance(a, b, torus) <= 1


@pytest.mark.parametrize("target,mesh_shape", MESHES, ids=lambda v: str(v))
def test_a_mesh_on_a_targets_coordinates_makes_its_inner_axis_a_ring(target, mesh_shape):
    chip_coords, cores = topo.target_devices(target)
    assert len(chip_coords) == targets.parse(target).devices == math.prod(mesh_shape)
    mesh = topo.mesh_for_target(target, mesh_shape)
    assert sorted(mesh.flatten().tolist()) == list(range(len(chip_coords)))
    coords = [tuple(c) + ((k,) if len(set(cores)) > 1 else ()) for c, k in zip(chip_coords, cores)]
    torus = tuple(max(c[i] for c in coords) + 1 for i in range(len(coords[0])))
    for row in mesh.reshape(-1, mesh.shape[-1]).tolist():
        for a, b in zip(row, row[1:] + row[:1]):
            assert neighbours(coords[a], coords[b], torus), (target, row, coords[a], coords[b])


def test_two_cores_a_chip_pair_up_on_the_inner_axis():
    # TPU7x: each chip's two TensorCores are two devices at one coordinate; an inner axis of
    # two puts a chip's cores together (their link is the chip itself).
    chip_coords, cores = topo.target_devices("tpu7x:2x2x1")
    assert sorted(set(cores)) == [0, 1] and len(set(chip_coords)) == 4
    for a, b in topo.mesh_for_target("tpu7x:2x2x1", (4, 2)).tolist():
        assert chip_coords[a] == chip_coords[b] and cores[a] != cores[b]


@pytest.mark.parametrize("shape", ["2x2", "4x4", "8x8", "2x2x2", "4x4x4"])
def test_the_simulated_torus_agrees_with_libtpu_for_one_core_chips(shape):
    # The simulated torus (TORCH_TPU_TOPOLOGY=4x4) numbers devices x fastest; libtpu's
    # descriptions of v5e/v6e (2-d) and v5p (3-d) slices do the same, so their meshes agree.
    chip = "v6e" if shape.count("x") == 1 else "v5p"
    chip_coords, _ = topo.target_devices(f"{chip}:{shape}")
    torus = topo.parse_topology(shape)
    simulated = []
    for rank in range(math.prod(torus)):
        point, index = [], rank
        for t in torus:
            index, x = divmod(index, t)
            point.append(x)
        simulated.append(tuple(point))
    assert [c[: len(torus)] for c in chip_coords] == simulated
    assert all(c[len(torus) :] in ((), (0,)) for c in chip_coords)


def test_multi_slice_meshes_keep_each_slice_in_one_block():
    mesh = topo.mesh_for_target("v5e:2x2", (2, 2), dcn_mesh_shape=(2, 1))
    assert mesh.shape == (4, 2)
    assert sorted(mesh[:2].flatten().tolist()) == [0, 1, 2, 3]  # slice 0
    assert sorted(mesh[2:].flatten().tolist()) == [4, 5, 6, 7]  # slice 1


def test_torch_tpu_topology_names_a_target_for_a_real_job(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_TOPOLOGY", "tpu7x:1x1x1")  # one chip, two cores: 2 ranks

    def rank_main(rank):
        return topo.topology_aware_mesh((2,))

    layouts = run_threaded(rank_main, 2)
    assert all(layout.tolist() == [0, 1] for layout in layouts)
    monkeypatch.setenv("TORCH_TPU_TOPOLOGY", "v5e:2x2")
    with pytest.raises(ValueError, match="has 4 devices per slice, 1 slice"):
        run_threaded(lambda rank: topo.topology_aware_mesh((2,)), 2)


def test_bad_meshes_and_targets_are_clear_errors():
    with pytest.raises(ValueError, match=r"mesh \(3, 5\) has 15 positions .* v5e:4x4 has 16"):
        topo.mesh_for_target("v5e:4x4", (3, 5))
    with pytest.raises(ValueError, match=r"tpu7x:2x2x1 has 8 devices \(4 chips, 2 cores each\)"):
        topo.mesh_for_target("tpu7x:2x2x1", (4,))
    with pytest.raises(ValueError, match="'h100:1x2x8' is not a TPU slice"):
        topo.mesh_for_target("h100:1x2x8", (2, 8))
    with pytest.raises(targets.TargetNameError, match="unknown target chip 'v9'"):
        topo.mesh_for_target("v9:4x4", (4, 4))


# --- the collective engine's programs on pods -----------------------------------------------

# The four pod shapes, each with a 2-d mesh: a collective over one mesh axis is one program
# over the mesh whose replica groups are that axis's rows (the form JAX compiles). The H100
# target is two hosts of eight GPUs, ranks in host order. Each pod compiles in its own
# process: libtpu aborts the process on some programs it cannot compile (it did on the
# engine's former [replicas, block] reduce_scatter over a v5p plane's ring of 16).
PODS = {
    "v5e:4x4": "topo.mesh_for_target('v5e:4x4', (4, 4))",
    "v5p:4x4x4": "topo.mesh_for_target('v5p:4x4x4', (4, 16))",
    "tpu7x:4x4x4": "topo.mesh_for_target('tpu7x:4x4x4', (16, 8))",
    "h100:1x2x8": "torch.arange(16).reshape(2, 8)",
}

COMPILE_EVERY_COLLECTIVE = """
import json, torch, torch_tpu
import torch_tpu.distributed.topology as topo
from torch_tpu import _C, targets
target, mesh = {target!r}, {mesh}
pod = targets.load(target)
ids = [d["id"] for d in sorted(pod.devices(), key=lambda d: d["id"])]
assert len(ids) == mesh.numel()
done = []
for axis, groups in (("inner", mesh.tolist()), ("outer", mesh.t().tolist())):
    for kind in {kinds!r}:
        count = 4096 * len(groups[0])
        program = _C._collective_program(kind, len(groups[0]), count, "bfloat16", groups)
        memory = pod.compile(program, device_ids=ids).memory()
        done.append((axis, kind, count, len(groups[0]), memory["arguments"], memory["outputs"]))
print("RESULTS " + json.dumps(done))
"""

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "permute"]


@pytest.mark.parametrize("target", sorted(PODS))
def test_every_collective_compiles_for_each_pod_over_the_meshs_groups(target):
    code = COMPILE_EVERY_COLLECTIVE.format(target=target, mesh=PODS[target], kinds=COLLECTIVES)
    done = run_python(code, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.split("RESULTS ", 1)[1])
    assert len(results) == 2 * len(COLLECTIVES)
    for axis, kind, count, size, arguments, outputs in results:
        carried = 1 if kind == "broadcast" else 2  # a broadcast moves bytes, the rest bf16
        assert arguments >= count * carried, (axis, kind)
        gathered = {"all_gather": size, "reduce_scatter": 1 / size}.get(kind, 1)
        assert outputs >= count * carried * gathered, (axis, kind)


def test_collective_programs_refuse_bad_requests():
    with pytest.raises(ValueError, match="unknown collective 'gossip'"):
        _C._collective_program("gossip", 4, 16, "float32")
    with pytest.raises(ValueError, match="the count must divide"):
        _C._collective_program("reduce_scatter", 4, 10, "float32")
    with pytest.raises(ValueError, match="dtype 'float64'"):
        _C._collective_program("all_reduce", 4, 16, "float64")
    pod = targets.load("v5e:2x2")
    with pytest.raises(ValueError, match="not distinct devices of v5e:2x2"):
        pod.compile(_C._collective_program("all_reduce", 2, 8, "float32"), device_ids=[0, 9])
    with pytest.raises(ValueError, match="v5e:2x2 has 4 devices; the program spans 8"):
        pod.compile(_C._collective_program("all_reduce", 8, 8, "float32"), replicas=8)
