"""The ``"tpu"`` backend of ``torch.compile``.

Dynamo captures a graph; AOTAutograd functionalizes it and splits it into a forward
and a backward graph of ATen ops. Each graph runs through the same lowerings as eager
mode with every op deferred, and is flushed at its end: one StableHLO program per
graph, compiled once per graph structure and reused. The first call for an input
signature (shapes, dtypes, strides, offsets, aliasing) records what that program read
and wrote; later calls with that signature replay it directly (``_C._GraphReplay``):
no FX interpretation, no lowering, no program text. Random ops draw new keys on each
replay and deferred checks still raise. Graphs that cannot be replayed (a CPU
fallback, a host read, a collective inside) run the FX graph every call, as before;
``TORCH_TPU_LOG_RECOMPILES=1`` says why, ``TORCH_TPU_COMPILE_REPLAY=0`` turns replay
off. Parameters, buffers and
optimizer state stay on the device; inputs that the graph mutates are written back
in place with ``copy_`` inside the program. Graph breaks run in the current eager mode.

Warm starts: with ``TORCH_TPU_AOT_CACHE=1`` AOTAutograd's result for each graph is saved
in PyTorch's AOTAutograd cache, so a fresh process that compiles the same code with the
same inputs loads it instead of tracing and partitioning again (``torch_tpu._aot_cache``,
which says why it is off by default); the programs always come from torch_tpu's disk cache.

>>> model = torch.compile(model, backend="tpu")  # doctest: +SKIP
>>> loss = model(x).sum(); loss.backward()  # doctest: +SKIP

The module is imported by the first ``torch.compile(..., backend="tpu")``, not by
``import torch_tpu`` (see ``_dynamo_hook``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._dynamo.backends.common import aot_autograd

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


def _has_tpu_kernel(op: torch._ops.OpOverload) -> bool:
    # A CompositeExplicitAutograd kernel does not count: it may call an op that falls
    # back to the CPU (aten::mv calls aten::addmv.out).
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")


@functools.cache
def decompositions() -> dict[torch._ops.OpOverload, Callable]:
    """PyTorch's core ATen decompositions, except for ops the tpu device runs itself:
    decomposing an op that would fall back to the CPU keeps it inside the program.

    >>> torch.ops.aten.mm.default in torch_tpu.dynamo.decompositions()
    False
    """
    from torch._decomp import core_aten_decompositions

    return {
        op: fn
        for op, fn in core_aten_decompositions().items()
        if isinstance(op, torch._ops.OpOverload) and not _has_tpu_kernel(op)
    }


def _device_of(args: Sequence[Any]) -> int:
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.device.type == "tpu":
            return arg.device.index
    return -1


class _SpmdSafeForward:
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


def _graph_runner(
    gm: torch.fx.GraphModule, spmd: _SpmdSafeForward | None, is_backward: bool
) -> Callable[[list[Any]], Any]:
    """The boxed callable that runs one AOTAutograd graph (see the module docstring)."""
    label = f"compiled graph {next(_graph_count)}"
    replay = _C._GraphReplay(label) if _replay_enabled() else None
    logged: set[str] = set()  # reasons not to replay, said once (TORCH_TPU_LOG_RECOMPILES=1)

    splits: dict[tuple[bool, ...], Callable[[list[Any]], Any] | None] = {}

    def run_graph(args: list[Any]) -> Any:
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
        return _run_fused(gm, args, replay, logged)

    def run(args: list[Any]) -> Any:
        if spmd is None:
            return run_graph(args)
        if is_backward:
            with spmd.backward(args):
                return run_graph(args)
        spmd.forward_ran(args)
        return run_graph(args)

    return run


def _split_runner(
    gm: torch.fx.GraphModule, args: list[Any], label: str
) -> Callable[[list[Any]], Any] | None:
    """For a graph with CPU tensor arguments (an optimizer's step counts): a runner that
    computes its host part with PyTorch on the CPU and replays its device graph (see
    ``torch_tpu._host_split``), or None where it cannot be cut."""
    from torch_tpu import _host_split

    split = _host_split.split(gm, args)
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


def _compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    spmd: _SpmdSafeForward | None = None,
    is_backward: bool = False,
) -> Callable:
    """AOTAutograd's forward, backward or inference compiler: a boxed callable, which
    AOTAutograd's cache can store (see ``torch_tpu._aot_cache``)."""
    from torch_tpu._aot_cache import GraphCode

    return GraphCode(gm, spmd, is_backward)


# Google TorchTPU's torch.compile options, and why each changes nothing here.
TORCHTPU_OPTIONS = {
    "async_compile": "programs compile when first run",
    "num_dynamic_buckets": "dynamic shapes are traced symbolically, without buckets",
    "bucket_size": "dynamic shapes are traced symbolically, without buckets",
    "serializable": "compiled programs always go to the disk cache",
    "name": "graphs are named by their structure",
}
_noted: set[str] = set()


def _accept_options(options: dict[str, Any] | None) -> None:
    """TorchTPU's options are accepted, each noted once as meaning nothing here; any
    other option is an error that names it."""
    import warnings

    for key, value in (options or {}).items():
        if key not in TORCHTPU_OPTIONS:
            raise ValueError(
                f"torch.compile(backend='tpu'): unknown option {key!r}; the tpu backend "
                f"accepts {sorted(TORCHTPU_OPTIONS)}"
            )
        if key == "num_dynamic_buckets" and not (isinstance(value, int) and 1 <= value <= 8):
            raise ValueError(
                f"num_dynamic_buckets must be a whole number from 1 to 8, got {value!r}"
            )
        if key not in _noted:
            _noted.add(key)
            warnings.warn(
                f"torch.compile option {key!r} is accepted for TorchTPU compatibility and "
                f"ignored: {TORCHTPU_OPTIONS[key]}",
                stacklevel=2,
            )


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Callable:
    """The Dynamo backend registered as ``"tpu"``. ``options`` may hold TorchTPU's
    torch.compile options (``TORCHTPU_OPTIONS``), which are accepted and ignored.

    >>> fn = torch.compile(lambda x: x.sin() + 1, backend="tpu")
    >>> fn(torch.zeros(2, device="tpu")).cpu()
    tensor([1., 1.])
    """
    from torch_tpu import _aot_cache

    _accept_options(kwargs.pop("options", None))
    spmd = _SpmdSafeForward()  # shared by this graph's forward and backward
    fw_compiler = functools.partial(_compile_graph, spmd=spmd)
    bw_compiler = functools.partial(_compile_graph, spmd=spmd, is_backward=True)
    cached = _aot_cache.enabled()
    if cached:
        fw_compiler, bw_compiler = _aot_cache.serializable(fw_compiler, bw_compiler)
    compiler = aot_autograd(
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        decompositions=decompositions,
        # Mutated inputs (BatchNorm statistics, optimizer state) are copied back
        # inside the program, where their buffers can be donated.
        keep_inference_input_mutations=True,
    )
    if not cached:
        return compiler(gm, example_inputs, **kwargs)
    with _aot_cache.scope(gm):
        return compiler(gm, example_inputs, **kwargs)
