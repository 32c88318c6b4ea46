"""Checking received data against type hints, compiled once per type.

``decode(value, hint, path)`` checks plain JSON data against a field's type hint and
builds the value (dataclasses, enums, tuples). Each hint is turned into a small function
the first time it is seen, so a decode costs no type introspection per value: a job's
snapshot has tens of thousands of values, decoded on the network thread of every
observer. Supported hints: str, int, float, bool, None, Any (plain JSON), Enum,
list/tuple, dict with str or Enum keys, unions, and nested dataclasses.

A failure says where, from the outside in: ``JobSnapshot.graph.vertices[0].name: ...``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any

from clusterdeck.core.rpc._errors import CodecError

Decoder = Callable[[Any], Any]


class _Invalid(Exception):
    """A value does not fit its hint. ``where`` gathers the path on the way out, innermost
    part first, so the path is only built when something is wrong."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.where: list[str] = []


def decode(value: Any, hint: Any, path: str) -> Any:
    """Check ``value`` against the type ``hint`` and build it; ``path`` names the value."""
    try:
        return _decoder(hint)(value)
    except _Invalid as invalid:
        raise CodecError(f"{path}{''.join(reversed(invalid.where))}: {invalid.problem}") \
            from None


def _expected(what: str, value: Any) -> _Invalid:
    return _Invalid(f"expected {what}, got {repr(value)[:80]}")


@functools.cache
def _decoder(hint: Any) -> Decoder:
    origin = typing.get_origin(hint)
    if hint is Any:
        return _as_is
    if origin in (typing.Union, types.UnionType):
        return _union(typing.get_args(hint))
    if hint is type(None):
        return _none
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum(hint)
    if origin in (list, tuple):
        return _sequence(hint, origin)
    if origin is dict:
        return _mapping(*typing.get_args(hint))
    return _scalar(hint)


def _as_is(value: Any) -> Any:
    return value


def _none(value: Any) -> None:
    if value is not None:
        raise _expected("null", value)


def _union(options: tuple[Any, ...]) -> Decoder:
    # None is tried first: most unions are "X | None", and a null is common. Of such an
    # optional X, a value that is not null must be an X: X's own complaint says more
    # (which field of it is wrong) than "is not X or NoneType".
    nullable = type(None) in options
    decoders = [_decoder(option) for option in options if option is not type(None)]
    names = " or ".join(getattr(option, "__name__", str(option)) for option in options)
    only = decoders[0] if len(decoders) == 1 else None

    def union(value: Any) -> Any:
        if value is None and nullable:
            return None
        if only is not None:
            return only(value)
        for decoder in decoders:
            try:
                return decoder(value)
            except _Invalid:
                continue
        raise _Invalid(f"{value!r} is not {names}")
    return union


def _dataclass(cls: type) -> Decoder:
    def instance(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _expected("an object", value)
        fields, names = _fields_of(cls)  # looked up here: a class may contain itself
        if not names.issuperset(value):
            raise _Invalid(f"unknown field(s) {', '.join(sorted(set(value) - names))}")
        arguments = {}
        for name, decoder, required in fields:
            if name in value:
                try:
                    arguments[name] = decoder(value[name])
                except _Invalid as invalid:
                    invalid.where.append(f".{name}")
                    raise
            elif required:
                raise _Invalid(f"missing field {name!r}")
        return cls(**arguments)
    return instance


@functools.cache
def _fields_of(cls: type) -> tuple[tuple[tuple[str, Decoder, bool], ...], frozenset[str]]:
    """(name, decoder, required) per field, resolved once per class."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    return (tuple((f.name, _decoder(hints[f.name]), f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING) for f in fields),
            frozenset(f.name for f in fields))


@functools.cache
def holds_any(hint: Any) -> bool:
    """Whether a value of this type may carry plain JSON: an ``Any`` anywhere inside."""
    return _holds_any(hint, set())


def _holds_any(hint: Any, seen: set[Any]) -> bool:
    if hint is Any:
        return True
    if hint in seen:  # a type that holds itself: what else it holds is looked at already
        return False
    seen.add(hint)
    if dataclasses.is_dataclass(hint):
        return any(_holds_any(h, seen) for h in typing.get_type_hints(hint).values())
    return any(_holds_any(a, seen) for a in typing.get_args(hint) if a is not Ellipsis)


def _enum(cls: type[Enum]) -> Decoder:
    members = {member.value: member for member in cls}

    def enum(value: Any) -> Enum:
        try:
            return members[value]
        except (KeyError, TypeError):  # TypeError: an unhashable value (a list)
            raise _Invalid(f"{value!r} is not a {cls.__name__}") from None
    return enum


def _sequence(hint: Any, origin: type) -> Decoder:
    args = typing.get_args(hint)
    if origin is tuple and args and args[-1] is not Ellipsis:
        return _fixed_tuple(args)
    item = _decoder(args[0] if args else Any)
    as_tuple = origin is tuple

    def sequence(value: Any) -> Any:
        if not isinstance(value, list):
            raise _expected("a list", value)
        items: list[Any] = []
        try:
            for element in value:
                items.append(item(element))
        except _Invalid as invalid:
            invalid.where.append(f"[{len(items)}]")
            raise
        return tuple(items) if as_tuple else items
    return sequence


def _fixed_tuple(args: tuple[Any, ...]) -> Decoder:
    decoders = [_decoder(arg) for arg in args]

    def fixed_tuple(value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise _expected("a list", value)
        if len(value) != len(decoders):
            raise _expected(f"{len(decoders)} items", value)
        items: list[Any] = []
        try:
            for decoder, element in zip(decoders, value, strict=True):
                items.append(decoder(element))
        except _Invalid as invalid:
            invalid.where.append(f"[{len(items)}]")
            raise
        return tuple(items)
    return fixed_tuple


def _mapping(key_hint: Any, item_hint: Any) -> Decoder:
    # JSON keys are strings: an Enum key (a state -> its time) is checked and built, any
    # other key kept as the string it is.
    key = _decoder(key_hint) if isinstance(key_hint, type) and issubclass(key_hint, Enum) \
        else _as_is
    item = _decoder(item_hint)

    def mapping(value: Any) -> dict[Any, Any]:
        if not isinstance(value, dict):
            raise _expected("an object", value)
        result = {}
        for name, element in value.items():
            try:
                checked = key(name)
            except _Invalid as invalid:
                invalid.where.append(" key")
                raise
            try:
                result[checked] = item(element)
            except _Invalid as invalid:
                invalid.where.append(f".{name}")
                raise
        return result
    return mapping


def _scalar(hint: Any) -> Decoder:
    if hint is bool:
        return _boolean
    if hint is int:
        return _whole
    if hint is float:
        return _number
    if hint is str:
        return _string

    def unsupported(_value: Any) -> Any:
        raise _Invalid(f"unsupported field type {hint!r}")
    return unsupported


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _expected("a boolean", value)
    return value


def _whole(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _expected("a whole number", value)
    return value


def _number(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _expected("a number", value)
    return float(value)


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _expected("a string", value)
    if not is_text(value):
        raise _Invalid("a string with a lone surrogate (\\ud800-\\udfff) is not text")
    return value


def is_text(value: str) -> bool:
    """Whether ``value`` can be written out again as UTF-8: JSON's ``\\ud800`` escapes
    decode to lone surrogates that a log file or a reply cannot hold."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
