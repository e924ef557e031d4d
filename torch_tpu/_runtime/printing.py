"""Printing a tpu tensor formats a host copy.

PyTorch formats tensors with a dozen small ops (abs, comparisons, masked_select,
min/max...). Run on the device, each would be a program of its own; printing is a
sync point anyway (DESIGN.md), so the values are copied out once and formatted on
the CPU, as PyTorch already does for XLA and lazy tensors. The prefix and suffixes
(device='tpu:0', dtype, grad_fn) are still computed from the tpu tensor.
"""

from __future__ import annotations

import torch._tensor_str as _tensor_str_module

_format_values = _tensor_str_module._tensor_str


def _format_values_on_host(self, indent):
    if self.device.type == "tpu":
        self = self.to("cpu")
    return _format_values(self, indent)


def install() -> None:
    _tensor_str_module._tensor_str = _format_values_on_host
