"""What torch_tpu adapts when TorchTitan loads.

1. ``torch.distributed.set_timeout(timeout, group)``: TorchTitan 0.3.0 calls it after
   the first step (to shorten the timeout once compilation is done), but it is newer
   than torch 2.13. Where torch lacks it, it is provided: it sets the timeout of every
   backend of the group (ours and gloo support it).
2. The peak FLOP/s TorchTitan divides by for MFU. TorchTitan looks the peak up by
   device name in a table of GPUs and TPU chips; for a name it does not know (our CPU
   platform) it assumes an A100, which would make MFU on this machine meaningless. The
   tpu device's own figure (``torch.tpu.get_device_properties().peak_flops``: the chip's
   table value, or the rate measured on the CPU) is used instead whenever there is one.
"""

from __future__ import annotations

import math
import sys


def _patch_peak_flops() -> None:
    utils = sys.modules["torchtitan.tools.utils"]
    original = utils.get_peak_flops
    if getattr(original, "_torch_tpu", False):
        return

    def get_peak_flops(device_name: str) -> float:
        import torch

        if utils.device_type == "tpu" and device_name == torch.tpu.get_device_name():
            peak = torch.tpu.get_device_properties().peak_flops
            if not math.isnan(peak):
                return peak
        return original(device_name)

    get_peak_flops._torch_tpu = True
    utils.get_peak_flops = get_peak_flops


def _provide_set_timeout() -> None:
    import torch.distributed as dist

    from torch_tpu import _C

    if hasattr(dist, "set_timeout"):
        return

    def set_timeout(timeout, group=None) -> None:
        """Sets the timeout of every backend of ``group`` (default: the world)."""
        c10d = dist.distributed_c10d
        group = c10d._get_default_group() if group is None else group
        if c10d._rank_not_in_group(group):
            raise ValueError("set_timeout: this rank is not in the group")
        for device in group._device_types:
            _C._distributed.set_timeout(group._get_backend(device), timeout)

    dist.set_timeout = set_timeout


def install() -> None:
    from torch_tpu._runtime.import_hooks import after_import

    after_import("torchtitan.tools.utils", _patch_peak_flops)
    after_import("torchtitan.distributed.utils", _provide_set_timeout)
