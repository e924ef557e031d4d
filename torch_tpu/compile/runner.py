"""Runs the ``"tpu"`` backend's AOTAutograd graphs: each graph runs through the same
lowerings as eager mode with every op deferred and is flushed at its end (one StableHLO
program per graph); the first call for an input signature records what that program read
and wrote, and later calls replay it (``_C._GraphReplay``). A graph with CPU tensor
arguments has its host part cut off (``host_split``). See ``torch_tpu.compile.backend``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

import torch_tpu
from torch_tpu import _C

_GRAPH_MODE = "defer_and_fuse"


def _run_fused(
    gm: torch.fx.GraphModule,
    args: list[Any],
    replay: _C._GraphReplay | None,
    logged: set[str],
) -> Any:
    """Runs one AOTAutograd graph with every op deferred, then compiles and runs it,
    and lets `replay` (if any) keep a plan of that run for later calls with the same
    signature. Why a call could not be kept is logged once per reason into `logged`.

    The mode is this thread's only (rank threads and the autograd thread run graphs
    concurrently) and the switch does not wait for enqueued work, as ``eager_mode()``
    does: the graph's program reads buffers in dependency order anyway, and waiting
    would make every compiled call blocking.
    """
    previous = _C._set_thread_eager_mode(_GRAPH_MODE)
    out = None
    why = ""
    try:
        if replay is not None:
            replay.begin(args)
        out = gm(*args)
        torch_tpu.sync()
    finally:
        if replay is not None:
            why = replay.finish(args, out)
        _C._set_thread_eager_mode(previous)
    if why and why not in logged and _C._get_log_recompiles():
        logged.add(why)
        print(f"[torch_tpu] {replay.label} is not replayed: {why}", file=sys.stderr)
    return out


def _replay_enabled() -> bool:
    return os.environ.get("TORCH_TPU_COMPILE_REPLAY", "1") != "0"


_graph_count = itertools.count()


def _device_of(args: Sequence[Any]) -> int:
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.device.type == "tpu":
            return arg.device.index
    return -1


class SpmdSafeForward:
    """Whether a forward graph last ran under ``spmd_safe``, by device, for its backward.

    The backward graph runs on autograd's thread for the device, where the caller's
    ``spmd_safe`` (a thread-local promise) is not set, so its collectives would each
    be a program of their own, splitting the backward in three programs or more. The
    backward is the derivative of a forward that every rank ran alike, so every rank
    runs it alike too: it inherits the promise. By device, as rank threads of one
    process may share a graph."""

    def __init__(self) -> None:
        self.by_device: dict[int, bool] = {}

    def __getstate__(self) -> dict:
        # A graph loaded from AOTAutograd's cache has not run a forward yet.
        return {"by_device": {}}

    def forward_ran(self, args: Sequence[Any]) -> None:
        self.by_device[_device_of(args)] = _C._spmd_safe()

    @contextlib.contextmanager
    def backward(self, args: Sequence[Any]):
        inherit = not _C._spmd_safe() and self.by_device.get(_device_of(args), False)
        if inherit:
            _C._set_spmd_safe(True)
        try:
            yield
        finally:
            if inherit:
                _C._set_spmd_safe(False)


def graph_runner(
    gm: torch.fx.GraphModule,
    spmd: SpmdSafeForward | None,
    is_backward: bool,
    dynamic: Any = None,
) -> Callable[[list[Any]], Any]:
    """The boxed callable that runs one AOTAutograd graph (see the module docstring).
    `dynamic` (a ``bucketed.DynamicState``) makes a graph with symbolic sizes run at
    its buckets.

    >>> run = graph_runner(gm, SpmdSafeForward(), is_backward=False)  # doctest: +SKIP
    >>> outputs = run([x, w])  # doctest: +SKIP
    """
    from torch_tpu.compile import bucketed

    label = f"compiled graph {next(_graph_count)}"
    replay = _C._GraphReplay(label) if _replay_enabled() else None
    logged: set[str] = set()  # reasons not to replay, said once (TORCH_TPU_LOG_RECOMPILES=1)
    padded_graph, unpad = bucketed.make(gm, dynamic, is_backward, label)
    stats = bucketed.GraphStats.registry[label]

    splits: dict[tuple[bool, ...], Callable[[list[Any]], Any] | None] = {}

    def run_padded(args: list[Any]) -> Any:
        padded_args, sizes = padded_graph.prepare(args)
        stats.padded_calls += 1
        stats.buckets.add(tuple(sizes.padded[s] for s in padded_graph.plan.symbols))
        out = replay.run(padded_args) if replay is not None else None
        if out is None:
            before = _programs_built()
            out = _run_fused(padded_graph.program(sizes.padded), padded_args, replay, logged)
            if _programs_built() > before:
                stats.programs += 1
                _log_bucket(label, sizes.real, sizes.padded, padded_graph.plan)
        return padded_graph.finish(out, sizes)

    def run_graph(args: list[Any]) -> Any:
        if padded_graph is not None:
            return run_padded(args)
        stats.exact_calls += 1
        if unpad is not None:
            args = unpad(args)
        if replay is not None:
            out = replay.run(args)
            if out is not None:
                return out
            on_cpu = tuple(isinstance(a, torch.Tensor) and a.device.type == "cpu" for a in args)
            if any(on_cpu):
                if on_cpu not in splits:
                    splits[on_cpu] = _split_runner(gm, args, label)
                split_run = splits[on_cpu]
                if split_run is not None:
                    return split_run(args)
        before = _programs_built()
        out = _run_fused(gm, args, replay, logged)
        if _programs_built() > before:
            stats.programs += 1
        return out

    def run(args: list[Any]) -> Any:
        if spmd is None:
            return run_graph(args)
        if is_backward:
            with spmd.backward(args):
                return run_graph(args)
        spmd.forward_ran(args)
        return run_graph(args)

    return run


def _programs_built() -> int:
    """Programs made ready so far: compiled, or loaded from the disk cache."""
    counters = _C._metrics_snapshot()
    return counters["compiles"] + counters["disk_hits"]


def _log_bucket(label: str, real: dict, padded: dict, plan: Any) -> None:
    """Says which sizes, in which buckets, made a new program (TORCH_TPU_LOG_RECOMPILES).
    Integers read at run time choose no program and go unsaid."""
    if _C._get_log_recompiles():
        described = []
        for s in sorted(real, key=str):
            if s in plan.exact_values:
                described.append(f"{plan.names.get(s, s)} = {real[s]} (a value, not a size)")
            elif s not in plan.free_values:
                described.append(f"{plan.names.get(s, s)} = {real[s]} in bucket {padded[s]}")
        sizes = ", ".join(described)
        print(f"[torch_tpu] {label}: a program for a new bucket: {sizes}", file=sys.stderr)


def _split_runner(
    gm: torch.fx.GraphModule, args: list[Any], label: str
) -> Callable[[list[Any]], Any] | None:
    """For a graph with CPU tensor arguments (an optimizer's step counts): a runner that
    computes its host part with PyTorch on the CPU and replays its device graph (see
    ``torch_tpu.compile.host_split``), or None where it cannot be cut."""
    from torch_tpu.compile import host_split

    split = host_split.split(gm, args)
    if split is None:
        return None
    replay = _C._GraphReplay(f"{label} (device part)")
    logged: set[str] = set()

    def run_device(device_args: list[Any]) -> Any:
        out = replay.run(device_args)
        if out is not None:
            return out
        return _run_fused(split.device_graph, device_args, replay, logged)

    return lambda args: split.run(args, run_device)
