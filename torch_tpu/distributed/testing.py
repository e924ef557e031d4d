"""Run a torch.distributed program with one thread per rank in this process.

Each rank is a thread with its own process-group world (PyTorch's thread-local world, as
in its ``MultiThreadedTestCase``) and its own device ``tpu:rank``, so the ranks of the
``"tpu"`` backend reach each other through the xla collective engine: real XLA
collectives, run by the CPU plugin across its devices, with no TPU.

>>> def step(rank):
...     t = torch.full((4,), float(rank), device="tpu")
...     dist.all_reduce(t)
...     return t.cpu()
>>> run_threaded(step, world_size=4)  # doctest: +SKIP
[tensor([6., 6., 6., 6.]), ...]

Threads cannot be killed: a rank that hangs past ``timeout`` makes ``run_threaded`` raise
``TimeoutError`` naming it, and the thread is left behind (a daemon).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["run_threaded"]

# One threaded run at a time: the thread-local world replaces c10d's process-wide one.
_lock = threading.Lock()


def _forget_active_ddp_module() -> None:
    """DDP's forward saves and restores a class-wide "active module" that Dynamo reads;
    rank threads interleaving forwards can leave one set, which would make every later
    torch.compile in the process split graphs for that stale module."""
    from torch.nn.parallel import DistributedDataParallel

    DistributedDataParallel._active_ddp_module = None


def _key_fake_tensor_cache_by_device() -> Callable:
    """Fake tensors' dispatch cache is process-wide and its key omits the current device,
    so a rank's ``torch.empty(..., device="tpu")`` under a FakeTensorMode (DTensor's
    sharding propagation makes its fakes that way) would get a cached fake on another
    rank's device. Adds the current device to the key; returns the method it replaced.
    (Turning the cache off is no way out: Dynamo's config overrides are per thread, and
    autograd's device threads would not see one.)"""
    from torch._subclasses.fake_tensor import FakeTensorMode, _DispatchCacheKey

    original = FakeTensorMode._cache_key

    def _cache_key(self, state, func, args, kwargs):
        key = original(self, state, func, args, kwargs)
        return _DispatchCacheKey((*key.key, ("tpu", torch.tpu.current_device())))

    FakeTensorMode._cache_key = _cache_key
    return original


def run_threaded(
    fn: Callable[..., Any],
    world_size: int | None = None,
    *args: Any,
    backend: str = "tpu",
    timeout: float = 120.0,
) -> list[Any]:
    """Calls ``fn(rank, *args)`` on ``world_size`` threads (default: every tpu device),
    each rank a member of a fresh default process group of ``backend`` on ``tpu:rank``;
    returns the results by rank and raises the first rank's exception."""
    count = torch.tpu.device_count()
    world_size = count if world_size is None else world_size
    if not 1 <= world_size <= count:
        raise ValueError(
            f"run_threaded: world_size={world_size}, but this process has {count} tpu "
            "device(s) and each rank needs its own (TORCH_TPU_CPU_DEVICES sets how many "
            "the CPU platform has)"
        )
    if dist.is_initialized():
        raise RuntimeError("run_threaded: a default process group already exists here")
    # Dynamo registers entry-point backends on first lookup, and two threads doing it
    # at once collide ("duplicate name: tpu"): look ours up before the ranks start.
    from torch._dynamo.backends.registry import lookup_backend
    from torch.testing._internal.distributed import multi_threaded_pg

    lookup_backend("tpu")
    store = dist.HashStore()
    results: list[Any] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size

    def rank_main(rank: int) -> None:
        try:
            torch.tpu.set_device(rank)
            dist.init_process_group(
                backend,
                rank=rank,
                world_size=world_size,
                store=store,
                timeout=timedelta(seconds=timeout),
            )
            try:
                results[rank] = fn(rank, *args)
            finally:
                dist.destroy_process_group()
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            errors[rank] = error

    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    with _lock:
        # Process groups are registered by name per thread (functional collectives look
        # them up), as each thread's world names its groups alike.
        torch._C._distributed_c10d._set_thread_isolation_mode(True)
        multi_threaded_pg._install_threaded_pg()
        # DTensor's sharding propagation runs ops on fake tensors: serialized across
        # rank threads, as PyTorch's threaded DTensor tests do (DTensorOpTestBase.setUp),
        # and cached by device (the cache would hand one rank another rank's device).
        fake_mode_lock = ShardingPropagator._fake_mode_lock
        ShardingPropagator._fake_mode_lock = threading.Lock()
        cache_key = _key_fake_tensor_cache_by_device()
        try:
            threads = [
                threading.Thread(target=rank_main, args=(r,), name=f"rank{r}", daemon=True)
                for r in range(world_size)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout)
            stuck = [r for r, t in enumerate(threads) if t.is_alive()]
        finally:
            ShardingPropagator._fake_mode_lock = fake_mode_lock
            FakeTensorMode._cache_key = cache_key
            _forget_active_ddp_module()
            multi_threaded_pg._uninstall_threaded_pg()
            torch._C._distributed_c10d._set_thread_isolation_mode(False)
    # A rank that failed usually leaves the others waiting for it: its error comes first.
    for rank, error in enumerate(errors):
        if error is not None:
            error.add_note(f"(raised on rank {rank} of run_threaded)")
            if stuck:
                error.add_note(f"(ranks {stuck} were still waiting after {timeout} s)")
            raise error
    if stuck:
        raise TimeoutError(f"run_threaded: ranks {stuck} did not finish within {timeout} s")
    return results
