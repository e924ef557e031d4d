"""``torch_tpu._internal.pallas.pallas``: ``JaxCallable``, the object Helion's Pallas
backend wraps each kernel in, on torch_tpu.kernels' lowering.

A JaxCallable holds a jitted JAX function; called on tpu tensors, it lowers the function
once per signature for the plugin's platform (Mosaic on a TPU; on the CPU platform
``pallas_call`` in interpret mode, while Mosaic-only kernels fail with
UnsupportedKernelError), and runs it inside torch_tpu's programs.
"""

from __future__ import annotations

import hashlib

import torch

from torch_tpu._internal.pallas import tpu_torch_pallas
from torch_tpu.kernels import _lowering


def jax_placeholder(tensor: torch.Tensor, mesh=None, partition_spec=None):
    """A jax.ShapeDtypeStruct for `tensor` (meta tensors too)."""
    jax = _lowering.import_jax()
    return jax.ShapeDtypeStruct(tuple(tensor.shape), _lowering.jax_dtype(tensor.dtype))


def _get_kernel_invocation_key(trace_key, input_args, input_kwargs=None, static_argnums=()):
    parts = [
        f"{tuple(a.shape)}:{a.dtype}" if isinstance(a, torch.Tensor) else repr(a)
        for a in input_args
    ]
    parts += [f"{k}={v!r}" for k, v in sorted((input_kwargs or {}).items())]
    return f"{trace_key};" + ",".join(parts)


def get_default_pallas_mesh():
    raise NotImplementedError("kernels over a device mesh are not supported yet")


class JaxCallable:
    """A JAX function called on tpu tensors: ``JaxCallable(name=..., jit_fn=...)(*tensors)``.

    ``input_output_aliases`` ({input position: result position}) writes those results into
    the inputs, in place. The call returns the results in the function's pytree.
    """

    def __init__(
        self,
        name,
        jit_fn,
        trace_key=None,
        mesh=None,
        input_partition_specs=None,
        static_argnums=(),
        donate_argnums=None,
        input_output_aliases=None,
    ):
        if mesh is not None or input_partition_specs:
            raise NotImplementedError("kernels over a device mesh are not supported yet")
        self.name = name
        self.jit_fn = jit_fn
        self.trace_key = trace_key or name
        self.mesh = None
        self.input_partition_specs = None
        self.static_argnums = tuple(static_argnums)
        self.input_output_aliases = dict(input_output_aliases or {})
        self.donate_argnums = (
            list(donate_argnums) if donate_argnums is not None else list(self.input_output_aliases)
        )
        # What Helion reads after the first call: per invocation key, the results' shapes
        # (as meta tensors) with their tree, and the fingerprint to call the kernel by.
        self.output_shapes = {}
        self.kernel_key_to_mlir_fingerprint = {}

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"{self.name}: pass the kernel's arguments positionally")
        key = _get_kernel_invocation_key(self.trace_key, args, kwargs, self.static_argnums)
        tensors = [a for i, a in enumerate(args) if i not in self.static_argnums]
        fingerprint = self.kernel_key_to_mlir_fingerprint.get(key)
        if fingerprint is None:
            statics = {i: args[i] for i in self.static_argnums}

            def of_arrays(*arrays):
                arrays = iter(arrays)
                full = [statics[i] if i in statics else next(arrays) for i in range(len(args))]
                return self.jit_fn(*full)

            avals = [jax_placeholder(t) for t in tensors]
            lowered = _lowering.lower(of_arrays, avals, self.name)
            fingerprint = hashlib.sha256(lowered.callee.name.encode()).hexdigest()[:24]
            tpu_torch_pallas.register_custom_kernel(self.name, fingerprint, lowered=lowered)
            shapes = [torch.empty(s, dtype=d, device="meta") for s, d in lowered.outputs]
            self.output_shapes[key] = (shapes, lowered.out_tree)
            self.kernel_key_to_mlir_fingerprint[key] = fingerprint
        shapes, out_tree = self.output_shapes[key]
        # Aliases count positions among all arguments; the kernel sees only the arrays.
        position = {
            i: n for n, i in enumerate(i for i in range(len(args)) if i not in self.static_argnums)
        }
        aliases = {position[i]: out for i, out in self.input_output_aliases.items()}
        results = tpu_torch_pallas.call_custom_kernel(
            self.name,
            fingerprint,
            inputs=tensors,
            output_shapes=shapes,
            donate_argnums=self.donate_argnums,
            aliases=aliases,
        )
        return out_tree.unflatten(results)
