"""Size buckets for eager code: a sequence of tpu ops that differs from an earlier one only in
a dimension's size reuses one program for every size in that size's bucket.

    torch_tpu.set_dynamic_buckets(True)            # or TORCH_TPU_EAGER_BUCKETS=1
    torch_tpu.set_dynamic_buckets(True, buckets=[64, 128, 512])
    torch_tpu.set_dynamic_buckets(False)

How (docs/eager_buckets.md has the why): while buckets are on, the ops on tpu tensors are
recorded instead of run, up to the next point where the host needs a value (``item()``, a
copy to the CPU, ``torch.tpu.synchronize()``, an op whose result size depends on values).
Each result is a placeholder with its real metadata; views are real views of it. At that
point the recorded *segment* runs:

- the first time its structure is met, and while no input size has changed, op by op as
  it was recorded (what the eager mode would have run);
- once two segments of one structure differ in some input dimensions, those dimensions are
  dynamic: the segment becomes a Python function of its inputs whose integer arguments are
  expressions of those dimensions (``8 * s0`` for a ``view`` to 184 rows when ``s0`` is 23:
  fitted from two segments, checked on every later one), compiled with
  ``torch.compile(backend="tpu")`` with the dimensions marked dynamic, so it runs at their
  bucket, padded and masked (``torch_tpu.compile.padding``), one program per bucket.

A later segment whose integers do not fit the expressions (a literal that happened to vary
with a size) is fitted again from the last two, so a wrong guess costs a compile, never a
wrong value. Results still referenced when a segment ends get their values; the others are
never computed.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _disable_current_modes,
    _get_current_dispatch_mode,
)

from torch_tpu import _C

aten = torch.ops.aten

# Ops that only read metadata, run as they are on placeholders (no value needed).
_METADATA_OPS = {
    "aten::_fused_sdp_choice",
    "aten::is_same_size",
    "aten::_has_compatible_shallow_copy_type",
    "aten::is_coalesced",
    "aten::sym_size",
    "aten::sym_stride",
    "aten::sym_numel",
}
_SEGMENT_LIMIT = 20000  # ops in one segment before it runs anyway (a loop that never syncs)
# A segment of fewer computing ops runs as recorded: one or two small programs per size
# cost less than a compiled function's trace, and such segments are mostly a loop over
# tensors of different shapes (printing parameters), not one computation at many sizes.
_MIN_BUCKETED_OPS = 3
_HISTORY = 6  # segments of one structure whose integers a fit must reproduce
_MAX_FITS = 6  # fits of one structure before it is left to run as recorded
_MAX_STRUCTURES = 256  # structures remembered (the oldest is forgotten past it)


def _is_tpu(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "tpu"


@dataclass
class _Op:
    func: Any  # an OpOverload
    args: Any  # the flattened arguments, with tensors as ("v", name) and ints as ("i", k)
    spec: Any  # how the leaves nest in (args, kwargs): see _flatten
    outputs: list[str]  # value names of the results (tensors), in order
    single: bool  # the op returns one tensor (not a tuple/list)
    computes: bool = True  # False for a view (made when recorded)


@dataclass
class _Shape:
    """What one structure has seen: the last segment's input shapes and integers, the
    dimensions found dynamic, the compiled functions by code."""

    last_shapes: list[tuple[int, ...]] | None = None
    last_ints: list[int] | None = None
    dynamic: dict[tuple[int, int], str] = field(default_factory=dict)  # (input, dim) -> symbol
    expressions: list[tuple[int, ...]] | None = None  # per int: (const, (coef, symbol)...)
    last_floats: list[float] | None = None
    # The last segments' input shapes and integers, oldest first (what the fits must hold for).
    history: list[tuple[list[tuple[int, ...]], list[int]]] = field(default_factory=list)
    # Floats that changed between segments are arguments of the compiled function; the
    # others are its constants (an epsilon, a scale: Dynamo would move an argument float
    # to the device in the program, which then cannot be replayed).
    float_params: tuple[int, ...] | None = None
    compiled: dict[tuple, Any] = field(default_factory=dict)  # by the code's variables
    exact: Any = None  # the segment as recorded, as a Python function
    exact_only: str = ""  # why this structure runs op by op only
    fits: int = 0
    label: str = "eager segment"


class _Segment:
    def __init__(self) -> None:
        self.ops: list[_Op] = []
        # External tpu tensors, as aliases made when first met: the segment reads the
        # storage it was recorded with even if `t.data = ...` swaps the user's tensor's.
        self.inputs: list[torch.Tensor] = []
        # id(user's tensor) -> (name, weak reference to it, its storage when recorded)
        self.input_names: dict[int, tuple[str, weakref.ref, int]] = {}
        self.input_ids: list[int] = []
        self.values: dict[int, tuple[weakref.ref, str]] = {}  # id(tensor) -> (ref, name)
        # Placeholders that own their storage, by a weak reference and their storage: a
        # result is needed if anything but the segment still uses its storage (the user's
        # tensor, a view, autograd's saved outputs, which are other tensors over the same
        # storage). The tensor itself is not held: autograd steals a gradient nobody else
        # holds instead of copying it.
        self.owners: list[tuple[weakref.ref, Any, tuple, str]] = []
        self.ints: list[int] = []
        self.floats: list[float] = []
        self.cpu_tensors: list[torch.Tensor] = []  # 0-d CPU operands
        self.count = 0
        self.by_storage: dict[int, tuple[weakref.ref, str]] = {}
        self.constants: list[Any] = []

    def mark(self) -> tuple[int, ...]:
        return (
            len(self.ops),
            len(self.inputs),
            len(self.ints),
            len(self.floats),
            len(self.cpu_tensors),
            len(self.owners),
        )

    def rewind(self, mark: tuple[int, ...]) -> None:
        """Forgets what an op that could not be recorded added."""
        ops, inputs, ints, floats, cpu, owners = mark
        for key in self.input_ids[inputs:]:
            self.input_names.pop(key, None)
        del self.ops[ops:], self.inputs[inputs:], self.ints[ints:], self.floats[floats:]
        del self.input_ids[inputs:]
        del self.cpu_tensors[cpu:], self.owners[owners:]

    def view_of(self, t: torch.Tensor, base: str) -> str:
        args = [("v", base)]
        for x in (*t.shape, *t.stride(), t.storage_offset()):
            args.append(("i", len(self.ints)))
            self.ints.append(int(x))
        rank = t.dim()
        spec = _flatten((0, list(range(rank)), list(range(rank)), 0), {})[1]
        name = self.new_value(t, owner=False)
        self.ops.append(_Op(aten.as_strided.default, args, spec, [name], True, False))
        return name

    def name_of(self, t: torch.Tensor) -> str:
        # (A tensor whose storage changed since it was named had `.data` set, which no
        # dispatch shows: it is another value now.)
        storage = _storage_key(t)
        entry = self.values.get(id(t))
        if entry is not None and entry[0]() is t and entry[2] == storage:
            return entry[1]
        entry = self.input_names.get(id(t))
        if entry is not None and entry[1]() is t and entry[2] == storage:
            return entry[0]
        owner = self.by_storage.get(storage)
        if owner is not None:
            # Another tensor over a recorded result's storage (autograd's saved outputs
            # are such; so is a tensor whose `.data` was set to a result): a view of it.
            # (The segment holds every storage it named, so the key is not a reused one.)
            return self.view_of(t, owner[1])
        name = f"in{len(self.inputs)}"
        self.inputs.append(t.detach())
        self.input_ids.append(id(t))
        self.input_names[id(t)] = (name, weakref.ref(t), storage)
        return name

    def same_value(self, t: torch.Tensor, name: str) -> None:
        self.values[id(t)] = (weakref.ref(t), name, _storage_key(t))

    def new_value(self, t: torch.Tensor, owner: bool) -> str:
        name = f"v{self.count}"
        self.count += 1
        self.same_value(t, name)
        if owner:
            meta = (t.shape, t.stride(), t.dtype, t.device)
            self.owners.append((weakref.ref(t), t.untyped_storage(), meta, name))
        return name


class _Recorder(TorchDispatchMode):
    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__()
        self.options = options
        self.lock = threading.RLock()
        self.segment = _Segment()
        self.shapes: dict[str, _Shape] = {}
        self.stats = {"segments": 0, "exact": 0, "bucketed": 0, "compiled_functions": 0}
        self.said: set[tuple[str, str]] = set()  # ops logged as ending a segment, and why
        # True during an optimizer's step: its ops run as plain defer_and_fuse, unrecorded
        # (parameters never change size; recording them would only add host time).
        self.paused = False
        self.off = False  # turned off while not on top of its mode stack
        # Storages of results whose segment raised when it ran (an out-of-memory, a bad
        # index), with the error: reading one raises instead of returning garbage.
        self.failed: dict[int, tuple[Any, str]] = {}

    # --- recording --------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _C._get_eager_mode() != "defer_and_fuse":
            if self.segment.ops:
                self.flush()  # (a mode switched on this thread alone)
            return func(*args, **kwargs)
        if self.paused or self.off:
            return func(*args, **kwargs)
        flat, spec = _flatten(args, kwargs)
        if not any(_is_tpu(x) for x in flat) and not _creates_on_tpu(kwargs):
            if self.segment.cpu_tensors and func._schema.is_mutable:
                # A CPU scalar the segment reads is about to change (`step += 1`): the
                # segment must see its value as it was when recorded.
                self._flush_if_writes_cpu_operand(func, args, kwargs)
            return func(*args, **kwargs)
        if self.failed:
            self._raise_if_failed(flat)
        with self.lock:
            name = func._schema.name
            if name in _METADATA_OPS:
                return func(*args, **kwargs)
            if _is_upload(func, flat, kwargs):
                return func(*args, **kwargs)  # host data: nothing recorded is needed
            why = _not_recordable(func, args, flat, kwargs)
            if not why:
                mark = self.segment.mark()
                try:
                    return self._record(func, flat, spec, args, kwargs)
                except _CannotRecord as error:
                    self.segment.rewind(mark)
                    why = str(error)
            if (name, why) not in self.said:
                self.said.add((name, why))
                _log(f"eager buckets: {name} ends the recorded segment and runs now: {why}")
            self.flush()
            return func(*args, **kwargs)

    def _flush_if_writes_cpu_operand(self, func, args, kwargs) -> None:
        operands = {_storage_key(t) for t in self.segment.cpu_tensors}
        written = []
        for i, name, kwarg_only in _op_info(func).written_arguments:
            value = kwargs.get(name) if kwarg_only or i >= len(args) else args[i]
            written.extend(value if type(value) in (list, tuple) else [value])
        if any(isinstance(t, torch.Tensor) and _storage_key(t) in operands for t in written):
            self.flush()

    def _raise_if_failed(self, flat) -> None:
        for x in flat:
            if isinstance(x, torch.Tensor) and x.device.type == "tpu":
                entry = self.failed.get(_storage_key(x))
                if entry is not None:
                    raise RuntimeError(
                        "this tensor has no value: the eager segment that computes it "
                        f"failed when it ran ({entry[1]})"
                    )

    def _record(self, func, flat, spec, args, kwargs):
        segment = self.segment
        info = _op_info(func)
        if info.same_value:
            # detach/alias: the same value under another tensor (no op to record).
            result = func(*args, **kwargs)
            segment.same_value(result, segment.name_of(flat[0]))
            return result
        encoded = []
        for x in flat:
            if isinstance(x, torch.Tensor):
                if x.device.type == "tpu":
                    if x.layout != torch.strided or x.is_quantized:
                        raise _CannotRecord("a sparse or quantized tensor")
                    encoded.append(("v", segment.name_of(x)))
                elif x.dim() == 0:
                    encoded.append(("c", len(segment.cpu_tensors)))
                    segment.cpu_tensors.append(x)
                else:
                    raise _CannotRecord("a CPU tensor with dimensions among its arguments")
            elif isinstance(x, bool) or x is None:
                encoded.append(("k", x))
            elif isinstance(x, int):
                encoded.append(("i", len(segment.ints)))
                segment.ints.append(x)
            elif isinstance(x, float):
                encoded.append(("f", len(segment.floats)))
                segment.floats.append(x)
            elif isinstance(x, (torch.dtype, torch.device, torch.layout, torch.memory_format, str)):
                encoded.append(("k", x))
            else:
                raise _CannotRecord(f"an argument of type {type(x).__name__}")
        if info.view:
            # A view: made for real on the placeholder (no value is read).
            result = func(*args, **kwargs)
            outs = [result] if isinstance(result, torch.Tensor) else list(result)
            names = [segment.new_value(t, owner=False) for t in outs]
        elif info.mutates:
            # In place or out=: the results are the mutated arguments.
            for i, name, kwarg_only in info.written_arguments:
                written = kwargs.get(name) if kwarg_only or i >= len(args) else args[i]
                for t in written if type(written) in (list, tuple) else (written,):
                    if isinstance(t, torch.Tensor) and t.device.type != "tpu":
                        raise _CannotRecord("it writes a CPU tensor")
            result = _mutated_results(func, args, kwargs)
            if info.writes_out:
                _check_out_keeps_its_sizes(func, flat, spec, args, kwargs, result)
            else:
                # Its meta kernel checks the arguments (`clamp_()` with no bounds, a
                # shape that does not broadcast into the written one): a bad one raises
                # at the op, as in eager, not when the segment runs.
                _on_meta(func, flat, spec, args, kwargs)
            outs = (
                []
                if result is None
                else [result]
                if isinstance(result, torch.Tensor)
                else list(result)
            )
            names = ["_" for _ in outs]  # the mutated arguments keep their names
        else:
            kind, metas = _on_meta(func, flat, spec, args, kwargs)
            device = _device_of(flat)
            outs = [
                torch.empty_strided(m[0], m[1], dtype=m[2], device=device)
                if isinstance(m, tuple)
                else m
                for m in metas
            ]
            names = [
                segment.new_value(t, owner=True) if isinstance(t, torch.Tensor) else "_"
                for t in outs
            ]
            result = outs[0] if kind == "single" else list(outs) if kind == "list" else tuple(outs)
        single = isinstance(result, torch.Tensor)
        segment.ops.append(_Op(func, encoded, spec, names, single, not info.view))
        for t, name in zip(outs, names):
            if isinstance(t, torch.Tensor) and name.startswith("v"):
                segment.by_storage.setdefault(_storage_key(t), (weakref.ref(t), name))
        if len(segment.ops) >= _SEGMENT_LIMIT:
            self.flush()
        return result

    # --- running a segment ------------------------------------------------------------

    def flush(self) -> None:
        with self.lock:
            segment = self.segment
            if not segment.ops:
                # (Names given so far, to inputs and to detached aliases, go with it.)
                self.segment = _Segment()
                return
            self.segment = _Segment()
            if self.failed:
                self.failed = {
                    k: v
                    for k, v in self.failed.items()
                    if torch._C._storage_Use_Count(v[0]._cdata) > 1
                }
            # The recorded ops are autograd's own: they run again below it.
            with _disable_current_modes(), torch.no_grad():
                self._run(segment)

    def _run(self, segment: _Segment) -> None:
        self.stats["segments"] += 1
        live = [
            (_over(ref, storage, meta), name)
            for ref, storage, meta, name in segment.owners
            if torch._C._storage_Use_Count(storage._cdata) > 1
        ]
        segment.owners = []
        try:
            self._run_live(segment, live)
        except BaseException as error:
            # The results still in use never got values: reading one raises this error
            # again, as defer_and_fuse's failed graphs do, instead of reading garbage.
            message = f"{type(error).__name__}: {error}"
            for t, _ in live:
                storage = t.untyped_storage()
                self.failed[storage._cdata] = (storage, message)
            raise

    def _run_live(self, segment: _Segment, live) -> None:
        computes = sum(1 for op in segment.ops if op.computes)
        if computes == 0:
            return  # views only: they were made when recorded, there is nothing to run
        shapes = [tuple(t.shape) for t in segment.inputs]
        key = _structure(segment, [n for _, n in live])
        state = self.shapes.get(key)
        if state is None:
            if len(self.shapes) >= _MAX_STRUCTURES:
                del self.shapes[next(iter(self.shapes))]  # the oldest
            self.stats["structures"] = self.stats.get("structures", 0) + 1
            state = self.shapes[key] = _Shape(label=f"eager segment {self.stats['structures'] - 1}")
        outputs = None
        if computes >= _MIN_BUCKETED_OPS and not state.exact_only and state.last_shapes:
            values = self._fit(segment, state, shapes)
            if values is not None:
                outputs = self._run_bucketed(segment, state, live)
        state.last_shapes, state.last_ints = shapes, list(segment.ints)
        state.last_floats = list(segment.floats)
        state.history = [*state.history[-(_HISTORY - 1) :], (shapes, list(segment.ints))]
        if outputs is None:
            self.stats["exact"] += 1
            if state.exact is None:
                every = tuple(range(len(segment.floats)))
                state.exact = _function(segment, live, None, None, every)
            # (Every integer and float is an argument: the function serves every later
            # segment of this structure, whatever its sizes.)
            outputs = state.exact(
                *segment.inputs, *segment.floats, *segment.ints, *segment.cpu_tensors
            )
        for (t, _), value in zip(live, outputs):
            t.copy_(value)

    def _fit(self, segment: _Segment, state: _Shape, shapes) -> dict[str, int] | None:
        """The dynamic sizes of this segment (None: it has none), after checking its
        integers and floats against the expressions fitted so far (fitting them again
        from the last two segments where they do not hold)."""
        for i, (old, new) in enumerate(zip(state.last_shapes, shapes)):
            for d, (a, b) in enumerate(zip(old, new)):
                if a != b and (i, d) not in state.dynamic:
                    state.dynamic[(i, d)] = f"s{len(state.dynamic)}"
        if not state.dynamic:
            return None
        values = {s: shapes[i][d] for (i, d), s in state.dynamic.items()}
        if state.expressions is not None:
            wrong = [
                k
                for k, (e, v) in enumerate(zip(state.expressions, segment.ints))
                if _evaluate(e, values) != v
            ]
            changed = [
                k
                for k, (a, b) in enumerate(zip(state.last_floats, segment.floats))
                if k not in state.float_params and not _same_float(a, b)
            ]
            if not wrong and not changed:
                return values
            if wrong:
                k = wrong[0]
                _log(
                    f"{state.label}: an integer argument is {segment.ints[k]} where its "
                    f"fitted expression {_int_source(state.expressions[k])} gives "
                    f"{_evaluate(state.expressions[k], values)}: fitted again"
                )
        state.float_params = tuple(
            k
            for k, (a, b) in enumerate(zip(state.last_floats, segment.floats))
            if not _same_float(a, b) or k in (state.float_params or ())
        )
        state.fits += 1
        if state.fits > _MAX_FITS:
            state.exact_only = f"its integers followed no fitted expression {_MAX_FITS} times"
            _log(f"{state.label} runs as recorded, at exact sizes: {state.exact_only}")
            return None
        points = [
            ({s: shape[i][d] for (i, d), s in state.dynamic.items()}, ints)
            for shape, ints in (*state.history, (shapes, segment.ints))
        ]
        state.expressions = _fit(points)
        return values

    def _run_bucketed(self, segment, state, live):
        params = state.float_params
        variables = (tuple(state.dynamic.items()), tuple(state.expressions), params)
        fn = state.compiled.get(variables)
        if fn is None:
            fn = torch.compile(
                _function(segment, live, state.dynamic, state.expressions, params),
                backend="tpu",
                options=self.options or None,
                # A graph break would run part of the segment before a later part fails
                # to compile; whole or not at all, so the fallback runs it once.
                fullgraph=True,
            )
            state.compiled[variables] = fn
            self.stats["compiled_functions"] += 1
            sizes = ", ".join(f"{s} = in{i}.size({d})" for (i, d), s in state.dynamic.items())
            _log(f"{state.label} ({len(segment.ops)} ops): compiled as a function of {sizes}")
        for i, d in state.dynamic:
            torch._dynamo.maybe_mark_dynamic(segment.inputs[i], d)
        try:
            floats = [segment.floats[i] for i in params]
            outputs = fn(*segment.inputs, *floats, *segment.cpu_tensors)
        except torch._dynamo.exc.TorchDynamoException as error:
            # It did not compile (a failed run raises as it is: running it again op by op
            # would not help and could apply its writes twice).
            state.exact_only = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            warnings.warn(
                f"torch_tpu eager buckets: a recorded segment ({len(segment.ops)} ops) did "
                f"not compile as a function of its sizes and runs at exact sizes, a program "
                f"per size: {state.exact_only}",
                stacklevel=2,
            )
            return None
        self.stats["bucketed"] += 1
        return outputs


def _log(message: str) -> None:
    if _C._get_log_recompiles():
        print(f"[torch_tpu] {message}", file=sys.stderr)


class _CannotRecord(Exception):
    pass


def _over(ref: weakref.ref, storage: Any, meta: tuple) -> torch.Tensor:
    """The placeholder, or (if only other tensors over its storage are left, as
    autograd's saved outputs) a tensor like it over its storage, to write the result."""
    t = ref()
    if t is not None and _storage_key(t) == storage._cdata:
        return t
    shape, stride, dtype, device = meta
    return torch.empty(0, dtype=dtype, device=device).set_(storage, 0, shape, stride)


def _flatten(args: tuple, kwargs: dict) -> tuple[list[Any], Any]:
    """The leaves of (args, kwargs) and how they nest, as pytree would flatten them (only
    exact lists and tuples are containers) but without its generic walk: this runs for
    every operator while recording. ATen arguments nest one level (a list of tensors or
    sizes); deeper nesting falls back to pytree."""
    flat: list[Any] = []
    arg_kinds = [_add_leaves(a, flat) for a in args]
    kw_kinds = [(key, _add_leaves(a, flat)) for key, a in kwargs.items()]
    if _NESTED in arg_kinds or any(kind is _NESTED for _, kind in kw_kinds):
        return pytree.tree_flatten((args, kwargs))
    return flat, (tuple(arg_kinds), tuple(kw_kinds))


_NESTED = object()  # _add_leaves: nested deeper than one level


def _add_leaves(a: Any, flat: list[Any]) -> Any:
    """Appends one argument's leaves to `flat`; returns how they nest (None: a leaf)."""
    kind = type(a)
    if kind is list or kind is tuple:
        if any(type(x) in (list, tuple, dict) for x in a):
            return _NESTED
        flat.extend(a)
        return (kind, len(a))
    if kind is dict:
        return _NESTED
    flat.append(a)
    return None


def _unflatten(leaves: list[Any], spec: Any) -> tuple[list[Any], dict[str, Any]]:
    """(args, kwargs) again from leaves and the nesting _flatten gave."""
    if isinstance(spec, pytree.TreeSpec):
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        return list(args), kwargs
    arg_kinds, kw_kinds = spec
    position = 0

    def take(kind):
        nonlocal position
        if kind is None:
            position += 1
            return leaves[position - 1]
        container, n = kind
        position += n
        return container(leaves[position - n : position])

    args = [take(kind) for kind in arg_kinds]
    kwargs = {key: take(kind) for key, kind in kw_kinds}
    return args, kwargs


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _creates_on_tpu(kwargs: dict) -> bool:
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "tpu"


def _device_of(flat: Sequence[Any]) -> torch.device:
    for x in flat:
        if _is_tpu(x):
            return x.device
        if isinstance(x, torch.device) and x.type == "tpu":
            return x
    return torch.device("tpu")


def _is_upload(func, flat, kwargs) -> bool:
    """A copy of host data into a new tpu tensor (``x.to("tpu")``)."""
    if func is not aten._to_copy.default:
        return False
    source = flat[0]
    return (
        isinstance(source, torch.Tensor) and source.device.type == "cpu" and _creates_on_tpu(kwargs)
    )


@dataclass(frozen=True)
class _OpInfo:
    """What recording needs from an operator's schema and tags, read once per operator
    (walking a schema from Python costs more than recording the op)."""

    never: str  # why it is never recorded ("" if it may be)
    view: bool  # returns an alias of an argument and writes none
    same_value: bool  # detach/alias: the argument's value with its own metadata
    mutates: bool  # writes an argument (in place or out=)
    writes_out: bool  # writes a keyword-only (out=) argument
    # For each return, the position and name of the argument it is (in-place/out= ops).
    returned_arguments: tuple[tuple[int, str, bool], ...]
    # The position and name of every argument it writes.
    written_arguments: tuple[tuple[int, str, bool], ...]


_OP_INFO: dict[Any, _OpInfo] = {}
_SAME_VALUE_OPS = {"aten::detach", "aten::alias"}


def _op_info(func) -> _OpInfo:
    info = _OP_INFO.get(func)
    if info is not None:
        return info
    schema, tags = func._schema, func.tags
    never = ""
    if torch.Tag.data_dependent_output in tags or torch.Tag.dynamic_output_shape in tags:
        never = "data-dependent"
    elif torch.Tag.inplace_view in tags or schema.name in _RESIZING_OPS:
        # It changes a tensor's sizes in place: a placeholder's metadata would have to
        # follow, and a real input's would change twice (now and when the segment runs).
        never = "an in-place change of sizes"
    mutated = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    aliasing = any(r.alias_info is not None for r in schema.returns)
    returned = []
    for r in schema.returns:
        for i, a in enumerate(schema.arguments):
            if (
                a.alias_info is not None
                and r.alias_info is not None
                and a.alias_info.before_set == r.alias_info.before_set
            ):
                returned.append((i, a.name, a.kwarg_only))
                break
    if not never and schema.name in _INDEX_PUT_OPS:
        # Their meta kernels check less than the kernels (an empty index list, a 0-d
        # target): writes through an index run now, with eager's errors at the op.
        never = "a write through an index"
    if not never and "quantize" in schema.name:
        # (Meta kernels of quantizing ops give float results: quantized ones run now.)
        never = "it makes or reads quantized tensors"
    if not never and mutated and len(returned) != len(schema.returns):
        never = "it writes an argument and returns a new tensor"
    if (
        not never
        and not mutated
        and schema.returns
        and not any("Tensor" in str(r.type) for r in schema.returns)
    ):
        never = "it returns no tensor (a value for the host)"
    info = _OpInfo(
        never=never,
        view=aliasing and not mutated,
        same_value=schema.name in _SAME_VALUE_OPS and not mutated,
        mutates=bool(mutated),
        writes_out=any(a.kwarg_only for a in mutated),
        returned_arguments=tuple(returned),
        written_arguments=tuple(
            (i, a.name, a.kwarg_only)
            for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ),
    )
    _OP_INFO[func] = info
    return info


def _not_recordable(func, args, flat, kwargs) -> str:
    """Why an op must run now, on values: it reads a value on the host, moves data
    between the host and the device, or makes a result whose size depends on values."""
    never = _op_info(func).never
    if never:
        return never
    if (
        func._schema.name in _INDEXING_OPS
        and len(args) > 1
        and type(args[1]) in (list, tuple)
        and any(isinstance(i, torch.Tensor) and i.dtype in _MASK_DTYPES for i in args[1])
    ):
        # A mask selects as many elements as it has true values: a size the host must read.
        return "a boolean mask index"
    for value in (*args, *kwargs.values()):
        if type(value) in (list, tuple) and any(type(v) is float for v in value):
            # A list of floats (an optimizer's per-parameter step sizes) would be a constant
            # of the compiled function, a new one every step: it runs deferred as it is.
            return "a list of floats"
    host = device = False
    for x in flat:
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            if x.device.type == "tpu":
                device = True
            else:
                host = True
    target = kwargs.get("device")
    if target is not None:
        if torch.device(target).type == "tpu":
            device = True
        else:
            host = True
    if host and device:
        return "a copy between the host and the device"
    return ""


_INDEXING_OPS = {
    "aten::index",
    "aten::index_put",
    "aten::index_put_",
    "aten::_index_put_impl_",
    "aten::_unsafe_index",
    "aten::_unsafe_index_put",
}
_MASK_DTYPES = (torch.bool, torch.uint8)
_INDEX_PUT_OPS = {
    "aten::index_put",
    "aten::index_put_",
    "aten::_index_put_impl_",
    "aten::_unsafe_index_put",
}
_QUANTIZED_DTYPES = {
    torch.quint8,
    torch.qint8,
    torch.qint32,
    torch.quint4x2,
    torch.quint2x4,
}
_RESIZING_OPS = {"aten::resize_", "aten::resize_as_", "aten::set_", "aten::_resize_output_"}


def _check_out_keeps_its_sizes(func, flat, spec, args, kwargs, result) -> None:
    """An out= op that would resize its output (``torch.add(a, b, out=empty)``) is not
    recorded: the placeholder keeps its sizes while recording."""
    _, metas = _on_meta(func, flat, spec, args, kwargs)
    outs = [result] if isinstance(result, torch.Tensor) else list(result or ())
    for t, m in zip(outs, metas):
        if isinstance(t, torch.Tensor) and isinstance(m, tuple):
            if tuple(t.shape) != m[0] or (t.numel() > 1 and t.stride() != m[1]):
                raise _CannotRecord("out= resizes its output")


_META_CACHE: dict[tuple, list] = {}
_META_CACHE_LIMIT = 65536


def _meta_key(func, flat, spec) -> tuple | None:
    key: list[Any] = [func, str(spec) if isinstance(spec, pytree.TreeSpec) else spec]
    for x in flat:
        if isinstance(x, torch.Tensor):
            key.append((tuple(x.shape), x.stride(), x.dtype, x.device.type))
        elif isinstance(x, (int, float, bool, str, torch.dtype, torch.device, torch.layout)):
            key.append((type(x), x))
        elif x is None or isinstance(x, torch.memory_format):
            key.append(x)
        else:
            return None
    return tuple(key)


def _on_meta(func, flat, spec, args, kwargs) -> list:
    """The results' metadata (shape, strides, dtype; or the value of a non-tensor),
    from the op's meta kernel, remembered by the arguments' metadata."""
    key = _meta_key(func, flat, spec)
    found = _META_CACHE.get(key) if key is not None else None
    if found is not None:
        return found

    def to_meta(x):
        if _is_tpu(x):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        if isinstance(x, torch.device) and x.type == "tpu":
            return torch.device("meta")
        return x

    margs, mkwargs = pytree.tree_map(to_meta, (args, kwargs))
    try:
        result = func(*margs, **mkwargs)
    except Exception as error:  # noqa: BLE001 - no meta kernel, or bad input: run it now
        raise _CannotRecord(f"its meta kernel raised {type(error).__name__}") from error
    if isinstance(result, torch.Tensor):
        results = [result]
    elif isinstance(result, (list, tuple)):
        results = list(result)
    else:
        raise _CannotRecord("a result that is not a tensor")
    if any(
        isinstance(m, torch.Tensor)
        and (m.is_quantized or m.layout != torch.strided or m.dtype in _QUANTIZED_DTYPES)
        for m in results
    ):
        raise _CannotRecord("a sparse or quantized result")
    described = [
        (tuple(m.shape), m.stride(), m.dtype) if isinstance(m, torch.Tensor) else m for m in results
    ]
    # (Integers among the results are sizes, as attention's maximum lengths.)
    if not all(m is None or isinstance(m, (tuple, int)) for m in described):
        raise _CannotRecord("a result that is not a tensor or a size")
    kind = "single" if isinstance(result, torch.Tensor) else type(result).__name__
    entry = [kind, described]
    if key is not None:
        if len(_META_CACHE) > _META_CACHE_LIMIT:
            _META_CACHE.clear()
        _META_CACHE[key] = entry
    return entry


def _mutated_results(func, args, kwargs):
    """The arguments an in-place or out= op writes, as the op returns them."""
    returned = _op_info(func).returned_arguments
    outs = [
        kwargs[name] if kwarg_only or i >= len(args) else args[i]
        for i, name, kwarg_only in returned
    ]
    if not func._schema.returns:
        return None
    if len(func._schema.returns) == 1:
        return outs[0]
    return tuple(outs)


def _structure(segment: _Segment, live: list[str]) -> tuple:
    """What a segment does, without its sizes: ops, arguments (ints by position) and how
    they nest, input ranks and dtypes, which results are live. A tuple (hashed and
    compared in C, where formatting it as text cost a millisecond per segment)."""
    return (
        tuple((t.dim(), t.dtype) for t in segment.inputs),
        tuple(live),
        tuple(
            (
                op.func,
                tuple(op.args),
                str(op.spec) if isinstance(op.spec, pytree.TreeSpec) else op.spec,
                tuple(op.outputs),
            )
            for op in segment.ops
        ),
    )


def _fit(history: list[tuple[dict[str, int], list[int]]]) -> list[tuple]:
    """Each integer as an expression of the dynamic sizes that holds for every segment in
    `history` (sizes, integers; oldest first): a constant, ``a * s + b``, ``s + t + b`` or
    ``a * s * t + b``, the simplest that fits (the fewest terms, then no constant, then
    small numbers), so that two sizes changing at once (a batch and a length) are told
    apart as soon as the segments allow."""
    expressions = []
    for k in range(len(history[-1][1])):
        points = [(values, ints[k]) for values, ints in history]
        expressions.append(_fit_one(points))
    return expressions


def _fit_one(points: list[tuple[dict[str, int], int]]) -> tuple:
    values, v = points[-1]
    if all(p == v for _, p in points):
        return (v,)
    symbols = list(values)
    candidates: list[tuple] = []
    for (old_values, old), (new_values, new) in zip(points, points[1:]):
        if old == new:
            continue
        for i, s in enumerate(symbols):
            ds = new_values[s] - old_values[s]
            if ds and (new - old) % ds == 0:
                a = (new - old) // ds
                candidates.append((new - a * new_values[s], (a, s)))
            for t in symbols[i + 1 :]:
                dst = ds + new_values[t] - old_values[t]
                if dst and new - old == dst:
                    candidates.append((new - new_values[s] - new_values[t], (1, s), (1, t)))
            for t in symbols[i:]:
                p_old, p_new = old_values[s] * old_values[t], new_values[s] * new_values[t]
                if p_new != p_old and (new - old) % (p_new - p_old) == 0:
                    a = (new - old) // (p_new - p_old)
                    candidates.append((new - a * p_new, (a, s, t)))
    candidates.sort(
        key=lambda e: (
            len(e) + sum(len(term) - 2 for term in e[1:]),  # terms, products counting more
            e[0] != 0,
            abs(e[0]),
            sum(abs(term[0]) for term in e[1:]),
        )
    )
    for expression in candidates:
        if all(_evaluate(expression, vs) == p for vs, p in points):
            return expression
    return (v,)  # no fit: a constant (a later segment that differs misses, never errs)


def _evaluate(expression: tuple, values: dict[str, int]) -> int:
    total = expression[0]
    for term in expression[1:]:
        product = term[0]
        for s in term[1:]:
            product *= values[s]
        total += product
    return total


def _int_source(expression: tuple) -> str:
    parts = [" * ".join([str(term[0]), *term[1:]]) for term in expression[1:]]
    if expression[0] or not parts:
        parts.append(str(expression[0]))
    return " + ".join(parts)


def _same_float(a: float, b: float) -> bool:
    """Equal as a constant of a program: NaNs alike, -0.0 and 0.0 not."""
    if a != a or b != b:
        return a != a and b != b
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _source(segment: _Segment, live, dynamic, expressions, float_params) -> str:
    n_in, n_c = len(segment.inputs), len(segment.cpu_tensors)
    int_params = [f"i{k}" for k in range(len(segment.ints))] if expressions is None else []
    params = (
        [f"in{i}" for i in range(n_in)]
        + [f"f{i}" for i in float_params]
        + int_params
        + [f"c{i}" for i in range(n_c)]
    )
    lines = [f"def segment({', '.join(params)}):"]
    for (i, d), s in (dynamic or {}).items():
        lines.append(f"    {s} = in{i}.size({d})")
    constants: list[Any] = []

    def arg_source(item):
        kind, x = item
        if kind == "v":
            return x
        if kind == "i":
            if expressions is None:
                return f"i{x}"
            return _int_source(expressions[x])
        if kind == "f":
            return f"f{x}" if x in float_params else _float_source(segment.floats[x])
        if kind == "c":
            return f"c{x}"
        return repr(x) if isinstance(x, (bool, str)) or x is None else _constant(x, constants)

    for k, op in enumerate(segment.ops):
        leaves = [_Source(arg_source(item)) for item in op.args]
        call_args, call_kwargs = _unflatten(leaves, op.spec)
        text = ", ".join(
            [repr(a) for a in call_args] + [f"{key}={v!r}" for key, v in call_kwargs.items()]
        )
        target = f"op{k}"
        lines.append(f"    r = {target}({text})")
        if op.single:
            lines.append(f"    {op.outputs[0]} = r")
        else:
            for j, name in enumerate(op.outputs):
                lines.append(f"    {name} = r[{j}]")
    lines.append(f"    return ({''.join(name + ', ' for _, name in live)})")
    segment.constants = constants
    return "\n".join(lines)


class _Source:
    """An argument as source text (its repr is the text)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _constant(x: Any, constants: list[Any]) -> str:
    for i, c in enumerate(constants):
        if c is x or (type(c) is type(x) and c == x):
            return f"k{i}"
    constants.append(x)
    return f"k{len(constants) - 1}"


def _float_source(x: float) -> str:
    if x != x or x in (float("inf"), float("-inf")):
        return f"float({str(x)!r})"
    return repr(x)


def _function(segment: _Segment, live, dynamic, expressions, float_params, code=None):
    code = code or _source(segment, live, dynamic, expressions, float_params)
    namespace: dict[str, Any] = {f"op{k}": op.func for k, op in enumerate(segment.ops)}
    namespace.update({f"k{i}": c for i, c in enumerate(segment.constants)})
    exec(compile(code, "<torch_tpu eager segment>", "exec"), namespace)  # noqa: S102
    return namespace["segment"]


# --- the switch ---------------------------------------------------------------------------

_recorder: _Recorder | None = None
_stale: list[_Recorder] = []  # turned off, not yet off their mode stack


def set_dynamic_buckets(
    enabled: bool = True,
    *,
    buckets: Sequence[int] | None = None,
    bucket_size: int | None = None,
    num_dynamic_buckets: int | None = None,
) -> None:
    """Turns size buckets for eager code on or off (see the module docstring). The bucket
    options are torch.compile's (``torch_tpu.compile.buckets``)."""
    global _recorder
    if _recorder is not None:
        recorder, _recorder = _recorder, None
        recorder.flush()
        recorder.off = True
        # (If another mode was pushed above it, or this is another thread, popping would
        # take that one off: it stays on its stack, passing every op through, until a
        # later call finds it on top.)
        _stale.append(recorder)
    while _stale and _get_current_dispatch_mode() is _stale[-1]:
        _stale.pop().__exit__(None, None, None)
    if not enabled:
        return
    options = {}
    if buckets is not None:
        options["buckets"] = list(buckets)
    if bucket_size is not None:
        options["bucket_size"] = bucket_size
    if num_dynamic_buckets is not None:
        options["num_dynamic_buckets"] = num_dynamic_buckets
    _recorder = _Recorder(options)
    _recorder.__enter__()


def dynamic_buckets_enabled() -> bool:
    return _recorder is not None


def flush() -> None:
    """Runs what is recorded (``torch.tpu.synchronize()`` and ``torch_tpu.sync()`` do),
    and records again if an optimizer's step paused recording (its post-hook flushes)."""
    if _recorder is not None:
        _recorder.flush()
        _recorder.paused = False


def pause_for_optimizer_step() -> None:
    """An optimizer's step is about to run (its pre-hook): what is recorded runs, and the
    step's ops run as plain defer_and_fuse until the next flush(). Parameters and their
    states have fixed sizes, so there is nothing to bucket, and recording a step only to
    run it op by op again would double its host time. A step that raises leaves recording
    paused until the next flush: slower, never wrong."""
    if _recorder is not None:
        _recorder.flush()
        _recorder.paused = True


def stats() -> dict[str, int]:
    """Segments run, of them op by op and bucketed, and functions compiled."""
    return dict(_recorder.stats) if _recorder is not None else {}


def _configure_from_environment() -> None:
    """``TORCH_TPU_EAGER_BUCKETS=1`` turns buckets on at import (``0``, the default, off)."""
    value = os.environ.get("TORCH_TPU_EAGER_BUCKETS", "0")
    if value not in ("0", "1"):
        raise ValueError(f"TORCH_TPU_EAGER_BUCKETS must be 0 or 1, got {value!r}")
    if value == "1":
        set_dynamic_buckets(True)
