"""Warm starts for ``torch.compile(backend="tpu")``: PyTorch's AOTAutograd cache.

A fresh process that compiles the same code with the same input signature loads the
result of AOTAutograd (the functionalized, partitioned forward and backward graphs and
the runtime wrappers around them) from PyTorch's AOTAutograd cache instead of tracing
and partitioning again, and each graph's XLA program comes from torch_tpu's own disk
cache (``TORCH_TPU_CACHE_DIR``). Dynamo still traces the Python code and checks guards.

The cache entry holds each graph as a ``GraphCode``: the FX graph's nodes only; the
graph's runner (program, replay plan) is rebuilt lazily on its first call, as on a
normal compile. Entries live under PyTorch's cache directory
(``$TORCHINDUCTOR_CACHE_DIR/aotautograd``, default ``/tmp/torchinductor_$USER``),
keyed by PyTorch (the Dynamo graph, the inputs' shapes, dtypes, strides and devices,
grad and autocast state, the configs, the torch version) plus a salt of torch_tpu's own:
its version, a hash of its sources and extension, its platform and its decomposition
table, so a rebuilt torch_tpu never loads an entry traced by another.

- Opt in with ``TORCH_TPU_AOT_CACHE=1``. It is off by default because it does not pay
  yet: on the GPT training step (``python bench/compile.py --sections warmstart``) a warm
  process reached its first step 8% sooner (2.90 s against 3.15 s) while a cold one took
  21% longer (6.08 s against 5.01 s): PyTorch's cache key costs about 1.6 s per process
  (it imports Inductor's code generators and hashes the triton and torch installs), and
  Dynamo's tracing, which the cache does not skip, is most of a warm start.
  PyTorch's own switches (``TORCHINDUCTOR_AUTOGRAD_CACHE=0``,
  ``TORCHINDUCTOR_FX_GRAPH_CACHE=0``, ``torch.compiler.config.force_disable_caches``)
  turn it off too.
- A graph the cache cannot take (PyTorch bypasses it, an entry fails to load or to
  save) compiles as usual; the first such case in a process is noted once, with why.

``torch._dynamo.utils.counters["aot_autograd"]`` counts ``autograd_cache_hit``,
``autograd_cache_miss``, ``autograd_cache_saved`` and ``autograd_cache_bypass``.

>>> step = torch.compile(step, backend="tpu")  # doctest: +SKIP
>>> step()  # a second process: autograd_cache_hit  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
from torch._inductor.output_code import OutputCode

from torch_tpu.compile.decompositions import decompositions
from torch_tpu.compile.runner import graph_runner

_SALT_ATTRIBUTE = "_torch_tpu_aot_cache_salt"
# Where PyTorch says why its cache skipped a graph or could not load or save an entry.
_TORCH_LOGGERS = ("torch._functorch._aot_autograd.autograd_cache", "torch._inductor.codecache")
_COUNTS = ("autograd_cache_hit", "autograd_cache_miss", "autograd_cache_saved")
_noted = False


def enabled() -> bool:
    """Whether the tpu backend uses PyTorch's AOTAutograd cache (``TORCH_TPU_AOT_CACHE=1``;
    off by default).

    >>> torch_tpu.compile.aot_cache.enabled()  # doctest: +SKIP
    False
    """
    return os.environ.get("TORCH_TPU_AOT_CACHE", "0").strip() == "1"


class GraphCode(OutputCode):
    """One compiled AOTAutograd graph of the tpu backend, as AOTAutograd's cache stores
    it: the FX graph, whether it is a backward, and the forward's ``spmd_safe`` record
    it shares with its backward. Callable with a list of inputs.

    >>> code = GraphCode(gm, None, is_backward=False)  # doctest: +SKIP
    >>> outputs = code([x, y])  # doctest: +SKIP
    """

    def __init__(
        self, gm: torch.fx.GraphModule, spmd: Any, is_backward: bool, dynamic: Any = None
    ) -> None:
        super().__init__()
        self._gm: torch.fx.GraphModule | None = gm
        self._graph: bytes | None = None
        self._spmd = spmd
        self._is_backward = is_backward
        self._dynamic = dynamic  # bucketed.DynamicState, shared with the backward
        self._boxed_call = True
        self._run: Callable[[list[Any]], Any] | None = None

    def prepare(self) -> None:
        """Builds the runner now (a forward's bucket plan is read by its backward)."""
        if self._run is None:
            assert self._gm is not None, "post_compile() loads a cached graph first"
            self._run = graph_runner(self._gm, self._spmd, self._is_backward, self._dynamic)

    def __call__(self, inputs: Sequence[Any]) -> Any:
        self.prepare()
        return self._run(inputs)  # type: ignore[misc]

    def prepare_for_serialization(self) -> None:
        # GraphModule's own pickling keeps only the code and traces it again on load,
        # which runs calls without tensor inputs (aten.arange, say) and bakes their
        # results in as constants; GraphPickler keeps the graph's nodes. Node metadata
        # (fake tensors, stacks) is dropped: running the graph does not read it. Called on
        # a shallow copy, so the live graph keeps its runner.
        from torch.fx._graph_pickler import GraphPickler, Options

        assert self._gm is not None
        options = Options(ops_filter=None, node_metadata_key_filter=lambda key: False)
        self._graph = GraphPickler.dumps(self._gm, options)
        self._gm = None
        self._run = None

    def post_compile(
        self, example_inputs: Sequence[Any], constants: Any, graph_kwargs: Any
    ) -> None:
        if self._gm is not None:
            return
        from torch._guards import detect_fake_mode
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler

        # Here, not at the first call: AOTAutograd counts a failure here as a cache
        # bypass and compiles the graph instead.
        assert self._graph is not None
        fake_mode = detect_fake_mode(example_inputs) or FakeTensorMode()
        gm = GraphPickler.loads(self._graph, fake_mode)
        assert isinstance(gm, torch.fx.GraphModule)
        gm.recompile()
        self._gm = gm

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        pass

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_run"] = None
        state["_dynamic"] = None  # a loaded graph has no fake tensors to bucket by
        return state


def serializable(
    fw_compiler: Callable[..., GraphCode], bw_compiler: Callable[..., GraphCode]
) -> tuple[SerializableAOTDispatchCompiler, SerializableAOTDispatchCompiler]:
    """The forward and backward compilers in the form AOTAutograd looks up and saves in
    its cache (it only does for compilers that say their output is serializable)."""
    return (
        SerializableAOTDispatchCompiler(GraphCode, fw_compiler),
        SerializableAOTDispatchCompiler(GraphCode, bw_compiler),
    )


def _files() -> Iterator[str]:
    import torch_tpu
    from torch_tpu import _C

    root = os.path.dirname(os.path.abspath(torch_tpu.__file__))
    yield os.path.abspath(_C.__file__)
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


@functools.cache
def salt() -> str:
    """What torch_tpu adds to PyTorch's cache key: a hash of torch_tpu's version, sources
    and extension, its platform and its decomposition table. PyTorch's key does not cover
    the backend: these decide which ATen graph AOTAutograd traces for the tpu device.

    >>> len(torch_tpu.compile.aot_cache.salt())  # doctest: +SKIP
    64
    """
    import torch_tpu

    digest = hashlib.sha256()
    digest.update(f"{torch_tpu.__version__}\0{torch_tpu.platform()}\0".encode())
    for op in sorted(str(op) for op in decompositions()):
        digest.update(op.encode() + b"\0")
    root = os.path.dirname(os.path.abspath(torch_tpu.__file__))
    for path in _files():
        # The file's place too: entries pickle classes by module path (GraphCode, the
        # runner's SpmdSafeForward), so a moved module must not load an older entry.
        digest.update(os.path.relpath(path, root).encode() + b"\0")
        with open(path, "rb") as file:
            digest.update(hashlib.sha256(file.read()).digest())
    return digest.hexdigest()


class _Reasons(logging.Handler):
    """Collects why PyTorch's cache skipped, failed to load or failed to save a graph:
    PyTorch says so only in its log."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "Bypassing" in message or "unable to" in message:
            if record.exc_info and record.exc_info[1] is not None:
                message = f"{message}: {record.exc_info[1]!r}"
            self.reasons.append(message.splitlines()[0])


@contextlib.contextmanager
def _collect_reasons() -> Iterator[_Reasons]:
    handler = _Reasons()
    saved = []
    for name in _TORCH_LOGGERS:
        logger = logging.getLogger(name)
        quiet = not logger.isEnabledFor(logging.INFO)
        saved.append((logger, quiet, logger.level, logger.propagate))
        if quiet:
            # The reasons become one note instead of PyTorch's warnings and tracebacks.
            logger.setLevel(logging.INFO)
            logger.propagate = False
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger, quiet, level, propagate in saved:
            logger.removeHandler(handler)
            if quiet:
                logger.setLevel(level)
                logger.propagate = propagate


def _note(reason: str) -> None:
    global _noted
    if _noted:
        return
    _noted = True
    warnings.warn(
        f"torch_tpu: a graph did not go through PyTorch's AOTAutograd cache ({reason}); "
        "it was compiled as usual. TORCH_TPU_AOT_CACHE=0 turns the cache off.",
        stacklevel=1,
    )


@contextlib.contextmanager
def scope(gm: torch.fx.GraphModule) -> Iterator[None]:
    """Around the tpu backend's AOTAutograd call for Dynamo graph `gm`: lets AOTAutograd
    look the graph up in its cache and save it there.

    Bundled entries hold the ``GraphCode`` itself (not an Inductor FX-graph-cache key), and
    the backward is compiled now, not at the first backward call, so that the entry is
    saved while this scope holds; compiling it is cheap here (``GraphCode`` is lazy).
    Dynamo compiles under one lock, so the config patch is not raced by other threads.

    >>> with scope(gm):  # doctest: +SKIP
    ...     compiled = aot_autograd(...)(gm, example_inputs)
    """
    try:
        setattr(gm, _SALT_ATTRIBUTE, salt())
    except Exception as error:  # noqa: BLE001 - the cache is an optimization
        _note(f"torch_tpu's cache key could not be made: {error}")
        yield
        return
    aot = counters["aot_autograd"]
    before = {name: aot[name] for name in (*_COUNTS, "autograd_cache_bypass")}
    patch = torch._functorch.config.patch(
        bundled_autograd_cache=True, force_non_lazy_backward_lowering=True
    )
    try:
        with patch, _collect_reasons() as log:
            yield
    finally:
        delattr(gm, _SALT_ATTRIBUTE)
    counted = {name: aot[name] - before[name] for name in before}
    if counted["autograd_cache_hit"]:
        return  # whatever else PyTorch met on the way, the graph was loaded
    if log.reasons:
        _note(log.reasons[0])
    elif counted["autograd_cache_bypass"]:
        _note("PyTorch bypassed its cache")
    elif counted["autograd_cache_miss"] and not counted["autograd_cache_saved"]:
        _note("the entry was not saved")
