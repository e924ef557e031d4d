"""The ``"tpu"`` backend of ``torch.compile``: ``hook`` registers it when Dynamo is first
imported; ``backend`` is the backend itself (public as ``torch_tpu.dynamo``), ``runner``
runs each AOTAutograd graph (replayed where it can be), ``host_split`` cuts a graph's host
part from its device part, ``buckets``, ``padding`` and ``bucketed`` run graphs with
dynamic sizes at size buckets (one program per bucket), ``aot_cache`` keeps graphs in
PyTorch's AOTAutograd cache, and
``device_interface`` is Dynamo's device interface for ``tpu``.

Kept empty: ``import torch_tpu`` must not import Dynamo.
"""
