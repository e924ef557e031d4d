"""The compile cache: compiled programs in memory and on disk.

Every program torch_tpu runs (eager per-op programs and fused graphs) is compiled
once per process and kept in memory. Compiled executables are also written to a
directory, so a restarted process loads them instead of compiling again:

- ``TORCH_TPU_CACHE_DIR``: the directory (default ``$XDG_CACHE_HOME/torch_tpu`` or
  ``~/.cache/torch_tpu``); empty or ``off`` keeps the cache in memory only.
- ``TORCH_TPU_CACHE_MAX_BYTES``: the directory's size cap (default ``2G``; a number of
  bytes, or with a K, M, G or T suffix); the least recently used entries are evicted.
- ``TORCH_TPU_LOG_RECOMPILES=1``: one line on stderr for every real compile, saying
  why (a new op, new shapes, dtypes or layout, a new graph structure) and what differs
  from the nearest earlier program of the same op or graph.

Entries are keyed by the program text, the compile options, the plugin's identity
and version and torch_tpu's version; writes are atomic, so processes may share a
directory; a damaged or foreign entry is deleted and the program compiled again.

>>> stats = torch_tpu.cache.stats()
>>> sorted(stats)  # doctest: +NORMALIZE_WHITESPACE
['bytes', 'corrupt', 'directory', 'entries', 'evictions', 'hits', 'max_bytes', 'misses',
 'writes']
"""

from __future__ import annotations

import torch_tpu
from torch_tpu import _C


def directory() -> str | None:
    """The disk cache's directory, or None when the cache is in memory only.

    >>> torch_tpu.cache.directory()  # doctest: +SKIP
    '/home/me/.cache/torch_tpu'
    """
    return _C._cache_info()["directory"]


def stats() -> dict:
    """The disk cache now: ``directory`` (None if off), ``entries`` and ``bytes`` in it,
    ``max_bytes`` (its cap), and this process's counts since the last
    ``torch_tpu.metrics.reset()``: ``hits`` (executables loaded instead of compiled),
    ``misses``, ``writes``, ``evictions`` and ``corrupt`` (entries rejected and deleted).

    >>> torch_tpu.cache.stats()["hits"] >= 0
    True
    """
    info = _C._cache_info()
    counts = _C._metrics_snapshot()
    return {
        "directory": info["directory"],
        "entries": info["entries"],
        "bytes": info["bytes"],
        "max_bytes": info["max_bytes"],
        "hits": counts["disk_hits"],
        "misses": counts["disk_misses"],
        "writes": counts["disk_writes"],
        "evictions": counts["disk_evictions"],
        "corrupt": counts["disk_corrupt"],
    }


def clear() -> None:
    """Forgets every compiled program: those in memory and the disk cache's entries.
    Later programs compile again (and are cached again).

    >>> torch_tpu.cache.clear()
    >>> torch_tpu.cache.stats()["entries"]
    0
    """
    _C._cache_clear()


def _configure(directory: str | None, max_bytes: int | None = None) -> None:
    """Points the disk cache at ``directory`` (None: memory only) with a cap of
    ``max_bytes``; what the environment variables set at import."""
    if max_bytes is None:
        max_bytes = _C._cache_settings_from_environment()[1]
    _C._cache_configure(directory or "", max_bytes, torch_tpu.__version__)


def _configure_from_environment() -> None:
    directory, max_bytes = _C._cache_settings_from_environment()
    _configure(directory, max_bytes)


def _log_recompiles(enabled: bool) -> bool:
    """Switches the recompile log (``TORCH_TPU_LOG_RECOMPILES``); returns the old setting."""
    old = _C._get_log_recompiles()
    _C._set_log_recompiles(enabled)
    return old
