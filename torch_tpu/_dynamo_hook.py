"""Registers the ``"tpu"`` Dynamo backend and device interface when ``torch._dynamo``
is first imported, so ``torch.compile(model, backend="tpu")`` works right after
``import torch_tpu`` without importing Dynamo (several seconds) on every import.

The backend is entered into Dynamo's registry as an entry point, the form the
registry already loads lazily: ``torch_tpu.dynamo`` (AOTAutograd and friends) is only
imported by the first ``torch.compile(..., backend="tpu")``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from importlib.metadata import EntryPoint

_TRIGGER = "torch._dynamo"
_BACKEND = EntryPoint(name="tpu", value="torch_tpu.dynamo:backend", group="torch_dynamo_backends")


def _register() -> None:
    from torch._dynamo.backends import registry

    from torch_tpu import _device_interface

    registry._BACKENDS.setdefault("tpu", _BACKEND)
    _device_interface.register()


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then registers: Dynamo is complete at that point."""

    def __init__(self, loader: importlib.abc.Loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        _register()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TRIGGER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Registers now if Dynamo is already imported, else when it is."""
    if _TRIGGER in sys.modules:
        _register()
    elif not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
