"""Counters of what the tpu runtime did: compiles, program-cache hits, executions,
transfers, native ops and CPU fallbacks (by operator).

>>> torch_tpu.metrics.reset()
>>> y = torch.ones(3, device="tpu") + 1
>>> torch_tpu.metrics.snapshot()["executions"] >= 1
True
"""

from __future__ import annotations

from torch_tpu import _C


def snapshot() -> dict:
    """A copy of the counters: compiles (real XLA compiles only), cache_hits (programs
    found in memory), executions, host_to_device, device_to_host (of them,
    asynchronous_copies: non_blocking=True copies with pinned memory, which return before
    the data moved), compile_seconds, the disk cache's disk_hits, disk_misses, disk_writes,
    disk_evictions and disk_corrupt (see torch_tpu.cache), native_ops and cpu_fallbacks
    (dicts op -> calls); for the eager modes prepared_runs and prepared_records (calls that
    skipped lowering), tier_ups and pinned_programs; for defer_and_fuse fused_graphs,
    fused_ops, fused_reuses (graphs that reused an earlier graph's executable) and
    early_cuts (graphs run early because the host had waited for the device; see the
    README, "Eager modes"). ``compiled_graphs``: per graph of torch.compile(backend="tpu")
    (by label), the programs built for it, the size buckets it met (graphs with dynamic
    sizes), calls run padded to a bucket or at exact sizes, and why a graph with
    dynamic sizes is not bucketed ("" when it is)."""
    from torch_tpu.compile import bucketed

    counters = _C._metrics_snapshot()
    counters["compiled_graphs"] = bucketed.snapshot()
    return counters


def reset() -> None:
    """Sets every counter back to zero (compiled programs stay cached)."""
    from torch_tpu.compile import bucketed

    _C._metrics_reset()
    bucketed.reset()
