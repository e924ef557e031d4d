"""Runs functions right after a module is first imported, without importing it now.

torch_tpu adapts a few libraries (Dynamo's backend registry, FlexAttention's device
check, TorchTitan's peak-FLOPs table) at the moment they load, so that ``import
torch_tpu`` stays cheap and a library that is never used is never imported.

The finder stays in ``sys.meta_path`` until the module has really been executed: a
``find_spec`` that does not import (``importlib.util.find_spec``) must not use the hook up.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable

_pending: dict[str, list[Callable[[], None]]] = {}


class _Loader(importlib.abc.Loader):
    """The real loader, then the callbacks; every other loader method is the real one's
    (runpy, pkgutil and importlib.resources use them)."""

    def __init__(self, loader: importlib.abc.Loader, name: str):
        self._loader = loader
        self._name = name

    def __getattr__(self, attribute):
        return getattr(self._loader, attribute)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        for callback in _pending.pop(self._name, []):
            callback()
        if not _pending:
            _remove_finder()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _pending:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, name)
        return spec


_FINDER = _Finder()


def _remove_finder() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def after_import(name: str, callback: Callable[[], None]) -> None:
    """Calls ``callback`` now if ``name`` is imported, else once it has been."""
    if name in sys.modules:
        callback()
        return
    _pending.setdefault(name, []).append(callback)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
