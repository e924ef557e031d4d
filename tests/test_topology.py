"""topology_aware_mesh: rank layouts whose innermost mesh axis is a ring of physical
neighbours on the torus, checked on synthetic coordinates (no TPU needed)."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

import torch_tpu.distributed.topology as topo
from torch_tpu.distributed.testing import run_threaded


def grid(torus):
    """Every chip of the torus, x fastest (TPU device-id order)."""
    return [tuple(reversed(p)) for p in itertools.product(*(range(t) for t in reversed(torus)))]


def shuffled_ranks(torus, seed=0, slices=1):
    """Chips handed to ranks in a random order: the layout must follow coordinates,
    not rank numbers."""
    chips = [(s, c) for s in range(slices) for c in grid(torus)]
    random.Random(seed).shuffle(chips)
    return [c for _, c in chips], [s for s, _ in chips]


def assert_innermost_rings(mesh, coords, torus):
    rows = mesh.reshape(-1, mesh.shape[-1]).tolist()
    for row in rows:
        for a, b in zip(row, row[1:] + row[:1]):  # the wrap-around pair included
            if a == b:
                continue
            assert topo.torus_distance(coords[a], coords[b], torus) == 1, (
                f"ranks {a} {coords[a]} and {b} {coords[b]} are not neighbours on {torus}"
            )


CASES = [
    ((2, 2), (2, 2)),
    ((2, 2), (4,)),
    ((2, 2), (1, 4)),
    ((4, 4), (4, 4)),
    ((4, 4), (16,)),
    ((4, 4), (2, 8)),
    ((4, 4), (8, 2)),
    ((4, 4, 4), (4, 4, 4)),
    ((4, 4, 4), (16, 4)),
    ((4, 4, 4), (4, 16)),
    ((4, 4, 4), (2, 32)),
    ((4, 4, 4), (64,)),
    ((16, 16), (16, 16)),
    ((16, 16), (64, 4)),
    ((16, 16), (8, 32)),
    ((16, 16), (2, 128)),
    ((16, 16), (256,)),
    ((2, 2, 1), (2, 2)),
]


@pytest.mark.parametrize("torus,mesh_shape", CASES, ids=lambda v: "x".join(map(str, v)))
def test_innermost_axis_is_a_ring_of_neighbours(torus, mesh_shape):
    coords, _ = shuffled_ranks(torus)
    mesh = topo.mesh_from_coordinates(coords, torus, mesh_shape)
    assert tuple(mesh.shape) == mesh_shape
    assert sorted(mesh.reshape(-1).tolist()) == list(range(math.prod(torus)))
    assert_innermost_rings(mesh, coords, torus)


def test_a_naive_layout_would_fail_the_check():
    # Rank order on a 4x4 torus as an (8, 2)... as (2, 8) rows: row-major chips 0..7
    # put (3, 0) next to (0, 1): the check above must notice.
    torus = (4, 4)
    coords = grid(torus)
    naive = torch.arange(16).reshape(2, 8)
    with pytest.raises(AssertionError, match="not neighbours"):
        assert_innermost_rings(naive, coords, torus)


def test_multi_slice_keeps_each_slice_contiguous():
    torus = (4, 4)
    coords, slices = shuffled_ranks(torus, seed=3, slices=4)
    mesh = topo.mesh_from_coordinates(
        coords, torus, (4, 4), dcn_mesh_shape=(2, 2), slice_indices=slices
    )
    assert tuple(mesh.shape) == (8, 8)
    for i, j in itertools.product(range(2), range(2)):
        block = mesh[4 * i : 4 * i + 4, 4 * j : 4 * j + 4].reshape(-1).tolist()
        assert len({slices[r] for r in block}) == 1, "a slice spans two mesh blocks"
    assert_innermost_rings(mesh, coords, torus)  # rings stay inside slices


def test_mesh_that_does_not_fit_the_topology_is_a_clear_error():
    coords = grid((4, 4))
    with pytest.raises(ValueError, match=r"mesh_shape \(3, 5\) has 15 positions"):
        topo.mesh_from_coordinates(coords, (4, 4), (3, 5))
    # Three chips of a six-chip axis are a line, not a ring.
    with pytest.raises(ValueError, match="no ring of 3 chips fits the torus 2x6"):
        topo.mesh_from_coordinates(grid((2, 6)), (2, 6), (4, 3))
    with pytest.raises(ValueError, match="report the same chip"):
        topo.mesh_from_coordinates([(0, 0)] * 4, (2, 2), (2, 2))


def test_ring_hops_of_the_topology_aware_layout_and_of_rank_order():
    torus = (4, 4)
    coords = grid(torus)
    aware = topo.mesh_from_coordinates(coords, torus, (16,))
    assert topo.ring_hops(aware, coords, torus) == 1
    # Rank order on a 4x4 torus: (3, 0) -> (0, 1) is 2 hops (one wrap-around link).
    assert topo.ring_hops(torch.arange(16).reshape(1, 16), coords, torus) == 2


def test_parse_topology_accepts_both_spellings_and_rejects_nonsense():
    assert topo.parse_topology("4x4x4") == (4, 4, 4)
    assert topo.parse_topology("2,2,1") == (2, 2, 1)
    with pytest.raises(ValueError, match="TORCH_TPU_TOPOLOGY='4by4'"):
        topo.parse_topology("4by4")


def test_ring_cost_model_charges_every_hop():
    one_hop = topo.ring_all_reduce_seconds(1 << 20, 16, link_gbytes_per_s=45, hop_latency_s=1e-6)
    three_hops = topo.ring_all_reduce_seconds(1 << 20, 16, 45, 1e-6, hops=3)
    assert three_hops == pytest.approx(3 * one_hop)
    assert one_hop == pytest.approx(2 * 15 * ((1 << 20) / 16 / 45e9 + 1e-6))
    assert topo.ring_all_reduce_seconds(1 << 20, 1, 45, 1e-6) == 0.0


def test_topology_aware_mesh_from_torch_tpu_topology(monkeypatch):
    """Every rank calls it (all-gathering coordinates) and gets the same layout,
    usable as a DeviceMesh."""
    monkeypatch.setenv("TORCH_TPU_TOPOLOGY", "2x2")

    def rank_main(rank):
        from torch.distributed.device_mesh import DeviceMesh

        layout = topo.topology_aware_mesh((2, 2))
        mesh = DeviceMesh("tpu", layout, mesh_dim_names=("dp", "tp"))
        return layout, mesh["tp"].size()

    results = run_threaded(rank_main, 4)
    layouts = [layout for layout, _ in results]
    assert all(torch.equal(layouts[0], other) for other in layouts)
    assert all(size == 2 for _, size in results)
    assert_innermost_rings(layouts[0], grid((2, 2)), (2, 2))

    monkeypatch.setenv("TORCH_TPU_TOPOLOGY", "4x4")
    with pytest.raises(ValueError, match="describes 16 chips per slice"):
        run_threaded(lambda rank: topo.topology_aware_mesh((2, 2)), 4)
