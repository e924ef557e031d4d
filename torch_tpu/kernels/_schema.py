"""The torch.library schema of a JAX function, from its Python signature.

Array parameters become ``Tensor``; Python numbers, bools, strings and tuples of numbers
are static (``int``, ``float``, ``bool``, ``str``, ``int[]``...): they are part of the
lowering's key, so each distinct value lowers and compiles once. A parameter is static when
it is named in ``static_argnames``, annotated with such a type, or has such a default.
Results: one ``Tensor``, or ``(Tensor, ...)`` when the return annotation is a tuple of N.
"""

from __future__ import annotations

import builtins
import collections.abc
import dataclasses
import inspect
import math
import types
import typing

_SCALARS = {bool: "bool", int: "int", float: "float", str: "str"}


@dataclasses.dataclass(frozen=True)
class Parameter:
    name: str
    static: bool
    type: str  # schema type: "Tensor", "int", "float[]", "int?", ...
    default: object = inspect.Parameter.empty
    keyword_only: bool = False


@dataclasses.dataclass(frozen=True)
class Signature:
    parameters: tuple
    num_results: int  # arrays the JAX function returns (before donation)

    @property
    def tensors(self) -> list[Parameter]:
        return [p for p in self.parameters if not p.static]

    @property
    def statics(self) -> list[Parameter]:
        return [p for p in self.parameters if p.static]

    def arguments_text(self, mutated=()) -> str:
        parts, star = [], False
        for p in self.parameters:
            if p.keyword_only and not star:
                parts.append("*")
                star = True
            text = f"{p.type}{'(a!)' if p.name in mutated else ''} {p.name}"
            if p.default is not inspect.Parameter.empty:
                text += "=" + _default_text(p.default)
            parts.append(text)
        return ", ".join(parts)


def _default_text(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        raise TypeError(
            f"a static default of {value} cannot be written in an op schema; use None as the "
            "default (annotated float | None) and pick the value inside the function"
        )
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_default_text(v) for v in value) + "]"
    return repr(value)


def _static_type(annotation, default, name: str, where: str) -> str | None:
    """The schema type of a static parameter, or None when it is not one."""
    if annotation is not inspect.Parameter.empty:
        optional = False
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = len(arguments) < len(typing.get_args(annotation))
            if len(arguments) != 1:
                return None
            annotation = arguments[0]
            origin = typing.get_origin(annotation)
        suffix = "?" if optional else ""
        if annotation in _SCALARS:
            return _SCALARS[annotation] + suffix
        if origin in (tuple, list, collections.abc.Sequence):
            element = {a for a in typing.get_args(annotation) if a is not Ellipsis}
            if len(element) == 1 and next(iter(element)) in (bool, int, float):
                return _SCALARS[next(iter(element))] + "[]" + suffix
            raise TypeError(
                f"{where}: static parameter {name!r} must be a tuple of one number type"
            )
        return None
    if isinstance(default, (bool, int, float, str)):
        return _SCALARS[type(default)]
    if isinstance(default, tuple):
        kinds = {type(v) for v in default} or {int}
        if len(kinds) == 1 and next(iter(kinds)) in (bool, int, float):
            return _SCALARS[next(iter(kinds))] + "[]"
    return None


def _num_results(annotation) -> int:
    if typing.get_origin(annotation) is tuple:
        arguments = typing.get_args(annotation)
        if Ellipsis in arguments:
            raise TypeError(
                "annotate the results with a fixed-size tuple, e.g. tuple[jax.Array, jax.Array]"
            )
        return len(arguments)
    return 1


def signature_of(fn, static_argnames=(), where: str = "jax_op") -> Signature:
    """The schema parts of `fn`'s parameters and results."""
    static_argnames = set(static_argnames or ())
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # one unresolvable string annotation: resolve the others one by one
        hints = {}
        namespace = {**vars(builtins), **getattr(fn, "__globals__", {})}
        for p in [*signature.parameters.values(), None]:
            name = "return" if p is None else p.name
            annotation = signature.return_annotation if p is None else p.annotation
            if not isinstance(annotation, str):
                continue
            try:
                hints[name] = eval(annotation, namespace)  # noqa: S307 (the user's own code)
            except Exception as e:
                if p is not None and p.default is inspect.Parameter.empty:
                    continue  # an array parameter's annotation does not matter
                raise TypeError(
                    f"{where}: cannot resolve the annotation {annotation!r} of {name!r}; "
                    "annotate it with int, float, bool, str or tuple[int, ...]"
                ) from e
    unknown = static_argnames - set(signature.parameters)
    if unknown:
        raise TypeError(f"{where}: static_argnames {sorted(unknown)} are not parameters")
    parameters = []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs cannot be an op's schema; name them")
        annotation = hints.get(p.name, p.annotation)
        static = _static_type(annotation, p.default, p.name, where)
        if p.name in static_argnames and static is None:
            raise TypeError(
                f"{where}: give static parameter {p.name!r} a type annotation "
                "(int, float, bool, str or tuple[int, ...])"
            )
        keyword_only = p.kind == p.KEYWORD_ONLY
        if static is not None:
            parameters.append(Parameter(p.name, True, static, p.default, keyword_only))
        else:
            if p.default is not inspect.Parameter.empty:
                raise TypeError(f"{where}: array parameter {p.name!r} cannot have a default")
            parameters.append(Parameter(p.name, False, "Tensor", keyword_only=keyword_only))
    returns = hints.get("return", signature.return_annotation)
    return Signature(tuple(parameters), _num_results(returns))
