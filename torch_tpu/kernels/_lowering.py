"""JAX's side of jax_op: a JAX function, lowered for the plugin's platform, as StableHLO
functions that torch_tpu's programs call.

Per input signature the function is lowered once (``jax.jit(...).trace(...).lower``):

- for the platform the PJRT plugin serves (``cpu``, ``tpu``, ``cuda``); on ``cpu`` every
  ``pallas_call`` runs in interpret mode (plain StableHLO loops), on ``tpu`` it is Mosaic;
- checked for custom calls the plugin cannot run, before anything is compiled;
- passed through a portable artifact at the plugin's StableHLO version and back: that
  fails clearly when the module needs a newer StableHLO than the plugin has, and turns
  CHLO ops into StableHLO that the plugin parses whatever its version;
- renamed apart: every function becomes private ``@jax_<hash>_<name>``, so the functions
  of several kernels and torch_tpu's own never clash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
import threading

import torch

_INSTALL_HINT = (
    "torch_tpu.kernels needs JAX: pip install 'torch_tpu[jax]' (jax==0.10.2 on Python 3.11)"
)


class UnsupportedKernelError(RuntimeError):
    """A JAX function lowered to something the PJRT plugin cannot run."""


def import_jax():
    """The jax module, or an ImportError that says what to install."""
    try:
        import jax
    except ImportError as e:
        raise ImportError(_INSTALL_HINT) from e
    return jax


_JAX_DTYPE_NAMES = {
    torch.bool: "bool",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint16: "uint16",
    torch.uint32: "uint32",
    torch.uint64: "uint64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2",
}
_TORCH_DTYPES = {name: dtype for dtype, name in _JAX_DTYPE_NAMES.items()}


def jax_dtype(dtype: torch.dtype):
    """The dtype JAX computes a torch dtype in: int64 is int32 unless jax_enable_x64 is set."""
    jax = import_jax()
    import jax.numpy as jnp

    if dtype not in _JAX_DTYPE_NAMES:
        raise TypeError(f"a JAX kernel cannot take a tensor of dtype {dtype}")
    return jax.dtypes.canonicalize_dtype(jnp.dtype(_JAX_DTYPE_NAMES[dtype]))


def static_key(statics: dict) -> tuple:
    """A hashable key of static values that tells apart what == does not: -0.0 from 0.0
    (a different program), and lets NaN equal itself (or every call would lower anew)."""

    def one(value):
        if isinstance(value, float):
            return ("float", value.hex())
        if isinstance(value, tuple):
            return tuple(one(v) for v in value)
        return value

    return tuple(sorted((name, one(value)) for name, value in statics.items()))


def x64_enabled() -> bool:
    """Whether JAX computes in 64 bits (jax_enable_x64): part of every lowering's key."""
    return bool(import_jax().config.jax_enable_x64)


def narrowed(dtype: torch.dtype) -> bool:
    """Whether JAX computes `dtype` in fewer bits (64-bit types without jax_enable_x64)."""
    return _lowering_dtype_name(dtype) != _JAX_DTYPE_NAMES.get(dtype)


def _lowering_dtype_name(dtype: torch.dtype) -> str:
    return str(jax_dtype(dtype))


def device_of(tensors) -> torch.device:
    """Where an op's results live: the first tpu tensor's device (a 0-d CPU tensor may come
    first), else the first tensor's, else the current tpu device."""
    for t in tensors:
        if t.device.type == "tpu":
            return t.device
    if tensors:
        return tensors[0].device
    return torch.device("tpu", torch.tpu.current_device())


def torch_dtype(dtype) -> torch.dtype:
    name = str(dtype)
    if name not in _TORCH_DTYPES:
        raise TypeError(f"a JAX kernel returned an array of dtype {name}, which torch lacks")
    return _TORCH_DTYPES[name]


# ---- Pallas in interpret mode on the CPU platform ----------------------------------------

_interpret = threading.local()
_interpret_rule_installed = False


@contextlib.contextmanager
def pallas_interpret(on: bool):
    """While on, every pallas_call lowers in interpret mode (on this thread only)."""
    global _interpret_rule_installed
    if on and not _interpret_rule_installed:
        _install_interpret_rule()
        _interpret_rule_installed = True
    before = getattr(_interpret, "on", False)
    _interpret.on = on
    try:
        yield
    finally:
        _interpret.on = before


def _install_interpret_rule():
    # Pallas refuses to lower for "cpu" outside interpret mode, and lowers for "tpu" to a
    # Mosaic custom call the CPU plugin cannot run. This rule asks for interpret mode only
    # inside pallas_interpret(True), so JAX used directly behaves as before.
    try:
        from jax._src.interpreters import mlir
        from jax._src.pallas import pallas_call as pallas
    except ImportError:  # a JAX without Pallas: nothing to redirect
        return
    lower = pallas._pallas_call_lowering

    def rule(ctx, *operands, interpret, **params):
        if getattr(_interpret, "on", False) and not interpret:
            interpret = True
        return lower(ctx, *operands, interpret=interpret, **params)

    for platform in ("cpu", "tpu"):
        mlir.register_lowering(pallas.pallas_call_p, rule, platform=platform)


# ---- custom calls --------------------------------------------------------------------------

_CALL_TARGET = re.compile(r'call_target_name = "([^"]+)"')
# Custom calls XLA itself expands on every platform (sharding annotations, host offload).
_ANYWHERE = {
    "Sharding",
    "SPMDFullToShardShape",
    "SPMDShardToFullShape",
    "annotate_device_placement",
    "MoveToHost",
    "MoveToDevice",
}
_PYTHON_CALLBACKS = re.compile(r"python.*callback|callback.*python")
# On a TPU, JAX lowers callbacks to host transfers (send/recv to the host) instead.
_HOST_TRANSFER = re.compile(r"is_host_transfer = true|_xla_host_transfer_handler_name")


def unsupported_custom_calls(text: str, platform: str) -> list[str]:
    """The custom-call targets in `text` that the `platform` plugin cannot run."""
    found = []
    if _HOST_TRANSFER.search(text):
        found.append("xla_python_host_callback")
    for target in dict.fromkeys(_CALL_TARGET.findall(text)):
        if target in _ANYWHERE:
            continue
        if _PYTHON_CALLBACKS.search(target):
            found.append(target)  # no plugin can call back into this Python process
        elif platform == "cpu":
            found.append(target)  # the CPU plugin links no LAPACK, Mosaic or FFI handlers
        elif platform == "tpu" and (target.startswith("lapack_") or "cpu" in target):
            found.append(target)
        elif platform == "cuda" and target == "tpu_custom_call":
            found.append(target)
    return found


def _explain(target: str, platform: str) -> str:
    if _PYTHON_CALLBACKS.search(target):
        return (
            f"{target}: jax.pure_callback, io_callback and jax.debug.print call back into "
            "Python, which a program on the device cannot do; remove them from the kernel"
        )
    if target == "tpu_custom_call":
        return (
            f"{target}: a Mosaic (Pallas TPU) kernel runs only on a TPU; on the {platform} "
            "platform write it with pl.pallas_call, which torch_tpu runs in interpret mode"
        )
    if target.startswith("lapack_") or target == "LuDecomposition":
        return (
            f"{target}: a LAPACK routine (jnp.linalg / jax.scipy.linalg) that the {platform} "
            "plugin does not link; compute it with torch.linalg outside the kernel"
        )
    return f"{target}: not a custom call the {platform} plugin can run"


# ---- lowering ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Lowered:
    """A JAX function lowered for one input signature."""

    callee: object  # torch_tpu._C._kernels.Callee: the renamed functions and the one to call
    input_dtypes: tuple  # torch dtypes of the function's parameters (JAX's canonical ones)
    outputs: tuple  # ((shape, torch dtype), ...) of the flattened results
    out_tree: object  # the results' pytree structure


def plugin_stablehlo_version() -> str | None:
    """The newest StableHLO the plugin reads, "1.13.3", when it says."""
    import torch_tpu

    version = torch_tpu.plugin_info()["attributes"].get("stablehlo_current_version")
    return version.replace(",", ".") if version else None


def lower(fn, avals, name: str) -> Lowered:
    """Lowers `fn` (taking arrays only) for `avals` (jax.ShapeDtypeStructs) for the plugin."""
    jax = import_jax()
    import torch_tpu

    platform = torch_tpu.platform()
    lowering_platform = platform if platform in ("cpu", "tpu", "cuda") else "cpu"
    jitted = jax.jit(fn, keep_unused=True)
    with pallas_interpret(lowering_platform == "cpu"):
        traced = jitted.trace(*avals)
        try:
            module = traced.lower(lowering_platforms=(lowering_platform,)).compiler_ir("stablehlo")
        except ValueError as e:
            if "Only interpret mode is supported" not in str(e):
                raise
            # pl.kernel / core_map over a TPU core mesh (Helion's Pallas backend emits
            # these) has no plain-StableHLO interpret lowering: it is Mosaic or nothing.
            raise UnsupportedKernelError(
                f"{name}: this Pallas kernel (pl.kernel or core_map over a TPU mesh) lowers "
                f"only to Mosaic, which runs only on a TPU, not on the {platform} platform; "
                "write it with pl.pallas_call to run it here in interpret mode"
            ) from e
        bad = unsupported_custom_calls(_text(module), platform)
        if bad and lowering_platform == "cpu" and all(not _PYTHON_CALLBACKS.search(t) for t in bad):
            # Lowered for "tpu", linear algebra is plain StableHLO (cholesky, triangular_solve)
            # where "cpu" calls LAPACK; Pallas stays in interpret mode.
            retry = traced.lower(lowering_platforms=("tpu",)).compiler_ir("stablehlo")
            if not unsupported_custom_calls(_text(retry), platform):
                module, bad = retry, []
    if bad:
        reasons = "\n  ".join(_explain(t, platform) for t in bad)
        raise UnsupportedKernelError(
            f"{name}: JAX lowered the kernel to custom calls the {platform} plugin cannot "
            f"run:\n  {reasons}"
        )
    module = _at_plugin_version(module, name)
    callee = _renamed_apart(module)
    flat_out, out_tree = jax.tree_util.tree_flatten(traced.out_info)
    outputs = tuple((tuple(o.shape), torch_dtype(o.dtype)) for o in flat_out)
    input_dtypes = tuple(torch_dtype(a.dtype) for a in avals)
    return Lowered(callee, input_dtypes, outputs, out_tree)


def check_compiles(name: str, lowered: Lowered, tensors) -> None:
    """In defer_and_fuse (and under torch.compile), compiles a new kernel alone first, so
    that a kernel the plugin refuses fails here, naming it, and not at a later flush of
    the graph it joined (strict mode compiles it at the call anyway)."""
    import torch_tpu

    if torch_tpu.get_eager_mode() != "defer_and_fuse":
        return
    inputs = [(list(t.shape), dtype) for t, dtype in zip(tensors, lowered.input_dtypes)]
    outputs = [(list(shape), dtype) for shape, dtype in lowered.outputs]
    torch_tpu._C._kernels.check_compiles(name, lowered.callee, inputs, outputs)


def _text(module) -> str:
    return module.operation.get_asm(print_generic_op_form=True, enable_debug_info=False)


def _at_plugin_version(module, name: str):
    """`module` through a portable artifact at the plugin's StableHLO version, and back."""
    version = plugin_stablehlo_version()
    if version is None:
        return module
    import jax
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import _jax

    bytecode = module.operation.get_asm(binary=True, enable_debug_info=False)
    try:
        artifact = _jax.mlir.serialize_portable_artifact(bytecode, version)
    except Exception as e:
        raise UnsupportedKernelError(
            f"{name}: JAX {jax.__version__} lowered the kernel to StableHLO that the plugin's "
            f"StableHLO {version} cannot express ({e}); use a JAX release closer to the "
            "plugin's, or a newer plugin"
        ) from e
    return _jax.mlir.deserialize_portable_artifact(artifact, jax_mlir.make_ir_context())


def _renamed_apart(module):
    from jax._src.lib.mlir import ir

    import torch_tpu

    with module.context:
        digest = hashlib.sha256(_text(module).encode()).hexdigest()[:16]
        prefix = f"jax_{digest}_"
        functions = [op for op in module.body.operations if op.operation.name == "func.func"]
        names = [ir.StringAttr(op.attributes["sym_name"]).value for op in functions]
        main = "main" if "main" in names else names[0]
        for old in names:
            ir.SymbolTable.replace_all_symbol_uses(old, prefix + old, module.operation)
        texts = []
        for op, old in zip(functions, names):
            op.attributes["sym_name"] = ir.StringAttr.get(prefix + old)
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            # Argument and result attributes (shardings, layouts, result names) belong to
            # the entry point of JAX's own program, not to a function called in ours.
            for attribute in ("arg_attrs", "res_attrs"):
                if attribute in op.attributes:
                    del op.attributes[attribute]
            texts.append(op.operation.get_asm(print_generic_op_form=True, enable_debug_info=False))
    return torch_tpu._C._kernels.Callee(prefix + main, "\n".join(texts) + "\n")
