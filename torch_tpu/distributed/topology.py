"""Device meshes laid out on the physical torus, so that mesh axes are chip rings.

TPU chips are wired as a torus (v4/v5p: 3-d, wrap-around links on full axes; v5e/v6e:
2-d). A collective along a mesh axis is fastest when consecutive ranks on that axis are
physical neighbours and the last is a neighbour of the first: a ring all_reduce then
uses one link per step and no hop crosses other chips' traffic. ``topology_aware_mesh``
orders the ranks that way for the innermost mesh axis, then tiles the torus with those
rings for the outer axes, and keeps each slice of a multi-slice job (ranks joined by the
data-centre network, DCN) in one contiguous block of the mesh.

>>> mesh = topology_aware_mesh((2, 8))  # doctest: +SKIP
>>> DeviceMesh("tpu", mesh, mesh_dim_names=("dp", "tp"))  # doctest: +SKIP

Coordinates come from each rank's PJRT device attributes (``coords``, ``core_on_chip``,
``slice_index``) where the plugin reports them. The CPU platform has none:
``TORCH_TPU_TOPOLOGY`` then says which pod to lay the mesh on. A TPU target
(``v5e:4x4``, ``v5p:4x4x4``, ``v6e:8x8``, ``tpu7x:4x4x4``; torch_tpu.targets) gives rank r
the coordinates and core of device r of libtpu's own description of that slice (no TPU
needed; chips with two cores a chip, v4 and TPU7x, give two ranks per chip), and ranks beyond
one slice go to further slices. A bare shape (``4x4``, ``4x4x4``, ``2,2,1``) describes a torus
of one-core chips, device ids x fastest (what libtpu's descriptions give for such chips).
Without either the ranks form one ring.

>>> mesh_for_target("v5e:4x4", (4, 4)).shape  # doctest: +SKIP
torch.Size([4, 4])
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence

import torch

__all__ = [
    "mesh_for_target",
    "mesh_from_coordinates",
    "target_devices",
    "parse_topology",
    "ring_all_reduce_seconds",
    "ring_hops",
    "topology_aware_mesh",
    "torus_distance",
]

Coord = tuple[int, ...]


def parse_topology(text: str) -> tuple[int, ...]:
    """``"4x4x4"`` or ``"2,2,1"`` -> (4, 4, 4) / (2, 2, 1)."""
    parts = text.replace(",", "x").lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise ValueError(
            f"TORCH_TPU_TOPOLOGY={text!r}: expected chip counts per axis such as 4x4 or 2,2,1"
        )
    return dims


def torus_distance(a: Coord, b: Coord, torus: Sequence[int]) -> int:
    """Hops between two chips of a torus (wrap-around links on every axis)."""
    return sum(min(abs(x - y), t - abs(x - y)) for x, y, t in zip(a, b, torus))


def _snake(dims: Sequence[int]) -> list[Coord]:
    """Every point of the grid ``dims`` once, consecutive points adjacent (boustrophedon)."""
    if not dims:
        return [()]
    inner = _snake(dims[1:])
    path = []
    for i in range(dims[0]):
        for p in inner if i % 2 == 0 else reversed(inner):
            path.append((i, *p))
    return path


def _cycle(block: Sequence[int], torus: Sequence[int]) -> list[Coord] | None:
    """A ring through every point of ``block`` (an extent per torus axis) whose
    consecutive points, last to first included, are torus neighbours; None if the block
    has none."""
    used = [i for i, d in enumerate(block) if d > 1]
    size = math.prod(block)

    def point(values: dict[int, int]) -> Coord:
        return tuple(values.get(i, 0) for i in range(len(block)))

    if size == 1:
        return [point({})]
    if len(used) == 1:
        (axis,) = used
        # A whole axis closes through its wrap-around link; two chips are a ring anyway.
        if block[axis] == torus[axis] or block[axis] == 2:
            return [point({axis: i}) for i in range(block[axis])]
        return None
    rows_axis = next((i for i in used if block[i] % 2 == 0), None)
    if rows_axis is None:
        return None
    cols_axes = [i for i in used if i != rows_axis]
    cols = _snake([block[i] for i in cols_axes])  # the comb's columns, a path
    rows = block[rows_axis]
    # The comb: row 0 along columns 1.., down and back through columns 1.. row by row,
    # then home up column 0 (rows even, so the last row ends beside column 0).
    order: list[tuple[int, int]] = []
    for r in range(rows):
        span = range(1, len(cols)) if r % 2 == 0 else range(len(cols) - 1, 0, -1)
        order.extend((r, c) for c in span)
    order.extend((r, 0) for r in range(rows - 1, -1, -1))
    ring = []
    for r, c in order:
        values = {rows_axis: r}
        values.update(zip(cols_axes, cols[c]))
        ring.append(point(values))
    return ring


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _ring_block(torus: Sequence[int], size: int) -> tuple[tuple[int, ...], list[Coord]]:
    """The block of the torus (an extent per axis, each dividing the axis) that holds a
    ring of ``size`` chips, and that ring. Prefers one whole axis, then few axes, then
    whole axes (their wrap-around links stay inside the ring)."""
    candidates = []
    for block in itertools.product(*(_divisors(t) for t in torus)):
        if math.prod(block) != size:
            continue
        used = sum(d > 1 for d in block)
        partial = sum(1 < d < t for d, t in zip(block, torus))
        candidates.append(((used, partial), block))
    for _, block in sorted(candidates):
        ring = _cycle(block, torus)
        if ring is not None:
            return block, ring
    raise ValueError(
        f"no ring of {size} chips fits the torus {'x'.join(map(str, torus))}: a mesh axis "
        "must be a whole torus axis, two chips, or an even block of the torus"
    )


def _layout(torus: Sequence[int], mesh_shape: Sequence[int]) -> list:
    """Nested lists shaped ``mesh_shape`` of torus coordinates."""
    block, ring = _ring_block(torus, mesh_shape[-1])
    tiles = tuple(t // b for t, b in zip(torus, block))
    if len(mesh_shape) == 1:
        return [list(p) for p in ring]
    outer = _layout(tiles, mesh_shape[:-1])

    def expand(node):
        if node and isinstance(node[0], list):
            return [expand(n) for n in node]
        return [[o * b + p for o, b, p in zip(node, block, q)] for q in ring]

    return expand(outer)


def mesh_from_coordinates(
    coords: Sequence[Coord],
    torus: Sequence[int],
    mesh_shape: Sequence[int],
    dcn_mesh_shape: Sequence[int] | None = None,
    slice_indices: Sequence[int] | None = None,
) -> torch.Tensor:
    """The rank layout (int64 tensor) for ``DeviceMesh(..., mesh=...)``: rank r sits on
    chip ``coords[r]`` of slice ``slice_indices[r]`` of tori ``torus``. The mesh has shape
    ``mesh_shape`` times ``dcn_mesh_shape`` axis by axis (each slice fills one block of
    ``mesh_shape``; the slices are laid out by ``dcn_mesh_shape``)."""
    mesh_shape = tuple(int(m) for m in mesh_shape)
    torus = tuple(int(t) for t in torus)
    dcn = tuple(int(d) for d in dcn_mesh_shape) if dcn_mesh_shape else (1,) * len(mesh_shape)
    if len(dcn) != len(mesh_shape):
        raise ValueError(
            f"dcn_mesh_shape {dcn} and mesh_shape {mesh_shape} must have one entry per mesh axis"
        )
    slices = list(slice_indices) if slice_indices is not None else [0] * len(coords)
    slice_count = math.prod(dcn)
    per_slice = math.prod(torus)
    if math.prod(mesh_shape) != per_slice:
        raise ValueError(
            f"mesh_shape {mesh_shape} has {math.prod(mesh_shape)} positions per slice but the "
            f"torus {'x'.join(map(str, torus))} has {per_slice} chips"
        )
    if len(coords) != slice_count * per_slice or sorted(set(slices)) != list(range(slice_count)):
        raise ValueError(
            f"{len(coords)} ranks in slices {sorted(set(slices))} do not fill {slice_count} "
            f"slice(s) (dcn_mesh_shape {dcn}) of {per_slice} chips"
        )
    where = {}
    for rank, (c, s) in enumerate(zip(coords, slices)):
        key = (int(s), tuple(int(x) for x in c))
        if key in where:
            raise ValueError(f"ranks {where[key]} and {rank} report the same chip {key}")
        if len(key[1]) != len(torus) or any(not 0 <= x < t for x, t in zip(key[1], torus)):
            raise ValueError(f"rank {rank}: coordinates {key[1]} are outside the torus {torus}")
        where[key] = rank
    ici = torch.tensor(_layout(torus, mesh_shape), dtype=torch.int64)  # mesh_shape + (ndim,)
    full = torch.empty(tuple(m * d for m, d in zip(mesh_shape, dcn)), dtype=torch.int64)
    for s, dcn_index in enumerate(itertools.product(*(range(d) for d in dcn))):
        block = tuple(slice(i * m, (i + 1) * m) for i, m in zip(dcn_index, mesh_shape))
        ranks = [where[(s, tuple(p))] for p in ici.reshape(-1, len(torus)).tolist()]
        full[block] = torch.tensor(ranks, dtype=torch.int64).reshape(mesh_shape)
    return full


def target_devices(target: str) -> tuple[list[Coord], list[int]]:
    """The chip coordinates and core on chip of every device of TPU target ``target``
    (``"v5e:4x4"``), in device-id order, from libtpu's description of it (compile-only: no
    TPU needed). Raises ValueError for a target that is not a TPU slice."""
    from torch_tpu import targets

    name = targets.parse(target)
    if name.chip.platform != "tpu":
        raise ValueError(
            f"{target!r} is not a TPU slice: meshes are laid on TPU topologies "
            "(v4, v5e, v5p, v6e, tpu7x with a shape, such as v5e:4x4 or tpu7x:4x4x4)"
        )
    devices = sorted(targets.load(target).devices(), key=lambda d: d["id"])
    coords = [tuple(int(x) for x in d["attributes"]["coords"]) for d in devices]
    cores = [int((d["attributes"].get("core_on_chip") or [0])[0]) for d in devices]
    return coords, cores


def _with_cores(coords: Sequence[Coord], cores: Sequence[int]) -> tuple[list[Coord], tuple]:
    """Coordinates with the core on chip as one more (innermost-ring) axis where a chip has
    several, and the torus they span."""
    if len(set(cores)) > 1:
        coords = [tuple(c) + (core,) for c, core in zip(coords, cores)]
    coords = [tuple(c) for c in coords]
    torus = tuple(max(c[i] for c in coords) + 1 for i in range(len(coords[0])))
    return coords, torus


def mesh_for_target(
    target: str, mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int] | None = None
) -> torch.Tensor:
    """The rank layout ``topology_aware_mesh`` gives a job on TPU target ``target`` (rank r on
    device r % devices of slice r // devices), without starting one: plan a pod's meshes here.

    >>> mesh_for_target("v5e:2x2", (2, 2)).tolist()  # doctest: +SKIP
    [[0, 1], [2, 3]]
    """
    chip_coords, cores = target_devices(target)
    coords, torus = _with_cores(chip_coords, cores)
    slice_count = math.prod(dcn_mesh_shape) if dcn_mesh_shape else 1
    per_slice = len(coords)
    if math.prod(mesh_shape) != per_slice:
        raise ValueError(
            f"the mesh {tuple(mesh_shape)} has {math.prod(mesh_shape)} positions per slice but "
            f"{target} has {per_slice} devices ({len(set(chip_coords))} chips"
            + (f", {len(set(cores))} cores each" if len(set(cores)) > 1 else "")
            + ")"
        )
    ranks = [(coords[r % per_slice], r // per_slice) for r in range(per_slice * slice_count)]
    return mesh_from_coordinates(
        [c for c, _ in ranks], torus, mesh_shape, dcn_mesh_shape, [s for _, s in ranks]
    )


def _rank_attributes() -> tuple[list[int], int, int]:
    """This rank's chip coordinates, core on chip and slice (PJRT attributes, else from
    TORCH_TPU_TOPOLOGY, else a ring position)."""
    from torch_tpu import _C

    attributes = _C._device_properties(_C._current_device()).get("attributes", {})
    coords = list(attributes.get("coords", []))
    core = int((attributes.get("core_on_chip") or [0])[0])
    slice_index = int((attributes.get("slice_index") or [0])[0])
    return coords, core, slice_index


def topology_aware_mesh(
    mesh_shape: Sequence[int],
    dcn_mesh_shape: Sequence[int] | None = None,
    group=None,
) -> torch.Tensor:
    """The ranks of ``group`` (default: the world) laid out as a ``mesh_shape`` mesh (times
    ``dcn_mesh_shape`` across slices) whose innermost axis is a physical ring of chips.
    Every rank must call it (it all-gathers each rank's coordinates)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    records: list = [None] * world
    dist.all_gather_object(records, _rank_attributes(), group=group)
    topology = os.environ.get("TORCH_TPU_TOPOLOGY", "").strip()
    cores = {core for _, core, _ in records}
    if not all(coords for coords, _, _ in records) and ":" in topology:
        # A TPU target: the coordinates libtpu describes for it.
        slice_count = math.prod(dcn_mesh_shape) if dcn_mesh_shape else 1
        devices = len(target_devices(topology)[0])
        if devices * slice_count != world:
            raise ValueError(
                f"TORCH_TPU_TOPOLOGY={topology} has {devices} devices per slice, {slice_count} "
                f"slice(s), but the group has {world} ranks"
            )
        return mesh_for_target(topology, mesh_shape, dcn_mesh_shape)
    if all(coords for coords, _, _ in records):
        coords = [tuple(c) + ((core,) if len(cores) > 1 else ()) for c, core, _ in records]
        slices = [s for _, _, s in records]
        torus = tuple(max(c[i] for c in coords) + 1 for i in range(len(coords[0])))
    else:
        slice_count = math.prod(dcn_mesh_shape) if dcn_mesh_shape else 1
        torus = parse_topology(topology) if topology else (world // slice_count,)
        per_slice = math.prod(torus)
        if per_slice * slice_count != world:
            raise ValueError(
                f"TORCH_TPU_TOPOLOGY={topology or torus[0]!r} describes {per_slice} chips per "
                f"slice, {slice_count} slice(s), but the group has {world} ranks"
            )
        coords, slices = [], []
        for rank in range(world):
            s, index = divmod(rank, per_slice)
            point = []
            for t in torus:  # x fastest
                index, x = divmod(index, t)
                point.append(x)
            coords.append(tuple(point))
            slices.append(s)
    return mesh_from_coordinates(coords, torus, mesh_shape, dcn_mesh_shape, slices)


def ring_all_reduce_seconds(
    nbytes: int, ranks: int, link_gbytes_per_s: float, hop_latency_s: float, hops: int = 1
) -> float:
    """Estimated time of a ring all_reduce of ``nbytes`` over ``ranks`` chips:
    2(n-1) steps, each sending nbytes/n to the next rank of the ring. Ring neighbours
    ``hops`` links apart pay each link's latency, and since every rank sends at once,
    each link carries up to ``hops`` messages, so a step costs
    ``hops * (nbytes / n / bandwidth + latency)`` (1 hop: ring neighbours are physical
    neighbours, which topology_aware_mesh arranges)."""
    if ranks < 2:
        return 0.0
    steps = 2 * (ranks - 1)
    return steps * hops * (nbytes / ranks / (link_gbytes_per_s * 1e9) + hop_latency_s)


def ring_hops(mesh: torch.Tensor, coords: Sequence[Coord], torus: Sequence[int]) -> int:
    """The most links between two consecutive ranks (wrap-around included) of any row of
    the innermost axis of ``mesh``: what a ring along that axis pays per step."""
    worst = 0
    for row in mesh.reshape(-1, mesh.shape[-1]).tolist():
        for a, b in zip(row, row[1:] + row[:1]):
            worst = max(worst, torus_distance(coords[a], coords[b], torus))
    return worst
