"""Private start-up plumbing that ``import torch_tpu`` runs: the pinned versions, PJRT plugin
discovery, the multi-process job's client, autograd's device threads, import hooks, tensor
printing, DLPack, and the chips' peak FLOP/s and memory.

The bottom layer of the Python package: nothing here imports ``torch_tpu.compile`` or
``torch_tpu.ops``. Kept empty so that ``torch_tpu._runtime.versions`` is cheap to import
first thing.
"""
