"""FlexAttention on tpu tensors.

``torch.nn.attention.flex_attention`` refuses devices outside a fixed list (cuda, cpu,
xpu, hpu, mps), although its operator runs anywhere: on tpu the ``flex_attention``
higher-order op takes its dense path (scores, ``score_mod`` and the block mask applied
to the whole score matrix, then softmax), traced into the program by the tpu backend,
backward included. The check is widened to admit tpu when the module loads; every
other device is checked exactly as before.
"""

from __future__ import annotations

import sys

from torch_tpu._runtime.import_hooks import after_import

_MODULE = "torch.nn.attention.flex_attention"


def _admit_tpu() -> None:
    module = sys.modules[_MODULE]
    check = module._validate_device
    if getattr(check, "_torch_tpu", False):
        return

    def _validate_device(query, key, value) -> None:
        if query.device.type != "tpu":
            check(query, key, value)

    _validate_device._torch_tpu = True
    module._validate_device = _validate_device


def install() -> None:
    after_import(_MODULE, _admit_tpu)
