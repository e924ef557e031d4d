"""Runs a graph traced with symbolic sizes at its bucket sizes, padded and masked, so
that every size in a bucket reuses one program.

Why padding with masks, not StableHLO's bounded dynamism: a bounded ``tensor<?x..>``
needs every lowering to carry dynamic dimensions (760 of them build static shapes), and
the PJRT C API has no way to create an input buffer with a dynamic dimension, so the
bounds would end at the program's edge anyway. Padding needs no lowering changes: the
graph runs unchanged at the padded sizes, and only the operations that read across a
padded dimension are guarded. Which those are is decided here, per ATen operator:

- the padded part of a tensor holds anything (zeros, garbage, NaN): elementwise ops,
  views, norms over static dimensions and everything else per element never mix it
  into a real element;
- reductions (sum, mean, max, argmax, ...) and contractions (mm, bmm) over a padded
  dimension read their operands through a mask that puts the reduction's identity in
  the padding (both operands of a product: 0 * NaN is NaN); a mean divides by the
  real count; softmax masks with -inf;
- indices read from padding (embedding, nll_loss targets) are replaced by a harmless
  one (0, or ``ignore_index`` so the loss's count stays right);
- causal attention over a padded sequence is safe as it is (a real query never sees a
  later, padded key); its backward masks the padded queries' gradients;
- an operator not known to be safe over a padded dimension (sort, cumsum, random draws,
  a non-causal attention, indexing into a padded dimension...) makes the whole graph
  run at its exact sizes, as without buckets, and says why
  (``TORCH_TPU_LOG_RECOMPILES=1``).

The real sizes enter the program as 0-d tensors (runtime operands, like a learning
rate), never as constants, so one program serves its bucket. A dimension may merge
several sizes (a ``view(batch * seq, width)``): its layout is the list of factors it
was built from, row-major, which is how its padding is located.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.fx

aten = torch.ops.aten

Factor = Any  # an int, or a sympy.Symbol
Dim = tuple  # the factors of one dimension, outermost first
Layout = tuple  # one Dim per dimension


class Unsupported(Exception):
    """The graph cannot run padded; the message says which operator and why."""


def _expr(size: Any) -> sympy.Expr:
    if isinstance(size, torch.SymInt):
        return sympy.sympify(size.node.expr)
    return sympy.Integer(int(size))


def _shape(node: torch.fx.Node) -> list[sympy.Expr] | None:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return [_expr(s) for s in val.shape]
    return None


def _dim_of(expr: sympy.Expr) -> Dim:
    """The layout of a dimension known only by its size: a whole number, or one
    symbol plus a constant (``s``, ``s - 1``: trailing padding either way)."""
    if expr.is_Integer:
        return (int(expr),)
    symbols = expr.free_symbols
    if len(symbols) == 1 and sympy.simplify(expr - next(iter(symbols))).is_Integer:
        return (expr,)
    # A sum of sizes (a cache grown along a padded dimension, s0 + s1): its parts were
    # moved together, so its padding trails too.
    terms = sympy.Add.make_args(sympy.expand(expr))
    if all(t.is_Symbol or (t.is_Integer and t > 0) for t in terms):
        return (expr,)
    raise Unsupported(f"a dimension of size {expr} whose factors' order is unknown")


def _is_dynamic(dim: Dim) -> bool:
    return any(not isinstance(f, int) for f in dim)


def _product(dim: Sequence[Factor]) -> sympy.Expr:
    out = sympy.Integer(1)
    for f in dim:
        out = out * f
    return out


def _regroup(layout: Layout, out_shape: list[sympy.Expr], what: str) -> Layout:
    """A view's layout: the input's factors, row-major, grouped into the new sizes
    (static factors split where needed; a symbolic size is never split)."""
    flat = [f for dim in layout for f in dim if f != 1]
    out: list[Dim] = []
    i = 0
    for expr in out_shape:
        if expr == 1:
            out.append((1,))
            continue
        taken: list[Factor] = []
        prod = sympy.Integer(1)
        while sympy.simplify(prod - expr) != 0:
            if i >= len(flat):
                raise Unsupported(f"{what}: cannot regroup a padded dimension into {out_shape}")
            f = flat[i]
            need = sympy.simplify(expr / prod)
            if isinstance(f, int) and need.is_Integer and int(need) < f:
                if f % int(need):
                    raise Unsupported(f"{what}: splits a dimension across a padded one")
                taken.append(int(need))
                flat[i] = f // int(need)
                prod = prod * need
                continue
            taken.append(f)
            prod = prod * f
            i += 1
        out.append(tuple(taken))
    if any(f != 1 for f in flat[i:]):
        raise Unsupported(f"{what}: cannot regroup a padded dimension into {out_shape}")
    return tuple(out)


def _broadcast(layouts: Sequence[Layout], out_shape: list[sympy.Expr], what: str) -> Layout:
    rank = len(out_shape)
    out = []
    for d in range(rank):
        chosen: Dim | None = None
        for layout in layouts:
            k = d - (rank - len(layout))
            if k < 0 or layout[k] == (1,):
                continue
            if chosen is None:
                chosen = layout[k]
            elif chosen != layout[k]:
                if _is_dynamic(chosen) or _is_dynamic(layout[k]):
                    raise Unsupported(f"{what}: operands padded differently in dimension {d}")
        out.append(chosen if chosen is not None else _dim_of(out_shape[d]))
    return tuple(out)


@dataclass
class Mask:
    """Before the call: argument `arg` is read with `fill` in the padding of `dims`."""

    arg: int
    dims: tuple[int, ...]
    fill: Any
    element: int | None = None  # the argument is a list: mask its element


@dataclass
class NodePlan:
    masks: list[Mask] = field(default_factory=list)
    # After the call: divide output 0 by the real element count of these input dims.
    mean_of: tuple[int, ...] | None = None
    # Symbolic arguments read as values (argument index -> expression).
    values: dict[int, sympy.Expr] = field(default_factory=dict)
    # A select (or, keep=True, a slice to the end) counted from the end of a padded
    # dimension: (dim, index, its size, keep).
    select_from_end: tuple | None = None
    # An attention mask over padded keys: (its argument, the queries' and the keys'
    # padded dimension); real queries are kept from padded keys, padded queries see the
    # first key only (a row of no keys would be NaN, and NaN reaches the keys' gradients).
    attention_mask: tuple | None = None
    # A static dimension cut to a dynamic length: (dim, its size), padded to the bucket.
    grow: tuple | None = None
    # constant_pad_nd at the end of padded dimensions: (dim, its real size, width, value)
    # each; the padded result holds the value after the padding, not after the real end.
    pad_after: list = field(default_factory=list)
    # aten.index into padded dimensions of the table: (index's position, the dimension's
    # real size) each; negative indices count from the real end, not the padded one.
    wrap_negative: list = field(default_factory=list)
    # cat along a padded dimension: (part's position in the list, dim, its real offset)
    # for each part after a padded one, copied to its real offset after the call.
    cat_at: list = field(default_factory=list)
    # arange(start, start + n) with a symbolic start: the start, read at run time.
    arange_from: sympy.Expr | None = None


@dataclass
class Plan:
    """How one graph runs padded: the layout of every tensor, the masks per node, the
    symbols and where their real values come from."""

    layouts: dict[str, Any]
    nodes: dict[str, NodePlan]
    symbols: list[sympy.Symbol]
    # symbol -> (placeholder index, dim or None for a SymInt placeholder)
    sources: dict[sympy.Symbol, tuple[int, int | None]]
    # symbol -> what the user calls it (Dynamo's source, "L['x'].size()[1]")
    names: dict[sympy.Symbol, str] = field(default_factory=dict)
    # Integers passed as values, no tensor's size (a decoding position): never padded.
    # Those read only at run time (arange's start, a Scalar operand) get a fixed padded
    # value, so one program serves them all; the rest run at their real value.
    free_values: frozenset = frozenset()
    exact_values: frozenset = frozenset()

    def padded_sizes(self, real: dict, bucket: Callable[[int], int]) -> dict:
        """Each symbol's value in the program: its bucket, for a size."""
        out = {}
        for symbol, value in real.items():
            if symbol in self.free_values:
                out[symbol] = 0
            elif symbol in self.exact_values:
                out[symbol] = value
            else:
                out[symbol] = bucket(value)
        return out


def _op_name(target: Any) -> str:
    return str(getattr(target, "_name", target))


_VIEWS = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.view_copy.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.unsqueeze.default,
    aten.alias.default,
    aten.detach.default,
    aten.clone.default,
    aten._to_copy.default,
    aten.lift_fresh_copy.default,
    aten.contiguous.default,
}
_PERMUTES = {aten.permute.default, aten.transpose.int, aten.t.default}
_SUMS = {aten.sum.dim_IntList, aten.sum.default, aten.mean.dim, aten.mean.default}
_EXTREMA = {
    aten.amax.default: float("-inf"),
    aten.amin.default: float("inf"),
    aten.argmax.default: float("-inf"),
    aten.argmin.default: float("inf"),
    # all and any are the minimum and maximum of booleans. PyTorch's math attention (run
    # for grouped-query heads, which the device's fused kernel does not take) asks
    # whether a row of scores is all -inf.
    aten.all.default: True,
    aten.all.dim: True,
    aten.all.dims: True,
    aten.any.default: False,
    aten.any.dim: False,
    aten.any.dims: False,
}
# Lower or upper triangles: which elements they keep depends on positions alone.
_TRIANGLES = {aten.tril.default, aten.triu.default}
_SOFTMAX = {aten._softmax.default, aten._log_softmax.default}
_SOFTMAX_BACKWARD = {aten._softmax_backward_data.default, aten._log_softmax_backward_data.default}
_CREATION = {
    aten.arange.default,
    aten.arange.start,
    aten.arange.start_step,
    aten.full.default,
    aten.zeros.default,
    aten.ones.default,
    aten.empty.memory_format,
    aten.new_zeros.default,
    aten.new_ones.default,
    aten.new_empty.default,
    aten.new_full.default,
    aten.scalar_tensor.default,
    aten.empty_strided.default,
}
_SIZE_QUERIES = {
    aten.sym_size.int,
    aten.sym_numel.default,
    aten.sym_stride.int,
    aten.sym_storage_offset.default,
}
_ATTENTION = {
    aten._scaled_dot_product_fused_attention_overrideable.default: "forward",
    aten._scaled_dot_product_fused_attention_overrideable_backward.default: "backward",
    aten._scaled_dot_product_flash_attention_for_cpu.default: "forward",
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: "backward",
    aten._scaled_dot_product_efficient_attention.default: "forward",
    aten._scaled_dot_product_efficient_attention_backward.default: "backward",
    aten._scaled_dot_product_flash_attention.default: "forward",
    aten._scaled_dot_product_flash_attention_backward.default: "backward",
}


class _Analysis:
    def __init__(self, gm: torch.fx.GraphModule, known: dict[str, Layout] | None = None) -> None:
        self.gm = gm
        self.known = known or {}
        self.layouts: dict[str, Any] = {}
        self.nodes: dict[str, NodePlan] = {}
        self.placeholders_only = False
        # Symbols only ever passed as integers (see Plan.free_values), and those of them
        # some operator takes as an int (an index, a size): kept at their real value.
        self.value_only: set = set()
        self.exact_values: set = set()

    def layout(self, arg: Any) -> Layout | None:
        if isinstance(arg, torch.fx.Node):
            return self.layouts.get(arg.name)
        return None

    def dynamic_dims(self, arg: Any, dims: Sequence[int] | None = None) -> tuple[int, ...]:
        layout = self.layout(arg)
        if layout is None:
            return ()
        dims = range(len(layout)) if dims is None else dims
        return tuple(d % len(layout) for d in dims if _is_dynamic(layout[d % max(len(layout), 1)]))

    def run(self) -> Plan:
        symbols: set[sympy.Symbol] = set()
        # Where each symbol's real value is read, best first: a SymInt argument, then a
        # backward's incoming gradient, then any tensor argument (a backward's saved
        # activations arrive padded, so they come last).
        candidates: dict[sympy.Symbol, list[tuple[int, int, int | None]]] = {}
        index = 0
        for node in self.gm.graph.nodes:
            val = node.meta.get("val")
            if node.op == "placeholder":
                if isinstance(val, torch.SymInt):
                    expr = _expr(val)
                    if expr.is_Symbol:
                        candidates.setdefault(expr, []).append((0, index, None))
                elif isinstance(val, torch.Tensor):
                    shape = _shape(node)
                    if node.name in self.known:  # a forward's saved activation
                        self.layouts[node.name] = self.known[node.name]
                    else:
                        self.layouts[node.name] = tuple(
                            _dim_of(e) if e.free_symbols else (int(e),) for e in shape
                        )
                    rank = 1 if node.name.startswith("tangents") else 2
                    for d, e in enumerate(shape):
                        if e.is_Symbol:
                            candidates.setdefault(e, []).append((rank, index, d))
                index += 1
            elif node.op == "call_function" and not self.placeholders_only:
                if not self.nodes:  # every placeholder seen: which symbols are no size
                    self.value_only = {
                        s for s, c in candidates.items() if all(d is None for _, _, d in c)
                    }
                try:
                    self.call(node)
                except Unsupported as why:
                    raise Unsupported(f"{why}{_where(node)}") from None
            val_shape = _shape(node) or []
            for e in val_shape:
                symbols |= e.free_symbols
            if isinstance(val, (torch.SymInt, torch.SymFloat)):
                symbols |= sympy.sympify(val.node.expr).free_symbols
        missing = symbols - set(candidates)
        if missing:
            raise Unsupported(f"the real value of {sorted(map(str, missing))} is not an input")
        sources = {s: min(c)[1:] for s, c in candidates.items()}
        ordered = sorted(symbols, key=str)
        exact = frozenset(self.exact_values & symbols)
        free = frozenset((self.value_only & symbols) - exact)
        return Plan(self.layouts, self.nodes, ordered, sources, self.names(symbols), free, exact)

    def names(self, symbols: set) -> dict:
        """Each symbol by the user's name for it, from Dynamo's shape environment."""
        shape_env = None
        for node in self.gm.graph.nodes:
            val = node.meta.get("val")
            sizes = [val] if isinstance(val, torch.SymInt) else []
            if isinstance(val, torch.Tensor):
                sizes = [s for s in val.shape if isinstance(s, torch.SymInt)]
            if sizes:
                shape_env = sizes[0].node.shape_env
                break
        known = getattr(shape_env, "var_to_sources", {}) if shape_env is not None else {}
        names = {}
        for symbol in symbols:
            sources = known.get(symbol) or []
            name = sources[0].name if sources else str(symbol)
            names[symbol] = name() if callable(name) else str(name)
        return names

    def call(self, node: torch.fx.Node) -> None:
        target = node.target
        name = _op_name(target)
        plan = NodePlan()
        self.nodes[node.name] = plan
        if target is operator.getitem:
            source = self.layouts.get(node.args[0].name)
            if isinstance(source, list):
                self.layouts[node.name] = source[node.args[1]]
            return
        tensors = [a for a in _flat_args(node) if self.layout(a) is not None]
        if not isinstance(target, torch._ops.OpOverload):
            # Arithmetic on sizes (operator.mul, sym_size) runs on the padded sizes; a
            # call of anything else with tensors (a higher-order op) is not known.
            if tensors or isinstance(node.meta.get("val"), torch.Tensor):
                raise Unsupported(f"{name}, not an ATen operator")
            return
        if target in _SIZE_QUERIES:
            return  # a size of a padded tensor is the padded size: a size, not a value
        self.value_uses(node, plan)
        dynamic_in = any(self.dynamic_dims(a) for a in tensors)
        out_shapes = self.out_shapes(node)
        dynamic_out = any(e.free_symbols for shape in out_shapes for e in shape)
        if not dynamic_in and not dynamic_out:
            self.set_out(node, [tuple((int(e),) for e in s) for s in out_shapes])
            return
        rule = self.rule_for(target)
        if rule is None:
            raise Unsupported(f"{name} over a padded dimension")
        rule(node, plan, out_shapes, name)

    def out_shapes(self, node: torch.fx.Node) -> list[list[sympy.Expr]]:
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        return [[_expr(s) for s in v.shape] if isinstance(v, torch.Tensor) else [] for v in vals]

    def set_out(self, node: torch.fx.Node, layouts: list[Layout]) -> None:
        val = node.meta.get("val")
        if isinstance(val, (list, tuple)):
            self.layouts[node.name] = list(layouts)
        else:
            self.layouts[node.name] = layouts[0]

    def value_uses(self, node: torch.fx.Node, plan: NodePlan) -> None:
        """Symbolic sizes passed where the schema takes a value (a Scalar, a Tensor)
        are read as their real value, a 0-d tensor in the program; sizes passed as sizes
        (int, int[], arange's bounds) are padded."""
        arange = node.target in (aten.arange.default, aten.arange.start, aten.arange.start_step)
        for shape in self.out_shapes(node):
            for e in shape:
                self.exact_values |= e.free_symbols & self.value_only
        if not arange:
            for arg in _flat_args(node):
                val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
                if isinstance(val, torch.SymInt):
                    # An integer value read as an index or a size: its real value.
                    self.exact_values |= _expr(val).free_symbols & self.value_only
        else:
            start = node.args[0] if node.target is not aten.arange.default else 0
            val = start.meta.get("val") if isinstance(start, torch.fx.Node) else None
            if isinstance(val, torch.SymInt) and _expr(val).free_symbols:
                # Positions from a symbolic start: counted from its real value, so a
                # padded start (or a free value's placeholder) never shifts them.
                step = node.args[2] if len(node.args) > 2 else node.kwargs.get("step", 1)
                if step != 1:
                    raise Unsupported(f"{_op_name(node.target)} from a symbolic start in steps")
                plan.arange_from = _expr(val)
            return
        schema = node.target._schema.arguments
        for i, arg in enumerate(node.args):
            if not isinstance(arg, torch.fx.Node) or i >= len(schema):
                continue
            val = arg.meta.get("val")
            if isinstance(val, (torch.SymInt, torch.SymFloat)):
                kind = str(schema[i].type)
                if "int" in kind:
                    continue
                expr = sympy.sympify(val.node.expr)
                if not expr.free_symbols:
                    continue
                if kind != "Tensor" and not (
                    kind == "number" and "Scalar" in node.target._overloadname
                ):
                    raise Unsupported(f"{_op_name(node.target)} takes a size as a value")
                plan.values[i] = expr
        for value in node.kwargs.values():
            val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
            if isinstance(val, (torch.SymInt, torch.SymFloat)):
                raise Unsupported(f"{_op_name(node.target)} takes a size as a keyword value")

    def rule_for(self, target: Any) -> Callable | None:
        name = _RULES.get(target)
        if name is not None:
            return getattr(self, name)
        if torch.Tag.nondeterministic_seeded in target.tags:
            return None  # a random draw at the padded size is not the unpadded draw
        if torch.Tag.pointwise in target.tags:
            return self.pointwise_rule
        return None

    # --- the rules: each sets the output layouts and the node's masks ---------------

    def pointwise_rule(self, node, plan, out_shapes, name):
        layouts = [self.layout(a) for a in node.args if self.layout(a) is not None]
        self.set_out(node, [_broadcast(layouts, out_shapes[0], name)])

    def view_rule(self, node, plan, out_shapes, name):
        source = self.layout(node.args[0])
        if node.target in (aten.unsqueeze.default,):
            dim = node.args[1] % (len(source) + 1)
            self.set_out(node, [source[:dim] + ((1,),) + source[dim:]])
            return
        self.set_out(node, [_regroup(source, out_shapes[0], name)])

    def permute_rule(self, node, plan, out_shapes, name):
        source = list(self.layout(node.args[0]))
        if node.target is aten.permute.default:
            order = [d % len(source) for d in node.args[1]]
        else:
            order = list(range(len(source)))
            a, b = (0, 1) if node.target is aten.t.default else node.args[1:3]
            if len(source) >= 2:
                a, b = a % len(source), b % len(source)
                order[a], order[b] = order[b], order[a]
        self.set_out(node, [tuple(source[d] for d in order)])

    def expand_rule(self, node, plan, out_shapes, name):
        source = self.layout(node.args[0])
        shape = out_shapes[0]
        lead = len(shape) - len(source)
        out = []
        for d, expr in enumerate(shape):
            k = d - lead
            if k >= 0 and source[k] != (1,):
                out.append(source[k])
            else:
                out.append(_dim_of(expr))
        self.set_out(node, [tuple(out)])

    def reduced(self, node, dims_arg, keepdim) -> tuple[Layout, tuple[int, ...]]:
        source = self.layout(node.args[0])
        rank = len(source)
        dims = tuple(range(rank)) if not dims_arg else tuple(d % rank for d in dims_arg)
        if keepdim:
            out = tuple((1,) if d in dims else source[d] for d in range(rank))
        else:
            out = tuple(source[d] for d in range(rank) if d not in dims)
        return out, dims

    def sum_rule(self, node, plan, out_shapes, name):
        args = list(node.args) + [None] * 3
        dims_arg = args[1] if node.target in (aten.sum.dim_IntList, aten.mean.dim) else None
        keepdim = bool(args[2]) if node.target in (aten.sum.dim_IntList, aten.mean.dim) else False
        if isinstance(dims_arg, int):
            dims_arg = [dims_arg]
        keepdim = keepdim or node.kwargs.get("keepdim", False)
        out, dims = self.reduced(node, dims_arg, keepdim)
        padded = self.dynamic_dims(node.args[0], dims)
        if padded:
            plan.masks.append(Mask(0, padded, 0))
            if node.target in (aten.mean.dim, aten.mean.default):
                plan.mean_of = dims
        self.set_out(node, [out])

    def extremum_rule(self, node, plan, out_shapes, name):
        args = list(node.args) + [None, False]
        dims_arg = args[1]
        if isinstance(dims_arg, int):
            dims_arg = [dims_arg]
        out, dims = self.reduced(node, dims_arg, bool(args[2]))
        padded = self.dynamic_dims(node.args[0], dims)
        if padded:
            source = self.layout(node.args[0])
            if node.target in (aten.argmax.default, aten.argmin.default) and (
                dims_arg is None or any(len(source[d]) > 1 for d in padded)
            ):
                raise Unsupported(f"{name}: an index into a merged padded dimension")
            plan.masks.append(Mask(0, padded, _EXTREMA[node.target]))
        self.set_out(node, [out])

    def triangle_rule(self, node, plan, out_shapes, name):
        """tril/triu (the math attention's causal mask): an element is kept or zeroed by
        its row and column alone, and trailing padding moves no real element, so the real
        part is the unpadded triangle. A merged dimension or a symbolic diagonal would
        move the real elements relative to the diagonal."""
        source = self.layout(node.args[0])
        diagonal = node.args[1] if len(node.args) > 1 else node.kwargs.get("diagonal", 0)
        if any(len(dim) > 1 and _is_dynamic(dim) for dim in source[-2:]):
            raise Unsupported(f"{name} over a merged padded dimension")
        if not isinstance(diagonal, int):
            raise Unsupported(f"{name} with a symbolic diagonal")
        self.set_out(node, [source])

    def matmul_rule(self, node, plan, out_shapes, name):
        first = 1 if node.target is aten.addmm.default else 0
        a, b = node.args[first], node.args[first + 1]
        la, lb = self.layout(a), self.layout(b)
        contracted_a, contracted_b = len(la) - 1, len(lb) - 2
        if _is_dynamic(la[contracted_a]) or _is_dynamic(lb[contracted_b]):
            plan.masks.append(Mask(first, (contracted_a,), 0))
            plan.masks.append(Mask(first + 1, (contracted_b,), 0))
        out = la[:-1] + lb[-1:]
        if node.target is aten.addmm.default:
            out = _broadcast([self.layout(node.args[0]) or (), out], out_shapes[0], name)
        self.set_out(node, [out])

    def softmax_rule(self, node, plan, out_shapes, name):
        source = self.layout(node.args[0])
        dim = node.args[1] % len(source)
        if _is_dynamic(source[dim]):
            plan.masks.append(Mask(0, (dim,), float("-inf")))
        self.set_out(node, [source])

    def softmax_backward_rule(self, node, plan, out_shapes, name):
        source = self.layout(node.args[0])
        dim = node.args[2] % len(source)
        if _is_dynamic(source[dim]):
            plan.masks.append(Mask(0, (dim,), 0))
            plan.masks.append(Mask(1, (dim,), 0))
        self.set_out(node, [source])

    def layer_norm_rule(self, node, plan, out_shapes, name):
        source = self.layout(node.args[0])
        normalized = len(node.args[1])
        if any(_is_dynamic(d) for d in source[len(source) - normalized :]):
            raise Unsupported(f"{name} over a padded dimension")
        stats = tuple(source[: len(source) - normalized]) + ((1,),) * normalized
        self.set_out(node, [source, stats, stats])

    def layer_norm_backward_rule(self, node, plan, out_shapes, name):
        grad = self.layout(node.args[0])
        normalized = len(node.args[2])
        lead = tuple(range(len(grad) - normalized))
        if any(_is_dynamic(d) for d in grad[len(grad) - normalized :]):
            raise Unsupported(f"{name} over a padded dimension")
        padded = self.dynamic_dims(node.args[0], lead)
        if padded:
            # The weight's and bias's gradients sum over the rows: padded rows must be
            # zeros in every operand, their statistics too (0 * NaN is NaN).
            for arg in (0, 1, 3, 4):
                plan.masks.append(Mask(arg, padded, 0))
        weight = self.layout(node.args[5]) if len(node.args) > 5 else None
        bias = self.layout(node.args[6]) if len(node.args) > 6 else None
        self.set_out(node, [grad, weight or ((1,),), bias or ((1,),)])

    def embedding_rule(self, node, plan, out_shapes, name):
        weight, indices = self.layout(node.args[0]), self.layout(node.args[1])
        if _is_dynamic(weight[0]):
            raise Unsupported(f"{name}: a padded table")
        padded = self.dynamic_dims(node.args[1])
        if padded:
            plan.masks.append(Mask(1, padded, 0))
        self.set_out(node, [indices + weight[1:]])

    def index_rule(self, node, plan, out_shapes, name):
        """table[i0, i1, ...] with integer index tensors: a gather. Padded positions of an
        index read element 0; an index into a padded dimension of the table reads the
        same element as unpadded, a negative one counted from the real end (wrapped at
        run time with the real size)."""
        table = self.layout(node.args[0])
        indices = list(node.args[1])
        used = [d for d, i in enumerate(indices) if i is not None]
        for d in used:
            index = indices[d]
            if self.layout(index) is None or index.meta["val"].dtype in (torch.bool, torch.uint8):
                raise Unsupported(f"{name} with a boolean mask or a non-tensor index")
            padded = self.dynamic_dims(index)
            if padded:
                plan.masks.append(Mask(1, padded, 0, element=d))
            if _is_dynamic(table[d]):
                if len(table[d]) > 1:
                    raise Unsupported(f"{name} into a merged padded dimension")
                plan.wrap_negative.append((d, table[d][0]))
        rank = max(len(self.layout(indices[d])) for d in used)
        rest = [table[d] for d in range(len(table)) if d not in used]
        # Adjacent indices put their result in place of the first; apart, in front.
        first = used[0] if used == list(range(used[0], used[-1] + 1)) else 0
        shape = out_shapes[0][first : first + rank]
        gathered = _broadcast([self.layout(indices[d]) for d in used], shape, name)
        out = tuple(rest[:first]) + tuple(gathered) + tuple(rest[first:])
        self.set_out(node, [out])

    def embedding_backward_rule(self, node, plan, out_shapes, name):
        indices = self.layout(node.args[1])
        args = list(node.args) + [None] * 5
        padding_idx, by_freq = args[3], bool(args[4])
        padded = self.dynamic_dims(node.args[1])
        if padded:
            if by_freq:
                raise Unsupported(f"{name} with scale_grad_by_freq")
            fill = padding_idx if isinstance(padding_idx, int) and padding_idx >= 0 else 0
            plan.masks.append(Mask(1, padded, fill))
            plan.masks.append(Mask(0, padded, 0))
        del indices
        self.set_out(node, [tuple(_dim_of(e) for e in out_shapes[0])])

    def nll_loss_rule(self, node, plan, out_shapes, name):
        backward = node.target is aten.nll_loss_backward.default
        first = 1 if backward else 0
        logits, target = node.args[first], node.args[first + 1]
        reduction = node.args[first + 3]
        ignore_index = node.args[first + 4]
        padded = self.dynamic_dims(target)
        if padded:
            plan.masks.append(Mask(first + 1, padded, ignore_index))
            plan.masks.append(Mask(first, padded, 0))
            if backward and reduction == 0:
                plan.masks.append(Mask(0, padded, 0))
        if backward:
            self.set_out(node, [self.layout(logits)])
        elif reduction == 0:
            self.set_out(node, [self.layout(target), ()])
        else:
            self.set_out(node, [(), ()])

    def attention_rule(self, node, plan, out_shapes, name):
        kind = _ATTENTION[node.target]
        offset = 1 if kind == "backward" else 0  # the backward takes grad_out first
        q, k, v = (self.layout(node.args[offset + i]) for i in range(3))
        schema = node.target._schema.arguments
        values = dict(zip((a.name for a in schema), node.args))
        values.update(node.kwargs)
        causal = bool(values.get("is_causal", False))
        names = [a.name for a in schema]
        mask_name = "attn_mask" if "attn_mask" in names else "attn_bias"
        mask = values.get(mask_name)
        if _is_dynamic(k[2]) or _is_dynamic(v[2]):
            if mask is not None or (not causal and mask_name in names):
                # The mask gets the keys' padding added, or (no mask: a decoded token over
                # its cache) is made of it: see PaddedInterpreter.attention_mask.
                if mask is not None and mask_name not in names[: len(node.args)]:
                    raise Unsupported(f"{name}: a mask passed by keyword")
                if kind == "backward" and list(values.get("grad_input_mask") or [])[3:4] == [True]:
                    raise Unsupported(f"{name}: the gradient of a mask over padded keys")
                plan.attention_mask = (names.index(mask_name), q[2], k[2])
            elif not causal or q[2] != k[2]:
                raise Unsupported(f"{name}: a non-causal attention over padded keys")
        if values.get("dropout_p", 0.0):
            raise Unsupported(f"{name} with dropout")
        padded = tuple(d for d in range(len(q)) if _is_dynamic(q[d]))
        if padded and kind == "backward":
            # The keys' and values' gradients sum over the queries: padded queries'
            # output gradients must be zeros. (A real query never weighs a padded key,
            # causal; a padded query's own rows never reach a real one.)
            plan.masks.append(Mask(0, padded, 0))
        layouts = []
        for shape in out_shapes:
            if len(shape) == len(q):
                layouts.append(
                    q if shape[-1] == _product(q[-1]) else q[:-1] + (_dim_of(shape[-1]),)
                )
            elif len(shape) == len(q) - 1:
                layouts.append(q[:-1])
            else:
                layouts.append(tuple(_dim_of(e) for e in shape))
        if kind == "backward":
            layouts = [q, k, v] + layouts[3:]
        self.set_out(node, layouts)

    def creation_rule(self, node, plan, out_shapes, name):
        self.set_out(node, [tuple(_dim_of(e) for e in out_shapes[0])])

    def split_rule(self, node, plan, out_shapes, name):
        source = self.layout(node.args[0])
        dim = (
            (node.args[2] if len(node.args) > 2 else 0)
            if node.target is not aten.unbind.int
            else (node.args[1] if len(node.args) > 1 else 0)
        )
        dim %= len(source)
        if _is_dynamic(source[dim]):
            raise Unsupported(f"{name} along a padded dimension")
        outs = []
        for shape in out_shapes:
            if node.target is aten.unbind.int:
                outs.append(source[:dim] + source[dim + 1 :])
            else:
                outs.append(source[:dim] + ((int(shape[dim]),),) + source[dim + 1 :])
        self.set_out(node, outs)

    def slice_scatter_rule(self, node, plan, out_shapes, name):
        """The backward of a slice: `src` written into `input[start:end]`; over a padded
        dimension only from a static start to the end (trailing padding stays trailing)."""
        source = self.layout(node.args[0])
        args = list(node.args) + [None] * 6
        dim = (args[2] or 0) % len(source)
        start, end, step = args[3] or 0, args[4], args[5] or 1
        if _is_dynamic(source[dim]):
            size = _shape(node.args[0])[dim]
            to_the_end = (
                end is None
                or (isinstance(end, int) and end >= 2**62)
                or (
                    isinstance(end, torch.fx.Node)
                    and sympy.simplify(_expr(end.meta["val"]) - size) == 0
                )
            )
            if not isinstance(start, int) or start < 0 or step != 1 or not to_the_end:
                raise Unsupported(f"{name}: a part of a padded dimension other than its tail")
            if len(source[dim]) > 1:
                raise Unsupported(f"{name}: a part of a merged padded dimension")
        self.set_out(node, [source])

    def pad_rule(self, node, plan, out_shapes, name):
        """F.pad(x, (0, k), value): appending to a padded dimension (a loss shifting its
        labels) moves the appended values to the real end at run time."""
        source = self.layout(node.args[0])
        widths = list(node.args[1])
        value = node.args[2] if len(node.args) > 2 else 0
        out = list(source)
        for i in range(0, len(widths), 2):
            dim = len(source) - 1 - i // 2
            before, after = widths[i], widths[i + 1]
            if not _is_dynamic(source[dim]):
                out[dim] = _dim_of(out_shapes[0][dim])
                continue
            if not isinstance(before, int) or not isinstance(after, int):
                raise Unsupported(f"{name}: a symbolic width on a padded dimension")
            if before != 0 or after < 0 or len(source[dim]) > 1:
                raise Unsupported(f"{name}: widths other than appending to a padded dimension")
            if not isinstance(value, (int, float, bool)):
                raise Unsupported(f"{name}: a symbolic value")
            out[dim] = _dim_of(out_shapes[0][dim])
            if after:
                plan.pad_after.append((dim, source[dim][0], after, value))
        self.set_out(node, [tuple(out)])

    def cat_rule(self, node, plan, out_shapes, name):
        items = list(node.args[0])
        dim = node.args[1] if len(node.args) > 1 else 0
        rank = len(out_shapes[0])
        dim %= rank
        # Legacy 1-d empty tensors join anything and add nothing.
        joined = [(i, t) for i, t in enumerate(items) if len(self.layout(t) or ()) == rank]
        layouts = [self.layout(t) for _, t in joined]
        filled = [(i, t) for i, t in joined if self.layout(t)[dim] != (0,)]
        if len(filled) == 1:  # joining an empty tensor (a cache's first update)
            self.set_out(node, [self.layout(filled[0][1])])
            return
        others = [tuple((1,) if d == dim else layout[d] for d in range(rank)) for layout in layouts]
        out = list(_broadcast(others, out_shapes[0], name))
        if any(_is_dynamic(layout[dim]) for layout in layouts):
            # A key/value cache growing along a padded dimension: each part after a
            # padded one is moved to its real offset at run time (trailing padding).
            offset = sympy.Integer(0)
            for i, t in filled:
                if len(self.layout(t)[dim]) > 1:
                    raise Unsupported(f"{name} along a merged padded dimension")
                if offset.free_symbols:
                    plan.cat_at.append((i, dim, offset))
                offset = offset + _shape(t)[dim]
            out[dim] = _dim_of(out_shapes[0][dim])
        else:
            out[dim] = (int(out_shapes[0][dim]),)
        self.set_out(node, [tuple(out)])

    def slice_rule(self, node, plan, out_shapes, name):
        source = self.layout(node.args[0])
        dim = node.args[1] % len(source)
        if not _is_dynamic(source[dim]):
            if node.target is aten.select.int:
                self.set_out(node, [source[:dim] + source[dim + 1 :]])
                return
            cut = _dim_of(out_shapes[0][dim])
            if _is_dynamic(cut):
                # A static dimension cut to a dynamic length (table[:seq]): at a bucket
                # past the table's end the cut stops short; it is padded up to the bucket.
                plan.grow = (dim, cut[0])
            self.set_out(node, [source[:dim] + (cut,) + source[dim + 1 :]])
            return
        if len(source[dim]) > 1:
            raise Unsupported(f"{name}: a part of a merged padded dimension")
        if node.target is aten.select.int:
            index = node.args[2]
            if not isinstance(index, int):
                raise Unsupported(f"{name}: a symbolic index into a padded dimension")
            if index < 0:
                plan.select_from_end = (dim, index, source[dim][0], False)
            self.set_out(node, [source[:dim] + source[dim + 1 :]])
            return
        args = list(node.args) + [None] * 5
        start, end, step = args[2] or 0, args[3], args[4] or 1
        to_the_end = end is None or (isinstance(end, int) and end >= 2**62)
        width = out_shapes[0][dim]
        if isinstance(start, int) and start < 0 and to_the_end and step == 1 and width == -start:
            # x[:, -k:] (the logits of the last k positions): the real last k.
            plan.select_from_end = (dim, start, source[dim][0], True)
            self.set_out(node, [source[:dim] + ((-start,),) + source[dim + 1 :]])
            return
        if not isinstance(start, int) or start < 0 or step != 1:
            # Counted from the end, or strided: the padding would move into the result.
            raise Unsupported(f"{name}: a part of a padded dimension counted from its end")
        self.set_out(node, [source[:dim] + (_dim_of(out_shapes[0][dim]),) + source[dim + 1 :]])


def _where(node: torch.fx.Node) -> str:
    """ " (at file:line: code)" for the user's line that made `node`, where known."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            place = lines[i][5:].replace('"', "").split(", in ")[0]
            code = lines[i + 1] if i + 1 < len(lines) else ""
            return f" (at {place}: {code})"
    return ""


# Which rule of _Analysis plans each operator; a pointwise operator not listed takes
# pointwise_rule, any other runs the graph at exact sizes.
_RULES: dict[Any, str] = {
    **dict.fromkeys(_VIEWS, "view_rule"),
    **dict.fromkeys(_PERMUTES, "permute_rule"),
    aten.expand.default: "expand_rule",
    **dict.fromkeys(_SUMS, "sum_rule"),
    **dict.fromkeys(_EXTREMA, "extremum_rule"),
    **dict.fromkeys(_TRIANGLES, "triangle_rule"),
    **dict.fromkeys((aten.mm.default, aten.bmm.default, aten.addmm.default), "matmul_rule"),
    **dict.fromkeys(_SOFTMAX, "softmax_rule"),
    **dict.fromkeys(_SOFTMAX_BACKWARD, "softmax_backward_rule"),
    aten.native_layer_norm.default: "layer_norm_rule",
    aten.native_layer_norm_backward.default: "layer_norm_backward_rule",
    aten.embedding.default: "embedding_rule",
    aten.index.Tensor: "index_rule",
    aten.embedding_dense_backward.default: "embedding_backward_rule",
    aten.nll_loss_forward.default: "nll_loss_rule",
    aten.nll_loss_backward.default: "nll_loss_rule",
    **dict.fromkeys(_ATTENTION, "attention_rule"),
    **dict.fromkeys(_CREATION, "creation_rule"),
    **dict.fromkeys(
        (aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int), "split_rule"
    ),
    aten.cat.default: "cat_rule",
    aten.constant_pad_nd.default: "pad_rule",
    aten.slice.Tensor: "slice_rule",
    aten.select.int: "slice_rule",
    aten.slice_scatter.default: "slice_scatter_rule",
    # Not tagged pointwise, but elementwise all the same.
    **dict.fromkeys(
        (
            aten.where.self,
            aten.masked_fill.Scalar,
            aten.masked_fill.Tensor,
            aten.full_like.default,
            aten.zeros_like.default,
            aten.ones_like.default,
            aten.empty_like.default,
            aten.gelu_backward.default,
        ),
        "pointwise_rule",
    ),
}


def _flat_args(node: torch.fx.Node) -> list:
    """The node's arguments, lists and keywords included, flattened."""
    out: list = []
    for arg in [*node.args, *node.kwargs.values()]:
        if isinstance(arg, (list, tuple)):
            out.extend(arg)
        else:
            out.append(arg)
    return out


def analyze(gm: torch.fx.GraphModule, known: dict[str, Layout] | None = None) -> Plan:
    """The plan to run `gm` padded; raises Unsupported (why) where it cannot. `known`:
    the layouts of inputs that a bucketed forward saved for this backward."""
    analysis = _Analysis(gm, known)
    try:
        return analysis.run()
    except Unsupported:
        raise
    except Exception as error:  # a graph this analysis does not understand runs exact
        raise Unsupported(f"{type(error).__name__} while planning: {error}") from error


def inputs_plan(gm: torch.fx.GraphModule, known: dict[str, Layout] | None = None) -> Plan:
    """The layouts of `gm`'s inputs and where its symbols come from, without its
    operators: enough to cut padded inputs back to their real sizes."""
    analysis = _Analysis(gm, known)
    analysis.placeholders_only = True
    return analysis.run()


def has_symbols(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt) and _expr(val).free_symbols:
            return True
        if isinstance(val, torch.Tensor) and any(_expr(s).free_symbols for s in val.shape):
            return True
    return False


# --- running padded ------------------------------------------------------------------


def _evaluate(expr: sympy.Expr, values: dict) -> Any:
    """`expr` at the given symbol values (ints, or 0-d tensors), with Python operators,
    so that tensors give tensor arithmetic in the program."""
    if expr.is_Symbol:
        return values[expr]
    if expr.is_Integer:
        return int(expr)
    if expr.is_Number:
        return float(expr)
    if isinstance(expr, sympy.Add):
        out = 0
        for a in expr.args:
            out = out + _evaluate(a, values)
        return out
    if isinstance(expr, sympy.Mul):
        out = 1
        for a in expr.args:
            out = out * _evaluate(a, values)
        return out
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer:
        base = _evaluate(expr.base, values)
        if int(expr.exp) >= 0:
            return base ** int(expr.exp)
        return 1.0 / (base ** -int(expr.exp))
    name = type(expr).__name__
    args = [_evaluate(a, values) for a in expr.args]
    if name == "FloorDiv":
        return args[0] // args[1]
    if name in ("Mod", "PythonMod"):
        return args[0] % args[1]
    if name in ("ToFloat", "IntTrueDiv", "FloatTrueDiv"):
        return args[0] / args[1] if len(args) == 2 else args[0] * 1.0
    raise Unsupported(f"a size expression {expr}")


def _fill_for(dtype: torch.dtype, fill: Any) -> Any:
    """`fill` as a Python number of `dtype`'s kind, so that where() keeps the dtype
    (an infinity in an integer tensor is its largest or smallest value)."""
    if dtype == torch.bool:
        return bool(fill)
    if dtype.is_floating_point or dtype.is_complex:
        return float(fill)
    if fill in (float("inf"), float("-inf")):
        info = torch.iinfo(dtype)
        return info.max if fill > 0 else info.min
    return int(fill)


def _strided_like(out: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`out` with `like`'s strides: later views in the graph were traced for them."""
    if out.stride() == like.stride():
        return out
    return torch.empty_strided(like.shape, like.stride(), dtype=out.dtype, device=out.device).copy_(
        out
    )


class PaddedInterpreter(torch.fx.Interpreter):
    """Runs the graph on padded inputs with the plan's masks; `real` holds each
    symbol's real value as a 0-d device tensor."""

    def __init__(self, gm: torch.fx.GraphModule, plan: Plan) -> None:
        super().__init__(gm, garbage_collect_values=True)
        self.plan = plan
        self.real: dict = {}
        self.padded: dict = {}
        self._masks: dict = {}

    def bind(self, real: dict, padded: dict) -> None:
        self.real, self.padded, self._masks = real, padded, {}

    def _dim_mask(self, layout_dim: Dim, size: int, device: torch.device) -> torch.Tensor:
        key = (layout_dim, size)
        mask = self._masks.get(key)
        if mask is not None:
            return mask
        index = torch.arange(size, device=device)
        stride = size
        mask = None
        for factor in layout_dim:
            extent = int(_evaluate(factor, self.padded)) if not isinstance(factor, int) else factor
            stride //= extent
            if isinstance(factor, int):
                continue
            coordinate = index if stride == 1 else index // stride
            if stride * extent != size:
                coordinate = coordinate % extent
            valid = coordinate < _evaluate(factor, self.real)
            mask = valid if mask is None else mask & valid
        self._masks[key] = mask
        return mask

    def masked(self, tensor: torch.Tensor, layout: Layout, dims: Sequence[int], fill: Any):
        mask = None
        rank = tensor.dim()
        for d in dims:
            m = self._dim_mask(layout[d], tensor.shape[d], tensor.device)
            shape = [1] * rank
            shape[d] = tensor.shape[d]
            m = m.view(shape)
            mask = m if mask is None else mask & m
        if mask is None:
            return tensor
        fill = _fill_for(tensor.dtype, fill)
        return _strided_like(torch.where(mask, tensor, fill), tensor)

    def attention_mask(self, mask, query, key, query_dim: Dim, key_dim: Dim) -> torch.Tensor:
        """`mask` (bool, or added to the scores) with padded keys masked out for real
        queries, and padded queries attending the first key only."""
        q_size, k_size = query.shape[-2], key.shape[-2]
        query_real = self._dim_mask(query_dim, q_size, query.device)
        key_real = self._dim_mask(key_dim, k_size, key.device)
        if query_real is None:  # static queries (one decoded token): all real
            query_real = torch.ones(q_size, dtype=torch.bool, device=query.device)
        query_real, key_real = query_real.view(q_size, 1), key_real.view(1, k_size)
        first_key = (torch.arange(k_size, device=key.device) == 0).view(1, k_size)
        if mask is None:  # the keys' padding is the whole mask
            mask = torch.zeros((), dtype=query.dtype, device=query.device)
        if mask.dtype == torch.bool:
            return torch.where(query_real, mask & key_real, first_key)
        blocked = float("-inf")
        kept = torch.where(key_real, mask, blocked)
        return torch.where(query_real, kept, torch.where(first_key, 0.0, blocked)).to(mask.dtype)

    def run_node(self, n: torch.fx.Node) -> Any:
        self._node = n
        return super().run_node(n)

    def call_function(self, target, args, kwargs):
        node = self._node
        plan = self.plan.nodes.get(node.name)
        if plan is None:
            return super().call_function(target, args, kwargs)
        args = list(args)
        for i, expr in plan.values.items():
            args[i] = _evaluate(expr, self.real)
            if isinstance(args[i], torch.Tensor) and "Scalar" in target._overloadname:
                target = target.overloadpacket.Tensor
        if plan.attention_mask is not None:
            position, query_dim, key_dim = plan.attention_mask
            query = args[1 if "backward" in target._name else 0]
            key = args[2 if "backward" in target._name else 1]
            if len(args) <= position:  # the mask left to its default (None)
                schema = target._schema.arguments
                kwargs = dict(kwargs)
                args += [
                    kwargs.pop(a.name, a.default_value) for a in schema[len(args) : position + 1]
                ]
            args[position] = self.attention_mask(args[position], query, key, query_dim, key_dim)
        for mask in plan.masks:
            if mask.element is not None:
                arg_node = node.args[mask.arg][mask.element]
                items = list(args[mask.arg])
                layout = self.plan.layouts[arg_node.name]
                items[mask.element] = self.masked(items[mask.element], layout, mask.dims, mask.fill)
                args[mask.arg] = items
                continue
            arg_node = node.args[mask.arg]
            layout = self.plan.layouts[arg_node.name]
            args[mask.arg] = self.masked(args[mask.arg], layout, mask.dims, mask.fill)
        if plan.wrap_negative:
            indices = list(args[1])
            for d, size in plan.wrap_negative:
                index = indices[d]
                indices[d] = torch.where(index < 0, index + _evaluate(size, self.real), index)
            args[1] = indices
        if plan.arange_from is not None:
            val = node.meta["val"]
            length = int(args[1]) - int(args[0])
            positions = torch.arange(length, dtype=val.dtype, device=kwargs.get("device"))
            return positions + _evaluate(plan.arange_from, self.real).to(val.dtype)
        if plan.select_from_end is not None:
            # x.select(dim, -k) reads the k-th element from the real end.
            dim, index, size, keep = plan.select_from_end
            end = _evaluate(size, self.real)
            if keep:  # a slice of the last -index elements
                positions = torch.arange(index, 0, device=args[0].device) + end
                return torch.index_select(args[0], dim, positions)
            return torch.index_select(args[0], dim, (end + index).view(1)).squeeze(dim)
        out = super().call_function(target, tuple(args), kwargs)
        for i, dim, offset in plan.cat_at:
            part = args[0][i]
            start = _evaluate(offset, self.real)
            shape = [1] * part.dim()
            shape[dim] = part.shape[dim]
            positions = (torch.arange(part.shape[dim], device=out.device) + start).view(shape)
            out = _strided_like(out.scatter(dim, positions.expand(part.shape), part), out)
        if plan.grow is not None:
            dim, size = plan.grow
            short = int(_evaluate(size, self.padded)) - out.shape[dim]
            if short > 0:
                widths = [0, 0] * (out.dim() - 1 - dim) + [0, short]
                out = torch.nn.functional.pad(out, widths)
        for dim, size, width, value in plan.pad_after:
            real_end = _evaluate(size, self.real)
            index = torch.arange(out.shape[dim], device=out.device)
            appended = (index >= real_end) & (index < real_end + width)
            shape = [1] * out.dim()
            shape[dim] = out.shape[dim]
            fill = _fill_for(out.dtype, value)
            out = _strided_like(torch.where(appended.view(shape), fill, out), out)
        if plan.mean_of is not None:
            # The mean over the padded extent, rescaled to the real element count.
            layout = self.plan.layouts[node.args[0].name]
            padded_count, real_count = 1, 1
            for d in plan.mean_of:
                padded_count *= args[0].shape[d]
                real_count = real_count * _evaluate(_product(layout[d]), self.real)
            out = out * padded_count / real_count
        return out
