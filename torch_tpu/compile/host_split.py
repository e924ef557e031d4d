"""A compiled graph's host part: the ops on CPU tensors, run by PyTorch on the host.

``torch.optim`` optimizers keep their step counts on the CPU unless ``capturable=True``, so
an optimizer's compiled graph mixes CPU scalar math (``step + 1``, ``1 - beta1 ** step``,
``lr / bias_correction``) with device math that reads its results. Run as one graph, the
CPU arguments stop it from being replayed (a replayed program cannot recompute host
values), and the whole graph is lowered again on every call.

``split`` cuts such a graph in two:

- the *host part*: every op whose inputs are all CPU tensors (or none) and whose result is
  a CPU tensor, run in graph order with PyTorch's CPU kernels;
- the *device graph*: the rest, with one new input per host value it reads. Those values
  are copied to the device before it runs, so it has tpu arguments only and replays.

An optimizer keeps one step count per parameter, all equal unless some parameters skipped
steps, and its host part repeats the same scalar math on each. Where CPU scalar arguments
were equal when the graph was split, the host part also gets a *shared* version that
computes that math once per class of equal arguments (common subexpressions over the
class's representative); each call checks the classes still hold and runs the shared
version, or else the full one.

Copies into CPU inputs (the functionalized ``step += 1``) run after the device graph, where
the original graph had them: the device graph reads the values from before them. A graph
that writes a CPU tensor from device values, or whose nodes carry no fake-tensor metadata
(one loaded from AOTAutograd's cache), is not split.

>>> split(gm, args)  # doctest: +SKIP
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node
from torch.fx.node import map_arg

_COPY = torch.ops.aten.copy_.default


def _tensors(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return [value] if isinstance(value, torch.Tensor) else []


def _on_cpu(value: Any) -> bool:
    tensors = _tensors(value)
    return bool(tensors) and all(t.device.type == "cpu" for t in tensors)


def _on_tpu(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "tpu"


def _upload(values: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """`values` copied to `device`: the scalars of each dtype in one transfer (an
    optimizer has two per parameter), as views of one tensor."""
    copies: list[torch.Tensor | None] = [None] * len(values)
    scalars: dict[torch.dtype, list[int]] = {}
    for i, value in enumerate(values):
        if value.dim() == 0:
            scalars.setdefault(value.dtype, []).append(i)
        else:
            copies[i] = value.to(device)
    for indices in scalars.values():
        stacked = torch.stack([values[i] for i in indices]).to(device)
        for i, view in zip(indices, stacked.unbind(0)):
            copies[i] = view
    return copies  # type: ignore[return-value]


def _read_later(node: Node, copies: list[Node], outputs: list[Any]) -> bool:
    """Whether a host op's value is read after the host part: by a copy, or as an output."""
    return any(u in copies for u in node.users) or ("host", node) in outputs


def _mutates(node: Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.is_mutable


def _scalar_key(value: Any) -> Any:
    """What makes two 0-d CPU tensors interchangeable in the host part: dtype and value,
    with the sign of a zero; None for anything else, and for NaN (which equals nothing)."""
    if not isinstance(value, torch.Tensor) or value.dim() != 0 or value.is_complex():
        return None
    item = value.item()
    if item != item:
        return None
    sign = math.copysign(1.0, item) if isinstance(item, float) else 0.0
    return (value.dtype, item, sign)


def _equal_classes(placeholders: list[Node], args: Sequence[Any], host_args: set[Node]):
    """Indices of the CPU scalar arguments, grouped by equal value (groups of two or more)."""
    groups: dict[Any, list[int]] = {}
    for i, (node, arg) in enumerate(zip(placeholders, args)):
        key = _scalar_key(arg) if node in host_args else None
        if key is not None:
            groups.setdefault(key, []).append(i)
    return [members for members in groups.values() if len(members) > 1]


def _hashable(value: Any, rename: Callable[[Node], Node]) -> Any:
    """`value` (a node argument) with nodes renamed, as a hashable key; raises TypeError
    where it cannot be hashed."""
    if isinstance(value, Node):
        return ("node", rename(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_hashable(v, rename) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _hashable(v, rename)) for k, v in value.items())))
    if isinstance(value, float):
        return ("float", value.hex())  # 0.0 and -0.0 differ
    hash(value)
    return (type(value).__name__, value)


def _is_foreach(node: Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.name.startswith("aten::_foreach_")


def _one_lane(args: Any, rename: Callable[[Node], Node]) -> Any:
    """A foreach op's arguments with each list cut to its first element, where every list
    holds one value throughout (after renaming) and every other argument is a scalar or a
    0-d tensor (a 1-D ``scalars`` tensor holds one value per lane); None otherwise."""
    collapsed = []
    for arg in args:
        if isinstance(arg, (list, tuple)) and len(arg) > 1:
            try:
                keys = {_hashable(a, rename) for a in arg}
            except TypeError:
                return None
            if len(keys) != 1:
                return None
            arg = [arg[0]]
        elif isinstance(arg, Node):
            val = arg.meta.get("val")
            if not isinstance(val, torch.Tensor) or val.dim() != 0:
                return None
        collapsed.append(arg)
    return collapsed


def _shareable(node: Node) -> bool:
    """Whether two calls of `node`'s op on the same inputs give the same result (not a
    random op, nor one with side effects)."""
    tags = getattr(node.target, "tags", ())
    return not node.is_impure() and torch.Tag.nondeterministic_seeded not in tags


def _shared_host_part(
    root: GraphModule,
    placeholders: list[Node],
    classes: list[list[int]],
    host_ops: list[Node],
    wanted: list[Node],
    distinct: set[Node],
) -> GraphModule:
    """The host part with each class of equal arguments read through its first member,
    identical ops on the same inputs computed once, and a foreach op whose lists repeat
    one value run on one element (an optimizer's step counts: one lane instead of one per
    parameter). Nodes in `distinct` (returned to the caller) get results of their own."""
    graph = Graph()
    env: dict[Node, Node] = {n: graph.placeholder(n.name) for n in placeholders}
    for members in classes:
        for i in members[1:]:
            env[placeholders[i]] = env[placeholders[members[0]]]
    seen: dict[Any, Node] = {}
    one_lane: dict[Node, Node] = {}  # a collapsed foreach op -> its only result

    def rename(node: Node) -> Node:
        return env[node]

    reused: set[Node] = set()  # results standing for more than one node of the original
    for node in host_ops:
        if node.target is operator.getitem and node.args[0] in one_lane:
            env[node] = one_lane[node.args[0]]
            reused.add(env[node])
        elif (
            _is_foreach(node)
            and not node.kwargs
            and _shareable(node)
            and (args := _one_lane(node.args, rename)) is not None
        ):
            collapsed = graph.call_function(node.target, tuple(map_arg(args, rename)))
            one_lane[node] = graph.call_function(operator.getitem, (collapsed, 0))
            env[node] = collapsed  # read directly only by getitems, which one_lane serves
            continue
        else:
            try:
                key = (node.target, _hashable((node.args, node.kwargs), rename))
            except TypeError:
                key = None
            if not _shareable(node):
                key = None
            if key is not None and key in seen:
                env[node] = seen[key]
                reused.add(env[node])
            else:
                env[node] = graph.node_copy(node, rename)
                if key is not None:
                    seen[key] = env[node]
        returned_tensor = isinstance(node.meta.get("val"), torch.Tensor)
        if node in distinct and env[node] in reused and returned_tensor:
            env[node] = graph.call_function(torch.ops.aten.clone.default, (env[node],))
    graph.output(tuple(env[n] for n in wanted))
    graph.eliminate_dead_code()
    return GraphModule(root, graph)


# How often the shared host part ran, and how often a class of equal arguments did not hold.
stats = {"shared": 0, "full": 0}


class HostSplit:
    """A graph cut into its host part and its device graph (see the module docstring)."""

    def __init__(
        self,
        root: GraphModule,
        placeholders: list[Node],
        host_args: set[Node],
        host_ops: list[Node],
        copies: list[Node],
        uploads: list[Node],
        device_graph: GraphModule,
        outputs: list[Any],
        args: Sequence[Any],
    ) -> None:
        self._placeholders = placeholders
        # Which arguments are CPU tensors (Dynamo guards each argument's device).
        self._on_host = [n in host_args for n in placeholders]
        self._copies = copies
        self._uploads = uploads
        self.device_graph = device_graph
        # Per output of the original graph: ("device", i), ("host", node) or ("constant", v).
        self._outputs = outputs
        # The host part as generated Python code (an optimizer's is a few hundred scalar
        # ops and getitems a step: interpreting them node by node cost as much again).
        wanted = [n for n in host_ops if n in uploads or _read_later(n, copies, outputs)]
        self._host_results = wanted
        host = Graph()
        env: dict[Node, Node] = {n: host.placeholder(n.name) for n in placeholders}
        for node in host_ops:
            env[node] = host.node_copy(node, env.__getitem__)
        host.output(tuple(env[n] for n in wanted))
        self._host_part = GraphModule(root, host)
        self._classes = _equal_classes(placeholders, args, host_args)
        self._shared_part = None
        if self._classes:
            returned = {where for kind, where in outputs if kind == "host"}
            try:
                self._shared_part = _shared_host_part(
                    root, placeholders, self._classes, host_ops, wanted, returned
                )
            except Exception:  # an unforeseen graph shape: the full host part serves
                self._shared_part = None

    def _classes_hold(self, args: Sequence[Any]) -> bool:
        for members in self._classes:
            first = _scalar_key(args[members[0]])
            if first is None:
                return False
            if any(_scalar_key(args[i]) != first for i in members[1:]):
                return False
        return True

    def run(self, args: Sequence[Any], run_device: Callable[[list[Any]], Any]) -> list[Any]:
        """The original graph's outputs for `args`: the host part here, the device graph
        through `run_device` (called with the arguments and the copied host values)."""
        env: dict[Node, Any] = dict(zip(self._placeholders, args))
        if self._shared_part is not None and self._classes_hold(args):
            stats["shared"] += 1
            env.update(zip(self._host_results, self._shared_part(*args)))
        else:
            stats["full"] += 1
            env.update(zip(self._host_results, self._host_part(*args)))

        def evaluate(node: Node) -> Any:
            call_args, call_kwargs = map_arg((node.args, node.kwargs), env.__getitem__)
            return node.target(*call_args, **call_kwargs)

        device = next(a.device for a in args if _on_tpu(a))
        uploaded = _upload([env[node] for node in self._uploads], device)
        # The device graph reads no CPU argument itself (None keeps it out of the replay's
        # signature); it reads the copies of the host values it needs.
        device_args = [None if cpu else a for a, cpu in zip(args, self._on_host)]
        device_outputs = run_device([*device_args, *uploaded])
        for node in self._copies:
            env[node] = evaluate(node)
        outputs = []
        for kind, where in self._outputs:
            if kind == "device":
                outputs.append(device_outputs[where])
            elif kind == "host":
                outputs.append(env[where])
            else:
                outputs.append(where)
        return outputs


def split(gm: GraphModule, args: Sequence[Any]) -> HostSplit | None:
    """`gm` cut into a host part and a device graph for arguments like `args`, or None
    where there is nothing to cut (no CPU tensor argument) or it cannot be cut safely."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        return None
    host: set[Node] = {n for n, a in zip(placeholders, args) if _on_cpu(a)}
    host_args = set(host)
    if not host or not any(_on_tpu(a) for a in args):
        return None
    host_ops: list[Node] = []
    copies: list[Node] = []
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op != "call_function" or "val" not in node.meta:
            if node.op == "call_function":
                return None  # no fake-tensor metadata: whether it runs on the CPU is unknown
            continue
        val = node.meta["val"]
        if all(i in host for i in node.all_input_nodes) and _on_cpu(val):
            if node.target is _COPY and node.args[0] in placeholders:
                copies.append(node)
            elif _mutates(node) or any(i in copies for i in node.all_input_nodes):
                return None  # a host op after a copy reads its result: keep the original order
            else:
                host_ops.append(node)
            host.add(node)
        elif any(t.device.type == "cpu" for t in _tensors(val)):
            return None  # device values written to, or read into, a CPU tensor
    if any(u not in host and u.op != "output" for c in copies for u in c.users):
        return None  # a copy's result read on the device: keep the original order

    device = Graph()
    env: dict[Node, Node] = {}
    for node in placeholders:
        env[node] = device.placeholder(node.name)
        env[node].meta = dict(node.meta)
    uploads = [
        n
        for n in graph.nodes
        if n in host
        and n not in copies
        and any(u not in host and u.op != "output" for u in n.users)
    ]
    for node in uploads:
        env[node] = device.placeholder(f"host_{node.name}")
    for node in graph.nodes:
        if node.op in ("placeholder", "output") or node in host:
            continue
        env[node] = device.node_copy(node, env.__getitem__)
    (returned,) = [n for n in graph.nodes if n.op == "output"][0].args
    outputs: list[Any] = []
    device_results: list[Node] = []
    for value in returned:
        if isinstance(value, Node) and value not in host:
            outputs.append(("device", len(device_results)))
            device_results.append(env[value])
        elif isinstance(value, Node):
            outputs.append(("host", value))
        else:
            outputs.append(("constant", value))
    device.output(tuple(device_results))
    return HostSplit(
        gm,
        placeholders,
        host_args,
        host_ops,
        copies,
        uploads,
        GraphModule(gm, device),
        outputs,
        args,
    )
