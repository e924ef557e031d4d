"""Registers the ``"tpu"`` Dynamo backend and device interface when ``torch._dynamo``
is first imported, so ``torch.compile(model, backend="tpu")`` works right after
``import torch_tpu`` without importing Dynamo (several seconds) on every import.

The backend is entered into Dynamo's registry as an entry point, the form the
registry already loads lazily: ``torch_tpu.compile.backend`` (AOTAutograd and friends) is
only imported by the first ``torch.compile(..., backend="tpu")``.

Inductor has no code generator for the tpu device, so a graph that Dynamo hands to
Inductor (``torch.compile(fn)`` with the default backend, as libraries such as
TorchTitan's FlexAttention do) whose inputs are tpu tensors is compiled by the tpu
backend instead; Inductor's options mean nothing there and are ignored. Graphs of CPU
or CUDA tensors still go to Inductor.
"""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint

import torch

from torch_tpu._runtime.import_hooks import after_import

_BACKEND = EntryPoint(
    name="tpu", value="torch_tpu.compile.backend:backend", group="torch_dynamo_backends"
)


def _register() -> None:
    from torch._dynamo.backends import registry

    from torch_tpu.compile import device_interface

    registry._BACKENDS.setdefault("tpu", _BACKEND)
    device_interface.register()
    _route_tpu_graphs_from_inductor()


_log = logging.getLogger("torch_tpu")


def _on_tpu(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "tpu"


def _touches_tpu(gm: torch.fx.GraphModule, inputs) -> bool:
    """Whether the graph reads or makes a tpu tensor (a graph may create all its
    tensors itself, e.g. ``torch.arange(n, device="tpu")``)."""
    if any(_on_tpu(x) for x in inputs):
        return True
    return any(_on_tpu(node.meta.get("example_value")) for node in gm.graph.nodes)


def _route_tpu_graphs_from_inductor() -> None:
    wrapper = torch._TorchCompileInductorWrapper
    inductor_call = wrapper.__call__
    if getattr(inductor_call, "_torch_tpu", False):
        return

    def __call__(self, model_, inputs_, **kwargs):
        if not _touches_tpu(model_, inputs_):
            return inductor_call(self, model_, inputs_, **kwargs)
        from torch_tpu.compile.backend import backend

        if self.config:
            _log.info(
                "tpu graph compiled by the tpu backend; Inductor options ignored: %s",
                sorted(self.config),
            )
        return backend(model_, inputs_)

    __call__._torch_tpu = True
    wrapper.__call__ = __call__


def install() -> None:
    """Registers now if Dynamo is already imported, else when it is."""
    after_import("torch._dynamo", _register)
