"""DLPack export of tpu tensors.

PyTorch exports a PrivateUse1 tensor as a ``kDLExtDev`` capsule whose data pointer is
the storage's address; ``torch.from_dlpack`` turns it back into a tpu tensor sharing
the storage. Other libraries reject that device type (its address is no memory they
could read): copy with ``tensor.cpu()`` first. PyTorch's ``Tensor.__dlpack_device__``
recognizes the backend only under its unrenamed name, ``privateuse1``; this installs
the same answer for ``tpu``.
"""

from __future__ import annotations

import torch
from torch.utils.dlpack import DLDeviceType

_dlpack_device = torch.Tensor.__dlpack_device__


def _tpu_dlpack_device(self):
    if self.device.type == "tpu":
        return (DLDeviceType.kDLExtDev, self.device.index or 0)
    return _dlpack_device(self)


def install() -> None:
    torch.Tensor.__dlpack_device__ = _tpu_dlpack_device
