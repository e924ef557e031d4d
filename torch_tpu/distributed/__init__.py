"""torch.distributed on tpu: torch_tpu's c10d backend, registered at ``import torch_tpu``.

The backend is called ``"tpu"`` and ``"tpu_dist"`` (one backend, two names; TorchTPU's
name is the device's default) and serves tpu and cpu tensors. It is the default for the
device, so ``init_process_group()`` and ``init_device_mesh("tpu", ...)`` pick it; under
torchrun each rank uses its own device (``tpu:LOCAL_RANK``).

>>> import torch.distributed as dist
>>> dist.init_process_group("tpu")  # doctest: +SKIP
>>> t = torch.ones(4, device="tpu")
>>> dist.all_reduce(t)  # doctest: +SKIP

Two collective engines move tpu tensors (``engine_name()`` says which serves a group):

- ``"xla"``: XLA collectives. Each collective is a small StableHLO program replicated over
  the group's devices, which every rank launches on its own device; the plugin moves
  the data device to device. On the CPU plugin it serves ranks that share one process
  (one thread per rank, each on its own device: ``torch_tpu.distributed.testing``).
  Ranks in separate processes use it where their PJRT client is multi-process (torchrun
  on the tpu and cuda platforms: see ``torch_tpu._runtime.job``): device ids are then global.
- ``"host_staging(gloo)"``: device data staged through host memory and reduced by gloo.
  Ranks in separate processes on the CPU plugin use it (that plugin runs no XLA
  collectives across processes), and the xla engine hands it cpu tensors and what has
  no XLA collective (barrier, gather, scatter, send/recv, all_to_all with uneven splits).

Each eager collective is its own program by default, in every eager mode, so ranks that
record different ops around a collective can never deadlock inside one fused program.
``spmd_safe`` (a decorator or context manager) promises that every rank runs the same
ops: defer_and_fuse and ``torch.compile(backend="tpu")`` then fuse the xla engine's
collectives into the program around them (one program per step and rank).

``TORCH_TPU_COLLECTIVES`` chooses: ``auto`` (default: xla where every rank of the group
has a device of its own that this process's client can join, otherwise host staging),
``xla`` (an error where it cannot serve the group) or ``host``.
``TORCH_TPU_DIST_CHECK=0`` skips the per-collective agreement check (a small exchange
that turns mismatched shapes, dtypes or collectives across ranks into an error instead
of a hang or a crash inside gloo).
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch
import torch.distributed as dist

from torch_tpu import _C

BACKEND_NAMES = ("tpu", "tpu_dist")

from torch_tpu.distributed.topology import topology_aware_mesh  # noqa: E402

__all__ = [
    "BACKEND_NAMES",
    "ENGINES",
    "engine_name",
    "is_tpu_backend",
    "spmd_safe",
    "topology_aware_mesh",
]


@contextlib.contextmanager
def _spmd_safe_scope():
    previous = _C._spmd_safe()
    _C._set_spmd_safe(True)
    try:
        yield
    finally:
        _C._set_spmd_safe(previous)


def spmd_safe(fn=None):
    """Lets defer_and_fuse and compiled graphs fuse collectives (xla engine) with the ops
    around them, on this thread: every rank must then run the same ops in the same order.

    >>> @torch_tpu.distributed.spmd_safe
    ... def step(x):
    ...     return fc.all_reduce(x * 2, "sum", group) + 1
    >>> with torch_tpu.distributed.spmd_safe():  # doctest: +SKIP
    ...     step(x)
    """
    if fn is None:
        return _spmd_safe_scope()

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _spmd_safe_scope():
            return fn(*args, **kwargs)

    return wrapper


def _check_agreement() -> bool:
    return os.environ.get("TORCH_TPU_DIST_CHECK", "1").strip() not in ("0", "false", "off")


ENGINES = ("auto", "xla", "host")


def _engine_choice() -> str:
    text = os.environ.get("TORCH_TPU_COLLECTIVES", "").strip().lower() or "auto"
    if text not in ENGINES:
        raise ValueError(f"TORCH_TPU_COLLECTIVES={text!r}: expected one of {', '.join(ENGINES)}")
    return text


def _xla_devices(gloo, rank: int, size: int) -> tuple[list[int], int, str]:
    """The PJRT device id of every rank of the group and this rank's device index, or
    ([], -1, why) when XLA collectives cannot join the group's ranks."""
    device = _C._current_device()
    mine = torch.tensor(
        [os.getpid(), device, _C._device_properties(device)["id"]], dtype=torch.int64
    )
    everyone = [torch.empty_like(mine) for _ in range(size)]
    gloo.allgather([everyone], [mine]).wait()
    records = [(int(r[0]), int(r[2])) for r in everyone]
    devices, why_not = xla_device_ids(records, _cross_process_client())
    return devices, (device if devices else -1), why_not


def _cross_process_client() -> str:
    """Why this process's PJRT client cannot run XLA collectives with other processes,
    or "" where it can (a multi-process client of a plugin that spans processes)."""
    from torch_tpu import _PLATFORM
    from torch_tpu._runtime import job as _job

    if _PLATFORM not in _job.MULTI_PROCESS_PLATFORMS:
        return f"the {_PLATFORM} plugin runs no XLA collectives across processes"
    if not _C._job_info()["multi_process"]:
        return (
            "this process's PJRT client is not a multi-process one (start the job with "
            "torchrun, and leave TORCH_TPU_MULTIPROCESS_CLIENT at auto or 1)"
        )
    return ""


def xla_device_ids(records: list[tuple[int, int]], cross_process_why_not: str = ""):
    """(device ids by rank, "") from each rank's (pid, PJRT device id), or ([], why)
    where XLA collectives cannot join those ranks: ranks in separate processes whose
    client does not span processes (``cross_process_why_not`` says why), or ranks that
    share a device.

    >>> xla_device_ids([(7, 0), (7, 1)])
    ([0, 1], '')
    """
    if len({pid for pid, _ in records}) > 1 and cross_process_why_not:
        return [], f"the group's ranks are in separate processes and {cross_process_why_not}"
    devices = [device for _, device in records]
    if len(set(devices)) < len(devices):
        return [], (
            f"ranks share devices (device ids by rank: {devices}): give each rank its "
            "own device with torch.tpu.set_device before init_process_group"
        )
    return devices, ""


def _create_backend(options, backend_options=None):
    """c10d's creator (extended API): one call per process group, DeviceMesh dims included."""
    store = dist.PrefixStore("torch_tpu/gloo/", options.store)
    rank, size = options.group_rank, options.group_size
    gloo = dist.ProcessGroupGloo(store, rank, size, options.timeout)
    choice = _engine_choice()
    device_ids, device = [], -1
    if choice == "xla" or (choice == "auto" and size > 1):
        device_ids, device, why_not = _xla_devices(gloo, rank, size)
        if not device_ids and choice == "xla":
            raise RuntimeError(f"TORCH_TPU_COLLECTIVES=xla cannot serve this group: {why_not}")
    return _C._distributed.create_backend(gloo, rank, size, _check_agreement(), device_ids, device)


def engine_name(group: dist.ProcessGroup | None = None) -> str:
    """The collective engine serving tpu tensors in ``group`` (default: the world).

    >>> torch_tpu.distributed.engine_name()  # doctest: +SKIP
    'host_staging(gloo)'
    """
    group = group or dist.distributed_c10d._get_default_group()
    return _C._distributed.engine_name(group._get_backend(torch.device("tpu")))


def is_tpu_backend(group: dist.ProcessGroup | None = None) -> bool:
    """Whether ``group``'s tpu tensors go through torch_tpu's backend."""
    try:
        engine_name(group)
    except (ValueError, RuntimeError):
        return False
    return True


def _register() -> None:
    if not dist.is_available():
        return
    for name in BACKEND_NAMES:
        if name.upper() in dist.Backend._plugins:
            continue
        # devices must be a list: torch 2.13 splits a string into characters.
        dist.Backend.register_backend(
            name, _create_backend, extended_api=True, devices=["tpu", "cpu"]
        )
    # TorchTPU maps the device to "tpu_dist"; code that looks the name up finds the same.
    dist.Backend.default_device_backend_map["tpu"] = "tpu_dist"
    _fix_default_backend_type()


def _fix_default_backend_type() -> None:
    """With no backend named, torch 2.13 marks every new group's default backend as GLOO
    (unless NCCL is in use) even when the device's backend is a plugin, so DDP's logger
    and ``_has_hooks`` look for a gloo backend that was never made ("Could not find
    backend type 1"). Mark such groups CUSTOM: their backend is ours."""
    c10d = dist.distributed_c10d
    original = c10d._new_process_group_helper
    if getattr(original, "_torch_tpu", False):
        return

    def new_process_group_helper(*args, **kwargs):
        pg, store = original(*args, **kwargs)
        if isinstance(pg, dist.ProcessGroup) and _marked_gloo_without_gloo(pg):
            pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return pg, store

    new_process_group_helper._torch_tpu = True
    c10d._new_process_group_helper = new_process_group_helper


def _marked_gloo_without_gloo(pg: dist.ProcessGroup) -> bool:
    """Whether torch marked ``pg`` GLOO though only our backend serves it (no cpu backend)."""
    if not is_tpu_backend(pg):
        return False
    try:
        pg._get_backend(torch.device("cpu"))
    except RuntimeError:
        return True
    return False


def _use_rank_device() -> None:
    """Under torchrun (LOCAL_RANK set) the rank's device is the current device of every
    thread that has not chosen one, so ``torch.device("tpu")`` is the rank's own."""
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is None or not local_rank.strip().isdigit():
        return
    count = _C._device_count()
    if count > 0:
        _C._set_process_device(int(local_rank) % count)
