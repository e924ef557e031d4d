"""``torch_tpu.dynamo``: the ``"tpu"`` backend of ``torch.compile``, by its public name.

The backend lives in ``torch_tpu.compile`` (``backend``, ``runner``, ``aot_cache``...);
this module keeps the names users import: the backend itself, its decomposition table and
the TorchTPU options it accepts. Importing it imports Dynamo and AOTAutograd.

>>> from torch_tpu.dynamo import backend
>>> fn = torch.compile(lambda x: x.sin() + 1, backend=backend)
>>> fn(torch.zeros(2, device="tpu")).cpu()
tensor([1., 1.])
"""

from __future__ import annotations

from torch_tpu.compile.backend import TORCHTPU_OPTIONS, backend
from torch_tpu.compile.decompositions import decompositions

__all__ = ["TORCHTPU_OPTIONS", "backend", "decompositions"]
