"""torch_tpu.kernels.jax_op: a JAX function (Pallas kernels included) as a PyTorch op.

On tpu tensors the function runs inside torch_tpu's own programs, on the tensors' device
buffers (no copies, no second runtime): in strict mode as the op's own program, in
defer_and_fuse and under torch.compile as a call inside the fused program. On CPU tensors
it runs in JAX on the CPU, so the same op serves as its own reference.
"""

from __future__ import annotations

import functools
import warnings

import torch

from torch_tpu.kernels import _lowering, _schema
from torch_tpu.kernels._autograd import install_autograd, refuse_autograd


def jax_op(
    name: str,
    fn=None,
    /,
    *,
    donate_argnums=None,
    static_argnames=None,
    backward=None,
    mesh=None,
    input_partition_specs=None,
    output_partition_specs=None,
):
    """Makes the JAX function `fn` a ``torch.library`` custom op called `name` ("ns::op").

    Array parameters become tensors; Python numbers, bools, strings and tuples of numbers
    are static (see ``static_argnames``; each distinct value lowers once). The result is
    one tensor, or a tuple when the return annotation is ``tuple[jax.Array, ...]`` of a
    fixed size. Differentiable functions get gradients from ``jax.vjp`` (JAX's residuals
    are kept, so the forward is not recomputed); a Pallas kernel needs a ``jax.custom_vjp``,
    or ``backward``: a JAX function called as ``backward(*arrays, *cotangents, **statics)``
    that returns one gradient (or None) per array parameter.

    ``donate_argnums`` (positions among the parameters) are updated in place: each donated
    array receives the first result of its shape and dtype, which is not returned.

    >>> import jax.numpy as jnp  # doctest: +SKIP
    >>> @torch_tpu.kernels.jax_op("mylib::rms_norm")  # doctest: +SKIP
    ... def rms_norm(x, w, eps: float = 1e-6):
    ...     return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w
    >>> rms_norm(torch.randn(4, 8, device="tpu"), torch.ones(8, device="tpu"))  # doctest: +SKIP
    """
    if fn is None:
        return functools.partial(
            jax_op,
            name,
            donate_argnums=donate_argnums,
            static_argnames=static_argnames,
            backward=backward,
            mesh=mesh,
            input_partition_specs=input_partition_specs,
            output_partition_specs=output_partition_specs,
        )
    if mesh is not None or input_partition_specs or output_partition_specs:
        raise NotImplementedError(
            "jax_op: sharded kernels (mesh, partition specs) are not supported yet; each rank "
            "calls the kernel on its own shards instead"
        )
    _lowering.import_jax()  # fail now, with the install hint, not at the first call
    if not isinstance(name, str) or name.count("::") != 1:
        raise ValueError(f"jax_op: name must be 'namespace::op', got {name!r}")
    kernel = Kernel(name, fn, static_argnames, donate_argnums, backward)
    mutated = [kernel.signature.parameters[i].name for i in kernel.donated]
    op = torch.library.custom_op(
        name, kernel.run, mutates_args=mutated, schema=kernel.schema(mutated)
    )
    op.register_fake(kernel.fake)
    if kernel.donated:
        refuse_autograd(op, kernel, mutated)
    else:
        install_autograd(op, kernel)
    functools.update_wrapper(op, fn, assigned=("__doc__",), updated=())
    return op


class Kernel:
    """One jax_op: the JAX function, its schema, and its lowerings per input signature."""

    def __init__(self, name, fn, static_argnames, donate_argnums, backward):
        self.name = name
        self.fn = fn
        self.backward_fn = backward
        self.signature = _schema.signature_of(fn, static_argnames, where=name)
        self.donated = tuple(donate_argnums or ())
        for i in self.donated:
            if not 0 <= i < len(self.signature.parameters):
                raise ValueError(
                    f"{name}: donate_argnums has {i}, but fn has "
                    f"{len(self.signature.parameters)} parameters"
                )
            if self.signature.parameters[i].static:
                raise ValueError(f"{name}: donated parameter {i} is static, not an array")
        self._lowered = {}
        self._prepared = {}  # signature -> what a call passes to the C++ side
        self._shapes = {}
        self._jitted = {}

    # ---- schema and arguments ----

    def schema(self, mutated=()) -> str:
        returned = self.signature.num_results - len(self.donated)
        if returned < 0:
            raise ValueError(f"{self.name}: more donated arrays than results")
        results = (
            "Tensor"
            if returned == 1 and self.signature.num_results == 1
            else ("(" + ", ".join(["Tensor"] * returned) + ")")
        )
        return f"({self.signature.arguments_text(mutated)}) -> {results}"

    def split(self, args, kwargs):
        """(tensor arguments in order, static values by name) of an op call."""
        values = list(args)
        for p in self.signature.parameters[len(values) :]:
            values.append(kwargs.get(p.name, p.default))
        tensors, statics = [], {}
        for p, value in zip(self.signature.parameters, values):
            if p.static:
                statics[p.name] = tuple(value) if isinstance(value, list) else value
            else:
                tensors.append(value)
        return tensors, statics

    def jax_function(self, statics):
        """`fn` as a function of its arrays only, the statics bound."""
        parameters = self.signature.parameters

        def call(*arrays):
            arrays = iter(arrays)
            positional, keywords = [], {}
            for p in parameters:
                value = statics[p.name] if p.static else next(arrays)
                if p.keyword_only:
                    keywords[p.name] = value
                else:
                    positional.append(value)
            return self.fn(*positional, **keywords)

        return call

    @staticmethod
    def key(tensors, statics):
        """The lowering's key: shapes and dtypes of the arrays, and the static values.
        Symbolic sizes (Dynamo's dynamic shapes) are specialized to their values here."""
        shapes = tuple((tuple(int(s) for s in t.shape), t.dtype) for t in tensors)
        return shapes, _lowering.static_key(statics), _lowering.x64_enabled()

    @staticmethod
    def call_key(tensors, statics):
        """key() for real tensors (sizes are ints): what every call computes, so cheap."""
        shapes = tuple((t.shape, t.dtype) for t in tensors)
        return shapes, _lowering.static_key(statics), _lowering.x64_enabled()

    def avals(self, tensors):
        jax = _lowering.import_jax()
        return [
            jax.ShapeDtypeStruct(tuple(int(s) for s in t.shape), _lowering.jax_dtype(t.dtype))
            for t in tensors
        ]

    # ---- results ----

    def result_plan(self, tensors, outputs):
        """For each flattened result, the index of the tensor it is written into, or -1."""
        if len(outputs) != self.signature.num_results:
            raise TypeError(
                f"{self.name}: the function returns {len(outputs)} arrays, but its schema "
                f"says {self.signature.num_results}; annotate the results, e.g. "
                f"-> tuple[{', '.join(['jax.Array'] * len(outputs))}]"
            )
        tensor_index = {}
        for p in self.signature.parameters:
            if not p.static:
                tensor_index[p.name] = len(tensor_index)
        plan = [-1] * len(outputs)
        for i in self.donated:
            target = tensor_index[self.signature.parameters[i].name]
            t = tensors[target]
            want = (tuple(t.shape), t.dtype)
            free = [
                k
                for k, o in enumerate(outputs)
                if plan[k] < 0 and tuple(o[0]) == want[0] and o[1] == want[1]
            ]
            if not free:
                hint = (
                    " (JAX computes it in 32 bits: set jax_enable_x64)"
                    if _lowering.narrowed(t.dtype)
                    else ""
                )
                raise ValueError(
                    f"{self.name}: donated argument {self.signature.parameters[i].name!r} "
                    f"({t.dtype}{list(t.shape)}) has no result of its shape and dtype to "
                    f"receive{hint}"
                )
            plan[free[0]] = target
        return plan

    def returned(self, results, plan):
        kept = [r for r, target in zip(results, plan) if target < 0]
        if not kept:
            return None
        if self.signature.num_results == 1 and not self.donated:
            return kept[0]
        return tuple(kept)

    # ---- kernels ----

    def lowered(self, tensors, statics):
        key = self.key(tensors, statics)
        found = self._lowered.get(key)
        if found is None:
            found = _lowering.lower(self.jax_function(statics), self.avals(tensors), self.name)
            self._lowered[key] = found
        return found

    def run(self, *args, **kwargs):
        tensors, statics = self.split(args, kwargs)
        if any(t.device.type == "tpu" for t in tensors) or not tensors:
            return self.run_tpu(tensors, statics)
        return self.run_cpu(tensors, statics)

    def run_tpu(self, tensors, statics):
        import torch_tpu

        key = self.call_key(tensors, statics)
        prepared = self._prepared.get(key)
        if prepared is None:
            lowered = self.lowered(tensors, statics)
            plan = self.result_plan(tensors, lowered.outputs)
            outputs = [
                (list(shape), dtype, target)
                for (shape, dtype), target in zip(lowered.outputs, plan)
            ]
            _warn_if_narrowed(self.name, tensors)
            _lowering.check_compiles(self.name, lowered, tensors)
            prepared = (lowered.callee, list(lowered.input_dtypes), outputs, plan)
            self._prepared[key] = prepared
        callee, input_dtypes, outputs, plan = prepared
        results = torch_tpu._C._kernels.call(self.name, callee, tensors, input_dtypes, outputs)
        return self.returned(results, plan)

    def run_cpu(self, tensors, statics):
        """The kernel in JAX on the CPU (for CPU tensors): the reference tpu results match."""
        jax = _lowering.import_jax()
        key = (_lowering.static_key(statics), _lowering.x64_enabled())
        jitted = self._jitted.get(key)
        if jitted is None:
            jitted = self._jitted[key] = jax.jit(self.jax_function(statics))
        cpu = jax.devices("cpu")[0]
        arrays = [
            jax.device_put(jax.dlpack.from_dlpack(t.detach().to(_cpu_dtype(t)).contiguous()), cpu)
            for t in tensors
        ]
        with _lowering.pallas_interpret(True):
            flat = jax.tree_util.tree_leaves(jitted(*arrays))
        results = [torch.from_dlpack(a).clone() for a in flat]
        plan = self.result_plan(tensors, [(tuple(r.shape), r.dtype) for r in results])
        for result, target in zip(results, plan):
            if target >= 0:
                tensors[target].copy_(result)
        return self.returned(results, plan)

    def output_shapes(self, tensors, statics):
        """((shape, torch dtype), ...) of the flattened results, from jax.eval_shape."""
        jax = _lowering.import_jax()
        key = self.key(tensors, statics)
        found = self._shapes.get(key)
        if found is None:
            with _lowering.pallas_interpret(True):
                out = jax.eval_shape(self.jax_function(statics), *self.avals(tensors))
            found = tuple(
                (tuple(o.shape), _lowering.torch_dtype(o.dtype))
                for o in jax.tree_util.tree_leaves(out)
            )
            self._shapes[key] = found
        return found

    def fake(self, *args, **kwargs):
        tensors, statics = self.split(args, kwargs)
        outputs = self.output_shapes(tensors, statics)
        plan = self.result_plan(tensors, outputs)
        device = _lowering.device_of(tensors)
        results = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in outputs]
        return self.returned(results, plan)


def _warn_if_narrowed(name: str, tensors) -> None:
    narrow = sorted({str(t.dtype) for t in tensors if _lowering.narrowed(t.dtype)})
    if narrow:
        warnings.warn(
            f"{name}: JAX computes {', '.join(narrow)} in 32 bits (jax_enable_x64 is off): "
            "values are converted, and results are 32-bit",
            stacklevel=3,
        )


def _cpu_dtype(t: torch.Tensor) -> torch.dtype:
    return _lowering.torch_dtype(_lowering.jax_dtype(t.dtype))


__all__ = ["jax_op"]
