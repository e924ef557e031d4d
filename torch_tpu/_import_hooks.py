"""Runs a function right after a module is first imported, without importing it now.

torch_tpu adapts a few libraries (Dynamo's backend registry, TorchTitan's peak-FLOPs
table) at the moment they load, so that ``import torch_tpu`` stays cheap and a library
that is never used is never imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then the callback: the module is complete at that point."""

    def __init__(self, loader: importlib.abc.Loader, callback: Callable[[], None]):
        self._loader = loader
        self._callback = callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._callback()


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[], None]):
        self.name = name
        self._callback = callback

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self._callback)
        return spec


def after_import(name: str, callback: Callable[[], None]) -> None:
    """Calls ``callback`` now if ``name`` is imported, else once it has been."""
    if name in sys.modules:
        callback()
    elif not any(isinstance(f, _Finder) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(name, callback))
