"""Compile-only targets: compile torch_tpu's programs for TPUs and NVIDIA GPUs without one.

libtpu (``pip install libtpu``) and the CUDA plugin (``pip install jax-cuda13-pjrt``, with
``ptxas`` from ``nvidia-cuda-nvcc``) compile StableHLO for a chip and topology that need not be
present. A target answers: does this program compile for a v6e / a TPU7x slice / an H100, how
much memory does it need there, how many flops and bytes (TPU). Nothing runs on it.

>>> import torch, torch_tpu, torch_tpu.targets as targets
>>> with targets.also_compile_for("v6e:1x1", "h100") as check:  # doctest: +SKIP
...     (torch.randn(64, 64, device="tpu") @ torch.randn(64, 64, device="tpu")).sum().item()
>>> [r["compiled"] for r in check.results()]  # doctest: +SKIP
[True, True, True, True]

``TORCH_TPU_ALSO_COMPILE_FOR=v6e:1x1,h100`` does the same for a whole process, and
``python -m torch_tpu.target_check --target v6e:1x1 script.py`` runs a script that way and
prints a table per target.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
import warnings
from dataclasses import dataclass

from torch_tpu._runtime.plugin import tpu_present
from torch_tpu.targets.chips import CHIPS, Chip, TargetName, TargetNameError, parse, valid_names
from torch_tpu.targets.gpu_config import target_config

__all__ = [
    "CHIPS",
    "Chip",
    "Target",
    "TargetNameError",
    "TargetUnavailableError",
    "also_compile_for",
    "compile_for",
    "load",
    "parse",
    "valid_names",
]

# Pinned in scripts/setup.sh --test: the versions these targets were checked with.
_PACKAGES = {
    "tpu": ("libtpu", "libtpu.so", "libtpu==0.0.51"),
    "cuda": ("jax_plugins.xla_cuda13", "xla_cuda_plugin.so", "jax-cuda13-pjrt==0.10.2"),
}
_PTXAS_PACKAGE = "nvidia-cuda-nvcc==13.0.88"


class TargetUnavailableError(RuntimeError):
    """The compiler a target needs is not installed; the message names the pip package."""


def _package_file(module: str, filename: str) -> str | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, filename)
        if os.path.isfile(path):
            return path
    return None


def plugin_path(platform: str) -> str:
    """The installed plugin that compiles for ``platform`` ("tpu" or "cuda")."""
    module, library, package = _PACKAGES[platform]
    path = _package_file(module, library)
    if path is None:
        raise TargetUnavailableError(
            f"compiling for {platform} targets needs {library} from the Python package {module}, "
            f"which is not installed: pip install {package}"
        )
    return path


def cuda_data_dir() -> str:
    """The folder holding ``bin/ptxas`` (PyPI's nvidia-cuda-nvcc): the GPU plugin has no PTX
    compiler of its own."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cuda_nvcc"):
            folder = os.path.join(root, sub)
            if os.access(os.path.join(folder, "bin", "ptxas"), os.X_OK):
                return folder
    raise TargetUnavailableError(
        "compiling for NVIDIA targets needs ptxas, which is not installed: "
        f"pip install {_PTXAS_PACKAGE}"
    )


@dataclass
class Target:
    """A loaded target: its checked ``name`` and the plugin's topology (``topology``)."""

    name: TargetName
    topology: object  # torch_tpu._C._Topology
    extra_options: bytes  # compile-option overrides every compile for it adds
    # Overrides for a second try where the first compile fails, and what they are: on a GPU
    # XLA autotunes its Triton GEMM tilings and falls back to cuBLAS; without one it tries
    # only the default tiling, which some shapes refuse ("Couldn't find output tile sizes").
    fallback_options: bytes = b""
    fallback_name: str = ""

    @property
    def chip(self) -> Chip:
        return self.name.chip

    def devices(self) -> list[dict]:
        """The topology's devices: id, kind, and (TPU) ``coords`` and ``core_on_chip``."""
        return self.topology.devices()

    def compile(self, mlir: str, replicas: int = 1, device_ids: list[int] | None = None):
        """Compiles one StableHLO program; raises RuntimeError with the compiler's message.

        A program of ``replicas`` > 1 (a collective's) runs replica r on device
        ``device_ids[r]`` (default: the target's first ``replicas`` devices).
        Returns a ``_CompiledProgram``: ``memory()``, ``cost_analysis()``, ``serialize()``.
        """
        from torch_tpu import _C

        if device_ids is not None:
            replicas = len(device_ids)
            known = {d["id"] for d in self.devices()}
            unknown = [i for i in device_ids if i not in known]
            if unknown or len(set(device_ids)) != len(device_ids):
                raise ValueError(
                    f"device ids {list(device_ids)} are not distinct devices of "
                    f"{self.name.text} (ids 0..{len(known) - 1})"
                )
        if replicas <= 1:
            options = _C._portable_compile_options()
        else:
            ids = list(device_ids) if device_ids is not None else [d["id"] for d in self.devices()]
            if len(ids) < replicas:
                raise ValueError(
                    f"{self.name.text} has {len(ids)} devices; the program spans {replicas}"
                )
            options = _C._replicated_compile_options(ids[:replicas])
        try:
            return self.topology.compile(mlir, options + self.extra_options)
        except RuntimeError as first:
            if not self.fallback_options:
                raise
            try:
                program = self.topology.compile(
                    mlir, options + self.extra_options + self.fallback_options
                )
            except RuntimeError:
                raise first from None
            why = str(first).splitlines()[0]
            warnings.warn(f"compiled with {self.fallback_name} after: {why}", stacklevel=2)
            return program


_loaded: dict[str, Target] = {}
_lock = threading.Lock()


def _prepare_libtpu_environment() -> None:
    # Compile-only use must never ask the cloud metadata server for TPU settings (30 tries a
    # variable without a TPU), and must not take libtpu's one-process lock: a check runs beside
    # test workers, ranks or a job that also loaded it.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    if not tpu_present():
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
        # Without these libtpu looks for the TPU VM it runs on and logs that it found none;
        # they change nothing of a compile-only topology, which names its own chip.
        os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
        os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v6e-1")


def load(text: str) -> Target:
    """The target named ``text`` ("v6e:2x2", "h100"), loading its compiler on first use.

    Raises TargetNameError for a bad name, TargetUnavailableError where its compiler is missing.
    """
    from torch_tpu import _C

    name = parse(text)
    key = f"{name.chip.name}:{name.topology}"
    with _lock:
        if key in _loaded:
            return _loaded[key]
        if name.chip.platform == "tpu":
            path = plugin_path("tpu")
            _prepare_libtpu_environment()
            topology = _C._Topology(path, key, [])
            extra = fallback = b""
            fallback_name = ""
        else:
            path = plugin_path("cuda")
            data_dir = cuda_data_dir()
            # Both options are strings: an int64 "topology" aborts the plugin.
            options = [
                ("topology", name.topology),
                ("target_config", target_config(name.chip.name)),
            ]
            topology = _C._Topology(path, key, options)
            extra = _C._string_option_override("xla_gpu_cuda_data_dir", data_dir)
            fallback = _C._bool_option_override("xla_gpu_enable_triton_gemm", False)
            fallback_name = "cuBLAS GEMMs (no GPU to autotune Triton GEMM tilings on)"
        target = Target(name, topology, extra, fallback, fallback_name)
        _loaded[key] = target
        return target


def compile_for(text: str, mlir: str, replicas: int = 1):
    """Compiles one StableHLO program for target ``text``; see Target.compile.

    >>> program = compile_for("v6e:1x1", mlir_text)  # doctest: +SKIP
    >>> program.memory()["peak"], program.cost_analysis()["flops"]  # doctest: +SKIP
    """
    return load(text).compile(mlir, replicas)


class Check:
    """The programs this process compiled, checked for each target (``also_compile_for``)."""

    def __init__(self, targets: list[Target]):
        self.targets = targets
        self._final: list[dict] | None = None

    def results(self) -> list[dict]:
        """Waits for the programs queued so far, then one dict per program and target:
        target, label, compiled, error, memory (bytes), costs, seconds, replicas, dump_path,
        uses (how often the process loaded the program)."""
        from torch_tpu import _C

        if self._final is not None:
            return self._final
        return _C._target_check_results()

    def finish(self) -> list[dict]:
        """The results, then stops checking."""
        self._final = self.results()
        stop()
        return self._final


def start(texts, warm_cache: str | None = None) -> Check:
    """Checks every program this process compiles from now on for the targets ``texts``;
    with ``warm_cache``, also stores each compiled program in that compile-cache folder
    under the key the runtime on the target's platform looks up."""
    import torch_tpu
    from torch_tpu import _C

    targets = []
    for text in texts:
        target = load(text)  # one per chip and topology, however spelled
        if all(t is not target for t in targets):
            targets.append(target)
    # Programs this process already holds would not be compiled again, so not seen.
    _C._cache_clear_memory()
    if warm_cache:
        os.makedirs(warm_cache, exist_ok=True)
    _C._target_check_set(
        [
            (
                t.name.text,
                t.topology,
                t.extra_options,
                t.fallback_options,
                t.fallback_name,
                warm_cache or "",
                torch_tpu.__version__,
            )
            for t in targets
        ]
    )
    return Check(targets)


def stop() -> None:
    """Stops checking (results so far are dropped)."""
    from torch_tpu import _C

    _C._target_check_set([])


@contextlib.contextmanager
def also_compile_for(*texts: str, warm_cache: str | None = None):
    """Within the block, every program torch_tpu compiles is also compiled for each target.

    The programs already loaded are dropped from memory first, so each one the block runs is
    compiled (or read from the disk cache) again and seen. Checking the accelerator's programs needs
    ``TORCH_TPU_XLA_CPU_SHORTCUTS=0`` on the CPU platform (set it before ``import torch_tpu``),
    otherwise programs that call XLA:CPU host kernels are refused by every target.
    """
    check = start(texts, warm_cache)
    try:
        yield check
    finally:
        check.finish()
