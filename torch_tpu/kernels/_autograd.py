"""Gradients of jax_op ops.

The forward runs as a hidden op ``<op>_jax_fwd`` that returns the results and JAX's
residuals (the leaves of ``jax.vjp``'s pullback), saved for backward, so the forward is
never recomputed. The backward is a hidden op ``<op>_jax_bwd`` that applies the pullback to
the residuals and the cotangents. With a user ``backward`` kernel, the residuals are the
array inputs themselves. Both hidden ops are custom ops with fake kernels, so Dynamo and
AOTAutograd trace them like any op and they fuse into compiled programs.

Floating and complex arrays are differentiable; integer and bool inputs get no gradient
and integer results are not differentiable (JAX's float0 cotangents are made inside).
"""

from __future__ import annotations

import re
import warnings

import torch

from torch_tpu.kernels import _lowering


def _differentiable(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def signature_text(tensors) -> str:
    """The arrays' dtypes and shapes, "float32[4,8];int32[4]": a static argument of the
    backward op, which identifies the forward's lowering."""
    return ";".join(
        f"{str(t.dtype).removeprefix('torch.')}[{','.join(str(int(s)) for s in t.shape)}]"
        for t in tensors
    )


def _parse_signature(text: str):
    jax = _lowering.import_jax()
    avals = []
    for part in text.split(";") if text else []:
        match = re.fullmatch(r"(\w+)\[([\d,]*)\]", part)
        dtype = getattr(torch, match.group(1))
        shape = tuple(int(s) for s in match.group(2).split(",") if s)
        avals.append(jax.ShapeDtypeStruct(shape, _lowering.jax_dtype(dtype)))
    return avals


class _Plan:
    """What backward needs to know about one forward signature."""

    def __init__(self, kernel, statics, avals):
        jax = _lowering.import_jax()
        self.kernel = kernel
        self.statics = statics
        self.avals = avals
        self.diff = [i for i, a in enumerate(avals) if _differentiable(_torch_dtype(a))]
        self.tree = None  # the pullback's structure, set when the forward is traced
        self.out_tree = None
        self.out_avals = None
        fn = kernel.jax_function(statics)

        def forward(*arrays):
            def of_differentiable(*d):
                full = list(arrays)
                for i, value in zip(self.diff, d):
                    full[i] = value
                return fn(*full)

            out, pullback = jax.vjp(of_differentiable, *[arrays[i] for i in self.diff])
            leaves, self.tree = jax.tree_util.tree_flatten(pullback)
            flat_out, self.out_tree = jax.tree_util.tree_flatten(out)
            self.out_avals = [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in flat_out]
            return (*flat_out, *leaves)

        self.forward = forward
        with _lowering.pallas_interpret(True):
            flat_out, self.out_tree = jax.tree_util.tree_flatten(jax.eval_shape(fn, *avals))
            self.out_avals = list(flat_out)
            self.residual_shapes = []
            if kernel.backward_fn is None:
                try:
                    shapes = jax.eval_shape(forward, *avals)
                except Exception as e:
                    raise RuntimeError(
                        f"{kernel.name}: JAX cannot differentiate this function ({e}). A "
                        "Pallas kernel has no reverse-mode autodiff: give it a jax.custom_vjp, "
                        "or pass backward= to jax_op"
                    ) from e
                self.residual_shapes = [
                    (tuple(r.shape), _torch_dtype(r)) for r in shapes[len(self.out_avals) :]
                ]
        self._backward = None
        self.num_results = len(self.out_avals)

    def differentiable_results(self):
        return [i for i, o in enumerate(self.out_avals) if _differentiable(_torch_dtype(o))]

    def backward_function(self):
        """JAX function (residuals..., cotangents of differentiable results...) -> grads."""
        if self._backward is None:
            self._backward = (
                self._custom_backward()
                if self.kernel.backward_fn is not None
                else self._vjp_backward()
            )
        return self._backward

    def _vjp_backward(self):
        jax = _lowering.import_jax()
        import numpy as np

        n_res = len(self.residual_shapes)
        diff_results = self.differentiable_results()

        def backward(*arrays):
            residuals, given = arrays[:n_res], arrays[n_res:]
            cotangents = [np.zeros(o.shape, dtype=jax.dtypes.float0) for o in self.out_avals]
            for i, ct in zip(diff_results, given):
                cotangents[i] = _conj(ct)
            pullback = jax.tree_util.tree_unflatten(self.tree, residuals)
            grads = pullback(jax.tree_util.tree_unflatten(self.out_tree, cotangents))
            return tuple(_conj(g) for g in grads)

        return backward

    def _custom_backward(self):
        """JAX function (inputs..., cotangents of differentiable results...) -> grads,
        from the kernel's own backward."""
        import jax.numpy as jnp

        n_in = len(self.avals)
        diff_results = self.differentiable_results()
        statics = self.statics
        user = self.kernel.backward_fn

        def backward(*arrays):
            inputs, given = arrays[:n_in], arrays[n_in:]
            cotangents = [jnp.zeros(o.shape, o.dtype) for o in self.out_avals]
            for i, ct in zip(diff_results, given):
                cotangents[i] = _conj(ct)
            grads = user(*inputs, *cotangents, **statics)
            grads = grads if isinstance(grads, (tuple, list)) else (grads,)
            if len(grads) != n_in:
                raise TypeError(
                    f"{self.kernel.name}: backward returned {len(grads)} gradients for "
                    f"{n_in} array inputs"
                )
            return tuple(
                jnp.zeros(self.avals[i].shape, self.avals[i].dtype)
                if grads[i] is None
                else grads[i]
                for i in self.diff
            )

        return backward


def _conj(x):
    # JAX's VJP is a transpose; PyTorch's complex gradients are conjugate (Wirtinger) ones.
    import jax.numpy as jnp

    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def _torch_dtype(aval) -> torch.dtype:
    return _lowering.torch_dtype(aval.dtype)


class _HiddenKernel:
    """Runs one JAX function of arrays (lowered per signature) on tpu or in JAX on the CPU."""

    def __init__(self, name):
        self.name = name
        self._lowered = {}
        self._jitted = {}

    def run(self, key, function, tensors):
        import torch_tpu

        if any(t.device.type == "tpu" for t in tensors):
            lowered = self._lowered.get(key)
            if lowered is None:
                avals = [_aval(t) for t in tensors]
                lowered = _lowering.lower(function, avals, self.name)
                _lowering.check_compiles(self.name, lowered, tensors)
                self._lowered[key] = lowered
            outputs = [(list(s), d, -1) for s, d in lowered.outputs]
            return list(
                torch_tpu._C._kernels.call(
                    self.name, lowered.callee, tensors, list(lowered.input_dtypes), outputs
                )
            )
        jax = _lowering.import_jax()
        cpu = jax.devices("cpu")[0]
        arrays = [jax.device_put(jax.dlpack.from_dlpack(_for_jax(t)), cpu) for t in tensors]
        jitted = self._jitted.get(key)
        if jitted is None:
            jitted = self._jitted[key] = jax.jit(function)
        with _lowering.pallas_interpret(True):
            flat = jax.tree_util.tree_leaves(jitted(*arrays))
        return [torch.from_dlpack(a).clone() for a in flat]


def _aval(t):
    jax = _lowering.import_jax()
    return jax.ShapeDtypeStruct(tuple(t.shape), _lowering.jax_dtype(t.dtype))


def _for_jax(t):
    return t.detach().to(_lowering.torch_dtype(_lowering.jax_dtype(t.dtype))).contiguous()


def install_autograd(op, kernel):
    """Registers `op`'s autograd: forward through <op>_jax_fwd, backward through <op>_jax_bwd."""
    namespace, opname = kernel.name.split("::")
    statics = kernel.signature.statics
    static_text = "".join(f", {p.type} {p.name}" for p in statics)
    plans = {}  # (signature text, statics) -> _Plan

    def plan_for(tensors_or_text, static_values):
        text = (
            tensors_or_text if isinstance(tensors_or_text, str) else signature_text(tensors_or_text)
        )
        key = (text, _lowering.static_key(static_values), _lowering.x64_enabled())
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = _Plan(kernel, static_values, _parse_signature(text))
        return plan, key

    forward_runner = _HiddenKernel(f"{namespace}::{opname}_jax_fwd")
    backward_runner = _HiddenKernel(f"{namespace}::{opname}_jax_bwd")

    def forward_impl(*args, **kwargs):
        tensors, static_values = kernel.split(args, kwargs)
        plan, key = plan_for(tensors, static_values)
        return forward_runner.run(key, plan.forward, tensors)

    def forward_fake(*args, **kwargs):
        tensors, static_values = kernel.split(args, kwargs)
        plan, _ = plan_for(tensors, static_values)
        shapes = [(tuple(o.shape), _torch_dtype(o)) for o in plan.out_avals]
        shapes += plan.residual_shapes
        device = _lowering.device_of(tensors)
        return [torch.empty(s, dtype=d, device=device) for s, d in shapes]

    forward_op = torch.library.custom_op(
        f"{namespace}::{opname}_jax_fwd",
        forward_impl,
        mutates_args=(),
        schema=f"({kernel.signature.arguments_text()}) -> Tensor[]",
    )
    forward_op.register_fake(forward_fake)

    def backward_impl(residuals, cotangents, signature, *static_args):
        static_values = {p.name: _static(v) for p, v in zip(statics, static_args)}
        plan, key = plan_for(signature, static_values)
        return backward_runner.run(key, plan.backward_function(), [*residuals, *cotangents])

    def backward_fake(residuals, cotangents, signature, *static_args):
        static_values = {p.name: _static(v) for p, v in zip(statics, static_args)}
        plan, _ = plan_for(signature, static_values)
        device = _lowering.device_of([*cotangents, *residuals])
        return [
            torch.empty(plan.avals[i].shape, dtype=_torch_dtype(plan.avals[i]), device=device)
            for i in plan.diff
        ]

    backward_op = torch.library.custom_op(
        f"{namespace}::{opname}_jax_bwd",
        backward_impl,
        mutates_args=(),
        schema=f"(Tensor[] residuals, Tensor[] cotangents, str signature{static_text}) -> Tensor[]",
    )
    backward_op.register_fake(backward_fake)

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, keyset, kwargs, *args):
            tensors, static_values = kernel.split(args, kwargs)
            plan, _ = plan_for(tensors, static_values)
            if kernel.backward_fn is not None:
                results = _as_list(_below_autograd(op, keyset, args, kwargs))
                residuals = tensors
            else:
                everything = forward_op(*args, **kwargs)
                results = everything[: plan.num_results]
                residuals = everything[plan.num_results :]
            ctx.save_for_backward(*residuals)
            ctx.signature = signature_text(tensors)
            ctx.static_args = [static_values[p.name] for p in statics]
            ctx.plan = plan
            ctx.tensor_positions = [
                i for i, p in enumerate(kernel.signature.parameters) if not p.static
            ][: len(args)]
            ctx.num_args = len(args)
            integral = [r for r in results if not _differentiable(r.dtype)]
            ctx.mark_non_differentiable(*integral)
            return results[0] if kernel.signature.num_results == 1 else tuple(results)

        @staticmethod
        def backward(ctx, *grads):
            plan = ctx.plan
            cotangents = [grads[i].contiguous() for i in plan.differentiable_results()]
            gradients = backward_op(
                list(ctx.saved_tensors), cotangents, ctx.signature, *ctx.static_args
            )
            per_tensor = [None] * len(plan.avals)
            for i, g in zip(plan.diff, gradients):
                per_tensor[i] = g
            per_arg = [None] * ctx.num_args
            for t, position in enumerate(ctx.tensor_positions):
                if position < ctx.num_args:
                    per_arg[position] = per_tensor[t]
            return (None, None, *per_arg)

    def autograd_impl(keyset, *args, **kwargs):
        if _needs_grad(args, kwargs):
            return Function.apply(keyset, kwargs, *args)
        return _below_autograd(op, keyset, args, kwargs)

    _override_autograd(op, autograd_impl)


def _static(value):
    return tuple(value) if isinstance(value, list) else value


def _as_list(result):
    if isinstance(result, torch.Tensor):
        return [result]
    return list(result)


def refuse_autograd(op, kernel, mutated):
    """An op that updates donated arrays in place has no gradient: refuse, as PyTorch does
    for an in-place op on a leaf that requires grad, instead of silently returning none."""

    def autograd_impl(keyset, *args, **kwargs):
        if _needs_grad(args, kwargs):
            raise RuntimeError(
                f"{kernel.name} updates {', '.join(mutated)} in place (donate_argnums) and has "
                "no gradient; call it under torch.no_grad() or on tensors that do not require grad"
            )
        return _below_autograd(op, keyset, args, kwargs)

    _override_autograd(op, autograd_impl)


def _needs_grad(args, kwargs) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in (*args, *kwargs.values())
    )


def _below_autograd(op, keyset, args, kwargs):
    """The op's kernel under the Autograd key (tpu, CPU or fake), with no gradient."""
    with torch._C._AutoDispatchBelowAutograd():
        return op._opoverload.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)


def _override_autograd(op, autograd_impl):
    # Replaces the Autograd kernel custom_op registered (one that finds no formula).
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        op._lib.impl(op._name, autograd_impl, "Autograd", with_keyset=True)
