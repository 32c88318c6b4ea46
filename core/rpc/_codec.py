"""The wire format: versioned JSON envelopes around registered frozen dataclasses.

Everything received is checked against the message class's type hints before any
handler sees it (``clusterdeck.core.rpc._decoders``); nothing is unpickled or eval'd.
Supported field types: str, int, float, bool, None, Any (plain JSON), StrEnum,
list/tuple, dict with str or StrEnum keys, unions, and nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from clusterdeck.core.rpc._decoders import decode as _checked
from clusterdeck.core.rpc._decoders import holds_any, is_text
from clusterdeck.core.rpc._errors import CodecError, FrameTooLargeError

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
    message = envelope.message
    typed = message is None or not holds_any(type(message))
    document = {
        "v": WIRE_VERSION,
        "kind": envelope.kind,
        "from": envelope.sender,
        "id": envelope.correlation_id,
        "reply_to": envelope.reply_to,
        "fencing": envelope.fencing_token,
        "type": envelope.type_name or None,
        "body": message if typed or message is None else _to_json(message),
        "error": envelope.error,
    }
    try:
        data = _dumps(document, typed)
    except (TypeError, ValueError) as error:  # orjson's JSONEncodeError is a TypeError
        raise CodecError(f"{envelope.type_name or envelope.kind} cannot be sent: {error}") \
            from None
    if len(data) > framesize:
        raise FrameTooLargeError(
            f"{envelope.type_name or envelope.kind} message is {len(data)} bytes, over "
            f"rpc.framesize = {framesize} bytes; send bulk data as files, not messages")
    return data


def encoded_size(value: Any) -> int:
    """Bytes ``value`` (a message or a part of one) takes inside a message, as written."""
    typed = not holds_any(type(value))
    return len(_dumps(value if typed else _to_json(value), typed))


def _dumps(document: Any, typed: bool) -> bytes:
    """The same JSON either way. A message whose every field is typed (no ``Any``) is
    written by orjson from its dataclasses directly, 15 times faster than walking it here
    (an ExecutionStateEvents of ten events: 3 us against 44). One that carries plain JSON
    of a user's (job parameters, counters) goes the slow way, which refuses NaN and
    infinities where orjson would write null; a typed float field never holds one."""
    if typed:
        return orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS)
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def decode(data: bytes, framesize: int) -> Envelope:
    """Parse and validate a received payload; raise CodecError saying what is wrong."""
    if len(data) > framesize:
        raise FrameTooLargeError(f"received {len(data)} bytes, over rpc.framesize = {framesize}")
    try:
        document = _parse(data)
    except RecursionError:
        raise CodecError("malformed JSON: nested too deeply") from None
    except ValueError as error:  # bad UTF-8, bad JSON, an integer of thousands of digits
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
        value = document.get(key, "")
        if not isinstance(value, str) or not is_text(value):
            raise CodecError(f"field {key!r} must be a string")
    fencing = document.get("fencing")
    if fencing is not None and not (isinstance(fencing, str) and is_text(fencing)):
        raise CodecError("field 'fencing' must be a string or null")
    return Envelope(
        kind=kind, sender=document.get("from", ""), correlation_id=document.get("id", ""),
        reply_to=document.get("reply_to", ""), fencing_token=fencing,
        message=_decode_body(document.get("type"), document.get("body")),
        error=_decode_error(document.get("error")),
    )


_TYPE_FIELD = b'"type":"'
_HEAD = 1024
"""Where the sender wrote the message's type: after the envelope's short fields."""


def _parse(data: bytes) -> Any:
    """The payload as plain data. A message whose every field is typed is read by orjson,
    three times faster (a 1,000-subtask job's snapshot, 1 MB: 3 ms against 11); one that
    may carry a user's plain JSON by json.loads, which keeps an integer beyond 64 bits
    where orjson would make a float of it. Which one the payload is shows only in the
    type it names: peeked at in its head, where the sender writes it, and checked after
    (the document's own type decides)."""
    start = data.find(_TYPE_FIELD, 0, _HEAD)
    if start >= 0:
        start += len(_TYPE_FIELD)
        end = data.find(b'"', start, start + 100)
        if end > 0 and _typed(data[start:end].decode("ascii", "replace")):
            document = orjson.loads(data)  # refuses NaN, infinities and lone surrogates
            if not isinstance(document, dict) or _typed(document.get("type")):
                return document
    return json.loads(data, parse_constant=_refuse_constant, parse_float=_finite)


def _typed(type_name: Any) -> bool:
    cls = _REGISTRY.get(type_name) if isinstance(type_name, str) else None
    return cls is not None and not holds_any(cls)


def routing_of(data: bytes, framesize: int) -> Envelope | None:
    """The routing of a payload ``decode`` refused, where it can be read (JSON with
    string ``kind``, ``from``, ``id`` and ``reply_to``): to tell the asker of a malformed
    ask why, instead of leaving it to its timeout. None otherwise."""
    if len(data) > framesize:
        return None
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    fields = [document.get(key, "") for key in ("kind", "from", "id", "reply_to")]
    if not all(isinstance(value, str) and is_text(value) for value in fields):
        return None
    kind, sender, correlation_id, reply_to = fields
    return Envelope(kind, sender, correlation_id=correlation_id, reply_to=reply_to)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    """JSON has no infinity, but ``1e400`` reads as one: refuse it like ``Infinity``."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def _decode_body(type_name: Any, body: Any) -> Any:
    if type_name is None:
        if body is not None:
            raise CodecError("a body without a type")
        return None
    cls = _REGISTRY.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        raise CodecError(f"unknown message type {type_name!r}")
    return _checked(body, cls, type_name)


def _decode_error(error: Any) -> dict[str, str] | None:
    if error is None:
        return None
    if not isinstance(error, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and is_text(k) and is_text(v)
            for k, v in error.items()):
        raise CodecError("field 'error' must be an object of strings")
    return error


def to_data(value: Any) -> Any:
    """A message (or any supported value) as plain JSON data, e.g. for files."""
    return _to_json(value)


def from_data(data: Any, cls: type, what: str = "") -> Any:
    """Build and validate ``cls`` from plain JSON data, as a received message would be."""
    return _checked(data, cls, what or cls.__name__)


_PLAIN = frozenset({str, int, float, bool, type(None)})
"""Types that are JSON as they are (not their subclasses: a StrEnum member is written as
its value)."""


def _to_json(value: Any) -> Any:
    # Plain values are returned in place, without a call: most fields are plain, and a
    # busy JobMaster spends a fifth of its time here.
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Enum):  # states and kinds, in every event
        return value.value
    names = _field_names(type(value))
    if names is not None:
        fields = {}
        for name in names:
            item = getattr(value, name)
            fields[name] = item if type(item) in _PLAIN else _to_json(item)
        return fields
    if isinstance(value, list | tuple):
        return [item if type(item) in _PLAIN else _to_json(item) for item in value]
    if isinstance(value, dict):
        return {_key(key): item if type(item) in _PLAIN else _to_json(item)
                for key, item in value.items()}
    return value


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    """A dataclass's field names, found once per class (a snapshot holds thousands of
    dataclass values); None for any other type."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


def _key(key: Any) -> str:
    return key.value if isinstance(key, Enum) else str(key)
