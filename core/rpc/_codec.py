"""The wire format: versioned JSON envelopes around registered frozen dataclasses.

Everything received is checked against the message class's type hints before any
handler sees it; nothing is unpickled or eval'd. Supported field types: str, int,
float, bool, None, Any (plain JSON), StrEnum, list/tuple/dict[str, ...], unions, and
nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any

from core.rpc._errors import CodecError, FrameTooLargeError

WIRE_VERSION = 1
KINDS = ("tell", "ask", "reply", "event")

_REGISTRY: dict[str, type] = {}


def message(cls: type) -> type:
    """Register a frozen dataclass as a message type, under its class name."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
        raise TypeError(f"{cls.__name__} must be a frozen dataclass to be a message")
    if cls.__name__ in _REGISTRY and _REGISTRY[cls.__name__] is not cls:
        raise TypeError(f"message type {cls.__name__} registered twice")
    _REGISTRY[cls.__name__] = cls
    return cls


def message_types() -> dict[str, type]:
    return dict(_REGISTRY)


@dataclass(frozen=True)
class Envelope:
    """What travels: a message (or an error) plus routing data."""

    kind: str
    sender: str
    message: Any = None
    correlation_id: str = ""
    reply_to: str = ""
    fencing_token: str | None = None
    error: dict[str, str] | None = None

    @property
    def type_name(self) -> str:
        return type(self.message).__name__ if self.message is not None else ""


def encode(envelope: Envelope, framesize: int) -> bytes:
    """Serialise ``envelope``; refuse it here, at the sender, if it exceeds ``framesize``."""
    if envelope.message is not None and type(envelope.message).__name__ not in _REGISTRY:
        raise CodecError(f"{type(envelope.message).__name__} is not a registered message type")
    document = {
        "v": WIRE_VERSION,
        "kind": envelope.kind,
        "from": envelope.sender,
        "id": envelope.correlation_id,
        "reply_to": envelope.reply_to,
        "fencing": envelope.fencing_token,
        "type": envelope.type_name or None,
        "body": _to_json(envelope.message) if envelope.message is not None else None,
        "error": envelope.error,
    }
    try:
        data = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as error:
        raise CodecError(f"{envelope.type_name or envelope.kind} cannot be sent: {error}") \
            from None
    if len(data) > framesize:
        raise FrameTooLargeError(
            f"{envelope.type_name or envelope.kind} message is {len(data)} bytes, over "
            f"rpc.framesize = {framesize} bytes; send bulk data as files, not messages")
    return data


def decode(data: bytes, framesize: int) -> Envelope:
    """Parse and validate a received payload; raise CodecError saying what is wrong."""
    if len(data) > framesize:
        raise FrameTooLargeError(f"received {len(data)} bytes, over rpc.framesize = {framesize}")
    try:
        document = json.loads(data, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CodecError(f"malformed JSON: {error}") from None
    if not isinstance(document, dict):
        raise CodecError("a message must be a JSON object")
    version = document.get("v")
    if version != WIRE_VERSION:
        raise CodecError(f"unknown wire version {version!r} (this side speaks {WIRE_VERSION})")
    kind = document.get("kind")
    if kind not in KINDS:
        raise CodecError(f"unknown message kind {kind!r}")
    for key in ("from", "id", "reply_to"):
        if not isinstance(document.get(key, ""), str):
            raise CodecError(f"field {key!r} must be a string")
    fencing = document.get("fencing")
    if fencing is not None and not isinstance(fencing, str):
        raise CodecError("field 'fencing' must be a string or null")
    return Envelope(
        kind=kind, sender=document.get("from", ""), correlation_id=document.get("id", ""),
        reply_to=document.get("reply_to", ""), fencing_token=fencing,
        message=_decode_body(document.get("type"), document.get("body")),
        error=_decode_error(document.get("error")),
    )


def _refuse_constant(name: str) -> Any:
    raise CodecError(f"malformed JSON: {name} is not a number JSON allows")


def _decode_body(type_name: Any, body: Any) -> Any:
    if type_name is None:
        if body is not None:
            raise CodecError("a body without a type")
        return None
    cls = _REGISTRY.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        raise CodecError(f"unknown message type {type_name!r}")
    return _from_json(body, cls, type_name)


def _decode_error(error: Any) -> dict[str, str] | None:
    if error is None:
        return None
    if not isinstance(error, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in error.items()):
        raise CodecError("field 'error' must be an object of strings")
    return error


def to_data(value: Any) -> Any:
    """A message (or any supported value) as plain JSON data, e.g. for files."""
    return _to_json(value)


def from_data(data: Any, cls: type, what: str = "") -> Any:
    """Build and validate ``cls`` from plain JSON data, as a received message would be."""
    return _from_json(data, cls, what or cls.__name__)


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_to_json(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _to_json(item) for key, item in value.items()}
    return value


def _from_json(value: Any, hint: Any, path: str) -> Any:
    """Check ``value`` against the type ``hint`` and build it; ``path`` names the field."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        return _from_union(value, typing.get_args(hint), path)
    if hint is type(None):
        return _expect(value is None, value, "null", path)
    if dataclasses.is_dataclass(hint):
        return _from_dataclass(value, hint, path)
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(value)
        except ValueError:
            raise CodecError(f"{path}: {value!r} is not a {hint.__name__}") from None
    if origin in (list, tuple):
        return _from_sequence(value, hint, origin, path)
    if origin is dict:
        _, item_hint = typing.get_args(hint)
        _expect(isinstance(value, dict), value, "an object", path)
        return {key: _from_json(item, item_hint, f"{path}.{key}") for key, item in value.items()}
    return _from_scalar(value, hint, path)


def _from_union(value: Any, options: tuple[Any, ...], path: str) -> Any:
    for option in options:
        try:
            return _from_json(value, option, path)
        except CodecError:
            continue
    names = " or ".join(getattr(o, "__name__", str(o)) for o in options)
    raise CodecError(f"{path}: {value!r} is not {names}")


@functools.cache
def _fields_of(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """Resolved once per class: resolving type hints costs more than the rest of a decode."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}


def _from_dataclass(value: Any, cls: type, path: str) -> Any:
    _expect(isinstance(value, dict), value, "an object", path)
    hints, fields = _fields_of(cls)
    unknown = set(value) - set(fields)
    if unknown:
        raise CodecError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
    arguments = {}
    for name, field in fields.items():
        if name in value:
            arguments[name] = _from_json(value[name], hints[name], f"{path}.{name}")
        elif (field.default is dataclasses.MISSING
              and field.default_factory is dataclasses.MISSING):
            raise CodecError(f"{path}: missing field {name!r}")
    return cls(**arguments)


def _from_sequence(value: Any, hint: Any, origin: type, path: str) -> Any:
    _expect(isinstance(value, list), value, "a list", path)
    args = typing.get_args(hint)
    if origin is tuple and args and args[-1] is not Ellipsis:
        _expect(len(value) == len(args), value, f"{len(args)} items", path)
        return tuple(_from_json(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args,
                                                                                      strict=True)))
    item_hint = args[0] if args else Any
    items = [_from_json(v, item_hint, f"{path}[{i}]") for i, v in enumerate(value)]
    return tuple(items) if origin is tuple else items


def _from_scalar(value: Any, hint: Any, path: str) -> Any:
    if hint is bool:
        return _expect(isinstance(value, bool), value, "a boolean", path)
    if hint is int:
        return _expect(isinstance(value, int) and not isinstance(value, bool), value,
                       "a whole number", path)
    if hint is float:
        _expect(isinstance(value, int | float) and not isinstance(value, bool), value,
                "a number", path)
        return float(value)
    if hint is str:
        return _expect(isinstance(value, str), value, "a string", path)
    raise CodecError(f"{path}: unsupported field type {hint!r}")


def _expect(ok: bool, value: Any, what: str, path: str) -> Any:
    if not ok:
        shown = repr(value)
        raise CodecError(f"{path}: expected {what}, got {shown[:80]}")
    return value
