"""The ATen decompositions the ``"tpu"`` backend hands AOTAutograd: PyTorch's core set
less the ops the tpu device runs itself. Apart from ``backend`` because the AOTAutograd
cache's key (``aot_cache.salt``) hashes the table too."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch


def _has_tpu_kernel(op: torch._ops.OpOverload) -> bool:
    # A CompositeExplicitAutograd kernel does not count: it may call an op that falls
    # back to the CPU (aten::mv calls aten::addmv.out).
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")


@functools.cache
def decompositions() -> dict[torch._ops.OpOverload, Callable]:
    """PyTorch's core ATen decompositions, except for ops the tpu device runs itself:
    decomposing an op that would fall back to the CPU keeps it inside the program.

    >>> torch.ops.aten.mm.default in torch_tpu.dynamo.decompositions()
    False
    """
    from torch._decomp import core_aten_decompositions

    return {
        op: fn
        for op, fn in core_aten_decompositions().items()
        if isinstance(op, torch._ops.OpOverload) and not _has_tpu_kernel(op)
    }
