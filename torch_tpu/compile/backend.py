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
same inputs loads it instead of tracing and partitioning again (``torch_tpu.compile.aot_cache``,
which says why it is off by default); the programs always come from torch_tpu's disk cache.

>>> model = torch.compile(model, backend="tpu")  # doctest: +SKIP
>>> loss = model(x).sum(); loss.backward()  # doctest: +SKIP

The module is imported by the first ``torch.compile(..., backend="tpu")``, not by
``import torch_tpu`` (see ``torch_tpu.compile.hook``). Users name it ``torch_tpu.dynamo``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._dynamo.backends.common import aot_autograd

from torch_tpu.compile.bucketed import DynamicState
from torch_tpu.compile.buckets import BucketPolicy
from torch_tpu.compile.decompositions import decompositions
from torch_tpu.compile.runner import SpmdSafeForward


def _compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    spmd: SpmdSafeForward | None = None,
    is_backward: bool = False,
    dynamic: DynamicState | None = None,
) -> Callable:
    """AOTAutograd's forward, backward or inference compiler: a boxed callable, which
    AOTAutograd's cache can store (see ``torch_tpu.compile.aot_cache``)."""
    from torch_tpu.compile.aot_cache import GraphCode

    code = GraphCode(gm, spmd, is_backward, dynamic)
    if not is_backward:
        code.prepare()  # the forward's bucket plan, which its backward reads
    return code


# Google TorchTPU's torch.compile options that change nothing here, and why.
TORCHTPU_OPTIONS = {
    "async_compile": "programs compile when first run",
    "serializable": "compiled programs always go to the disk cache",
    "name": "graphs are named by their structure",
}
# Options that shape the buckets of dynamic sizes (torch_tpu.compile.buckets).
BUCKET_OPTIONS = ("bucket_size", "num_dynamic_buckets", "buckets")
_noted: set[str] = set()


def _accept_options(options: dict[str, Any] | None) -> BucketPolicy:
    """The bucket policy the options ask for. TorchTPU's other options are accepted,
    each noted once as meaning nothing here; any other option is an error that names
    it."""
    import warnings

    chosen: dict[str, Any] = {}
    for key, value in (options or {}).items():
        if key not in TORCHTPU_OPTIONS and key not in BUCKET_OPTIONS:
            raise ValueError(
                f"torch.compile(backend='tpu'): unknown option {key!r}; the tpu backend "
                f"accepts {sorted([*TORCHTPU_OPTIONS, *BUCKET_OPTIONS])}"
            )
        if key == "num_dynamic_buckets" and not (isinstance(value, int) and 1 <= value <= 8):
            raise ValueError(
                f"num_dynamic_buckets must be a whole number from 1 to 8, got {value!r}"
            )
        if key in BUCKET_OPTIONS:
            chosen[key] = tuple(value) if key == "buckets" else value
            continue
        if key not in _noted:
            _noted.add(key)
            warnings.warn(
                f"torch.compile option {key!r} is accepted for TorchTPU compatibility and "
                f"ignored: {TORCHTPU_OPTIONS[key]}",
                stacklevel=2,
            )
    return BucketPolicy(**chosen)


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Callable:
    """The Dynamo backend registered as ``"tpu"``. ``options`` may hold the bucket
    options of dynamic sizes (``bucket_size``, ``num_dynamic_buckets``, ``buckets``: see
    ``torch_tpu.compile.buckets``) and TorchTPU's other options (``TORCHTPU_OPTIONS``),
    accepted and ignored.

    >>> fn = torch.compile(lambda x: x.sin() + 1, backend="tpu")
    >>> fn(torch.zeros(2, device="tpu")).cpu()
    tensor([1., 1.])
    """
    from torch_tpu.compile import aot_cache

    policy = _accept_options(kwargs.pop("options", None))
    spmd = SpmdSafeForward()  # shared by this graph's forward and backward
    dynamic = DynamicState(policy)  # so is how its dynamic sizes are bucketed
    fw_compiler = functools.partial(_compile_graph, spmd=spmd, dynamic=dynamic)
    bw_compiler = functools.partial(_compile_graph, spmd=spmd, is_backward=True, dynamic=dynamic)
    cached = aot_cache.enabled()
    if cached:
        fw_compiler, bw_compiler = aot_cache.serializable(fw_compiler, bw_compiler)
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
    with aot_cache.scope(gm):
        return compiler(gm, example_inputs, **kwargs)
