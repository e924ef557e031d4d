"""The runner of a graph with symbolic sizes: each call runs at the bucket of its sizes
(``torch_tpu.compile.buckets``), padded and masked (``torch_tpu.compile.padding``), so
that one program, recorded and replayed like any other graph's, serves every size in
the bucket.

Inputs at their real sizes are padded with zeros; a forward's activations saved for
the backward stay padded (the backward, bucketed alike, takes them as they are); what
the caller sees (outputs, gradients) is sliced back to the real sizes, as views where
a view can say it. A graph that cannot run padded runs at its exact sizes, one program
per size, and says why once (``TORCH_TPU_LOG_RECOMPILES=1``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.fx
from torch.nn import functional as F

from torch_tpu import _C
from torch_tpu.compile import padding
from torch_tpu.compile.buckets import BucketPolicy

# Inputs smaller than this are padded on the host (a copy out and back, no program);
# larger ones by a program on the device (one per distinct size).
_HOST_PAD_BYTES = 4 << 20


def _log(message: str) -> None:
    if _C._get_log_recompiles():
        print(f"[torch_tpu] {message}", file=sys.stderr)


class GraphStats:
    """Per compiled graph: programs built, buckets met, calls run padded or exact."""

    registry: dict[str, GraphStats] = {}

    def __init__(self, label: str) -> None:
        self.label = label
        self.programs = 0
        self.buckets: set[tuple[int, ...]] = set()
        self.padded_calls = 0
        self.exact_calls = 0
        self.not_bucketed: str = ""
        GraphStats.registry[label] = self

    def as_dict(self) -> dict:
        return {
            "programs": self.programs,
            "buckets": sorted(self.buckets),
            "padded_calls": self.padded_calls,
            "exact_calls": self.exact_calls,
            "not_bucketed": self.not_bucketed,
        }


def snapshot() -> dict:
    """Per compiled graph (by label): programs, buckets, padded and exact calls, and why
    a graph with dynamic sizes is not bucketed ("" when it is)."""
    return {label: stats.as_dict() for label, stats in GraphStats.registry.items()}


def reset() -> None:
    """Sets every graph's counters back to zero (the graphs stay listed)."""
    for stats in GraphStats.registry.values():
        stats.programs = stats.padded_calls = stats.exact_calls = 0
        stats.buckets.clear()


@dataclass
class _Sizes:
    """One call's sizes: each symbol's real and padded value; per dynamic input its
    padded shape, real shape, real shape unfolded into factors and F.pad's widths; the
    padded value of each SymInt input; per output its real shape or value."""

    real: dict
    padded: dict
    inputs: dict
    symbolic_args: dict
    outputs: dict


class BucketedGraph:
    """Runs one AOTAutograd graph with symbolic sizes at its buckets. `run_fused(fn,
    args)` runs `fn` deferred as one program (recorded and replayed by the caller).
    `saved_from` is the index of the first forward output saved for the backward
    (kept padded), or None."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        plan: padding.Plan,
        policy: BucketPolicy,
        saved_from: int | None,
        stats: GraphStats | None = None,
    ) -> None:
        self.plan = plan
        self.policy = policy
        self.stats = stats
        self.interpreter = padding.PaddedInterpreter(gm, plan)
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        output = next(n for n in gm.graph.nodes if n.op == "output")
        results = output.args[0]
        self.outputs = list(results) if isinstance(results, (list, tuple)) else [results]
        self.saved_from = saved_from
        self._size_tensors: dict[tuple[int, str], torch.Tensor] = {}
        self._sizes: dict[tuple, _Sizes] = {}

    # --- sizes ------------------------------------------------------------------------

    def bind(self, args: Sequence[Any]) -> dict:
        real = {}
        for symbol, (index, dim) in self.plan.sources.items():
            arg = args[index]
            real[symbol] = int(arg) if dim is None else int(arg.shape[dim])
        return real

    def _shape_at(self, node: torch.fx.Node, values: dict) -> list[int]:
        return [int(padding._evaluate(e, values)) for e in padding._shape(node)]

    def _size_tensor(self, value: int, device: torch.device) -> torch.Tensor:
        key = (value, str(device))
        tensor = self._size_tensors.get(key)
        if tensor is None:
            if len(self._size_tensors) > 4096:
                self._size_tensors.clear()
            # A device fill (its value a runtime operand), not a transfer: a graph that
            # moves data from the host is not replayed.
            tensor = torch.full((), value, dtype=torch.int64, device=device)
            self._size_tensors[key] = tensor
        return tensor

    # --- padding and slicing ------------------------------------------------------------

    def _pad(self, tensor: torch.Tensor, node: torch.fx.Node, sizes: _Sizes) -> torch.Tensor:
        target, expected, unfolded, pad = sizes.inputs[node.name]
        if list(tensor.shape) == target:
            return tensor  # a saved activation, padded by the forward
        if list(tensor.shape) != expected:
            raise RuntimeError(
                f"torch_tpu: a compiled graph's input {node.name} has shape "
                f"{list(tensor.shape)}, expected {expected} (or padded {target})"
            )
        small = tensor.numel() * tensor.element_size() <= _HOST_PAD_BYTES
        source = tensor.cpu() if tensor.device.type == "tpu" and small else tensor
        # Each factor of each dimension padded at its end (a dimension merging padded
        # sizes is unfolded first).
        out = F.pad(source.reshape(unfolded), pad).reshape(target)
        return out.to(tensor.device) if source is not tensor else out

    def _slice(self, tensor: torch.Tensor, node: torch.fx.Node, real: dict, padded: dict):
        expected = self._shape_at(node, real)
        if list(tensor.shape) == expected:
            return tensor
        layout = self.plan.layouts.get(node.name)
        if layout is None or len(layout) != tensor.dim():
            raise padding.Unsupported(f"output {node.name} has no known layout")
        if all(len(dim) == 1 for dim in layout):
            out = tensor
            for d, size in enumerate(expected):
                if out.shape[d] != size:
                    out = out.narrow(d, 0, size)
            # Eager gives these outputs contiguous strides; a cut view of the padding
            # would not (and Dynamo would guard the next call on its odd strides).
            val = node.meta.get("val")
            if not out.is_contiguous() and isinstance(val, torch.Tensor):
                if val.is_contiguous():
                    out = out.contiguous()
            return out
        # A dimension that merges padded ones (a view(batch * seq, width)): unfold it
        # into its factors, cut each, fold again (a copy: no view can say it).
        unfolded, cuts = [], []
        for dim in layout:
            for factor in dim:
                symbolic = not isinstance(factor, int)
                unfolded.append(int(padding._evaluate(factor, padded)) if symbolic else factor)
                cuts.append(int(padding._evaluate(factor, real)) if symbolic else factor)
        out = tensor.reshape(unfolded)
        for axis, (have, want) in enumerate(zip(unfolded, cuts)):
            if have != want:
                out = out.narrow(axis, 0, want)
        return out.reshape(expected)

    # --- the call ---------------------------------------------------------------------

    def sizes(self, real: dict) -> _Sizes:
        """The padded sizes for these real ones, and every shape derived from them
        (kept per real sizes: a steady loop computes them once)."""
        key = tuple(real[s] for s in self.plan.symbols)
        found = self._sizes.get(key)
        if found is not None:
            return found
        padded = self.plan.padded_sizes(real, self.policy.bucket)
        inputs = {}
        for node in self.placeholders:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor) or not any(
                isinstance(d, torch.SymInt) for d in val.shape
            ):
                continue
            layout = self.plan.layouts[node.name]
            unfolded, pad = [], []
            for dim in layout:
                for factor in dim:
                    have = (
                        int(padding._evaluate(factor, real))
                        if not isinstance(factor, int)
                        else factor
                    )
                    want = (
                        int(padding._evaluate(factor, padded))
                        if not isinstance(factor, int)
                        else factor
                    )
                    unfolded.append(have)
                    pad = [0, want - have] + pad
            inputs[node.name] = (
                self._shape_at(node, padded),
                self._shape_at(node, real),
                unfolded,
                pad,
            )
        symbolic_args = {
            node.name: int(padding._evaluate(padding._expr(node.meta["val"]), padded))
            for node in self.placeholders
            if isinstance(node.meta.get("val"), torch.SymInt)
        }
        outputs = {}
        for node in self.outputs:
            if isinstance(node, torch.fx.Node) and isinstance(node.meta.get("val"), torch.Tensor):
                outputs[node.name] = self._shape_at(node, real)
            elif isinstance(node, torch.fx.Node) and isinstance(
                node.meta.get("val"), (torch.SymInt, torch.SymFloat)
            ):
                value = padding._evaluate(sympy.sympify(node.meta["val"].node.expr), real)
                is_int = isinstance(node.meta["val"], torch.SymInt)
                outputs[node.name] = int(value) if is_int else float(value)
        sizes = _Sizes(real, padded, inputs, symbolic_args, outputs)
        if len(self._sizes) > 1024:
            self._sizes.clear()
        self._sizes[key] = sizes
        return sizes

    def prepare(self, args: Sequence[Any]) -> tuple[list[Any], _Sizes]:
        """The padded arguments (plus each symbol's real size as a 0-d tensor), and
        the sizes of this call."""
        sizes = self.sizes(self.bind(args))
        device = next(
            (a.device for a in args if isinstance(a, torch.Tensor) and a.device.type == "tpu"),
            torch.device("tpu"),
        )
        new_args: list[Any] = []
        for node, arg in zip(self.placeholders, args):
            if node.name in sizes.symbolic_args:
                new_args.append(sizes.symbolic_args[node.name])
            elif node.name in sizes.inputs and isinstance(arg, torch.Tensor):
                new_args.append(self._pad(arg, node, sizes))
            else:
                new_args.append(arg)
        for symbol in self.plan.symbols:
            new_args.append(self._size_tensor(sizes.real[symbol], device))
        return new_args, sizes

    def program(self, padded: dict) -> Callable:
        """What the deferred run executes: the graph on the padded arguments, with the
        trailing 0-d tensors as the symbols' real sizes."""
        symbols = self.plan.symbols
        count = len(symbols)

        def run(*all_args: Any) -> Any:
            graph_args = all_args[: len(all_args) - count]
            self.interpreter.bind(dict(zip(symbols, all_args[len(graph_args) :])), padded)
            try:
                return self.interpreter.run(*graph_args)
            finally:
                # Masks must not outlive the run: a value left alive becomes an output
                # of the program and stops its replay.
                self.interpreter.bind({}, {})

        return run

    def finish(self, outputs: Any, sizes: _Sizes) -> Any:
        """The outputs as the caller sees them: real sizes (saved activations stay
        padded), symbolic outputs at their real values."""
        single = not isinstance(outputs, (list, tuple))
        values = [outputs] if single else list(outputs)
        for i, node in enumerate(self.outputs):
            if not isinstance(node, torch.fx.Node) or node.name not in sizes.outputs:
                continue
            expected = sizes.outputs[node.name]
            if not isinstance(expected, list):
                values[i] = expected  # a symbolic size, at its real value
            elif isinstance(values[i], torch.Tensor):
                if self.saved_from is not None and i >= self.saved_from:
                    continue
                if list(values[i].shape) != expected:
                    values[i] = self._slice(values[i], node, sizes.real, sizes.padded)
        if single:
            return values[0]
        return type(outputs)(values) if isinstance(outputs, tuple) else values


class DynamicState:
    """Shared by one Dynamo graph's forward and backward: the bucket policy, whether
    the forward ran bucketed, and if so the layouts of the activations it saved (they
    reach the backward padded)."""

    def __init__(self, policy: BucketPolicy) -> None:
        self.policy = policy
        self.forward_bucketed: bool | None = None
        self.saved_from: int | None = None
        self.saved_layouts: dict[str, padding.Layout] = {}


def saved_outputs_start() -> int | None:
    """At a forward's compile: the index of its first output saved for the backward,
    from AOTAutograd's metadata (None where it is not known)."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    return getattr(meta, "num_forward", None)


class Unpadder:
    """For a backward that runs at exact sizes after a bucketed forward: cuts the saved
    activations back to their real sizes."""

    def __init__(self, gm: torch.fx.GraphModule, plan: padding.Plan, policy: BucketPolicy) -> None:
        self.policy = policy
        self.graph = BucketedGraph(gm, plan, policy, None)

    def __call__(self, args: list[Any]) -> list[Any]:
        real = self.graph.bind(args)
        padded = self.graph.plan.padded_sizes(real, self.policy.bucket)
        out = list(args)
        for i, node in enumerate(self.graph.placeholders):
            if isinstance(out[i], torch.Tensor) and node.name in self.graph.plan.layouts:
                out[i] = self.graph._slice(out[i], node, real, padded)
        return out


def make(
    gm: torch.fx.GraphModule, state: DynamicState | None, is_backward: bool, label: str
) -> tuple[BucketedGraph | None, Unpadder | None]:
    """The bucketed runner for `gm`, or None where it runs at exact sizes (static, or
    not bucketable: said once on the recompile log and in ``snapshot()``); and for a
    backward at exact sizes after a bucketed forward, what cuts its inputs."""
    stats = GraphStats(label)
    if state is None or not padding.has_symbols(gm):
        return None, None
    from torch_tpu.compile import buckets

    known = state.saved_layouts if is_backward else None
    if not buckets.enabled():
        stats.not_bucketed = "TORCH_TPU_DYNAMIC_BUCKETS=0"
    elif is_backward and state.forward_bucketed is False:
        stats.not_bucketed = "its forward runs at exact sizes"
    else:
        try:
            plan = padding.analyze(gm, known)
        except padding.Unsupported as why:
            stats.not_bucketed = str(why)
        else:
            if not is_backward:
                state.forward_bucketed = True
                state.saved_from = saved_outputs_start()
                state.saved_layouts = {}
                output = next(n for n in gm.graph.nodes if n.op == "output")
                results = output.args[0] if isinstance(output.args[0], (list, tuple)) else []
                for i, node in enumerate(results):
                    if state.saved_from is not None and i >= state.saved_from:
                        layout = plan.layouts.get(getattr(node, "name", None))
                        if isinstance(layout, tuple):
                            state.saved_layouts[node.name] = layout
            saved_from = None if is_backward else state.saved_from
            return BucketedGraph(gm, plan, state.policy, saved_from, stats), None
    _log(f"{label} runs at exact sizes, a program per size: {stats.not_bucketed}")
    if not is_backward:
        state.forward_bucketed = False
        return None, None
    if state.forward_bucketed:
        try:
            return None, Unpadder(gm, padding.inputs_plan(gm, known), state.policy)
        except padding.Unsupported as why:
            raise RuntimeError(
                f"torch_tpu: {label} cannot take its bucketed forward's activations: {why}; "
                "set TORCH_TPU_DYNAMIC_BUCKETS=0"
            ) from None
    return None, None
