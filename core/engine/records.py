"""The record model: what a user function sees, and how records are stored between vertices.

Records are plain Python values. A user function of ``map``/``flat_map``/``filter``/
``reduce`` gets one record and returns records. When records must become columns (a SQL
statement, a join, a CSV or Parquet sink, ``aggregate``) their *shape* decides the
columns, and the same rule read backwards turns a table's rows into records again:

============================ ========================= =============================
record                       columns                   read back as
============================ ========================= =============================
a scalar (str, int, ...)     ``value``                 the scalar
a tuple ``(a, b)``           ``_1``, ``_2``            the tuple
a ``Row`` or a ``dict``      its field names           a ``pyspark.sql.Row``
============================ ========================= =============================

Between vertices, records that are Python values are stored one per Parquet row, as
tagged JSON in a ``__record`` column (tuples stay tuples, dicts may have any keys, dates
and bytes survive). Nothing is pickled. Tables (from CSV, Parquet, SQL, join, aggregate)
travel as their own columns.

A producer feeding a keyed sum, count or reduce may store a ``Partial`` instead of raw
records: one key's partial result, combined before the exchange
(``clusterdeck.core.engine.combine``).

Keys of HASH exchanges are compared as strings built by ``key_string``; it renders ints,
strings, booleans, dates and (mostly) doubles the way Spark's ``CAST(x AS STRING)`` does,
so a key computed in Python and the same key read from a column land in the same
consumer subtask.

Every function here also runs inside Spark's Python workers, so this module imports
nothing heavier than ``pyspark.sql.types``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import Row

SCALAR_COLUMN = "value"
RECORD_COLUMN = "__record"
KEY_SEPARATOR = "\x01"
NULL_KEY_PART = "\x00"

SCALAR, TUPLE, ROW = "scalar", "tuple", "row"


@dataclass(frozen=True)
class Partial:
    """One key's partial result of a keyed sum, count or reduce, combined by a producer
    (the value: a partial sum, a count, or the records reduced so far)."""

    key: Any
    value: Any


def is_named_row(value: Any) -> bool:
    return isinstance(value, Row) and hasattr(value, "__fields__")


def table_shape(columns: Sequence[str]) -> str:
    """The record shape a table with these columns stands for."""
    columns = list(columns)
    if columns == [SCALAR_COLUMN]:
        return SCALAR
    if columns and columns == [f"_{i + 1}" for i in range(len(columns))]:
        return TUPLE
    return ROW


class RowDecoder:
    """Turns a table row back into the record it stands for (picklable, for workers)."""

    def __init__(self, shape: str) -> None:
        self.shape = shape

    def __call__(self, row: Row) -> Any:
        if self.shape == SCALAR:
            return row[0]
        if self.shape == TUPLE:
            return tuple(row)
        return row


def record_to_row(record: Any) -> Row:
    """A named Row for schema inference: the shape rule of the module docstring."""
    if is_named_row(record):
        return record
    if isinstance(record, tuple):
        return Row(**{f"_{i + 1}": value for i, value in enumerate(record)})
    if isinstance(record, dict):
        return Row(**{str(key): value for key, value in record.items()})
    return Row(**{SCALAR_COLUMN: record})


def record_to_tuple(record: Any, names: Sequence[str]) -> tuple:
    """The record's values in the order of a declared schema's ``names``."""
    if isinstance(record, dict):
        return tuple(record.get(name) for name in names)
    if is_named_row(record):
        fields = record.__fields__
        if all(name in fields for name in names):
            return tuple(record[name] for name in names)
        return tuple(record)
    if isinstance(record, tuple):
        return record
    return (record,)


def field_value(record: Any, field: str | int) -> Any:
    """One field of a record, by position or by name (``_1`` and ``value`` included)."""
    if isinstance(field, int):
        if isinstance(record, (tuple, list)):  # a tuple, not a union: no object per call
            return record[field]
        if field == 0 and not isinstance(record, dict):
            return record
        raise KeyError(f"record {record!r} has no position {field}")
    if is_named_row(record):
        return record[field]
    if isinstance(record, dict):
        return record[field]
    if isinstance(record, tuple) and field.startswith("_") and field[1:].isdigit():
        return record[int(field[1:]) - 1]
    if field == SCALAR_COLUMN and not isinstance(record, tuple | list):
        return record
    raise KeyError(f"record {record!r} has no field {field!r}")


class FieldKey:
    """The key of a record given by field names or positions (picklable, for workers)."""

    def __init__(self, fields: Sequence[str | int]) -> None:
        self.fields = tuple(fields)

    def __call__(self, record: Any) -> Any:
        if len(self.fields) == 1:
            return field_value(record, self.fields[0])
        return tuple(field_value(record, field) for field in self.fields)


def field_key(fields: Sequence[str | int]) -> Callable[[Any], Any]:
    """FieldKey, as a plain function for one position of a tuple: called once per record
    by a keyed fold or a HASH exchange, it is 2.5x cheaper than FieldKey's general path."""
    key = FieldKey(fields)
    if len(key.fields) != 1 or not isinstance(key.fields[0], int):
        return key
    position = key.fields[0]

    def positional(record: Any) -> Any:
        return record[position] if type(record) is tuple else key(record)

    return positional


def key_string(key: Any) -> str | None:
    """The string a HASH exchange hashes; see the module docstring."""
    if key is None:
        return None
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, str):
        return key
    if isinstance(key, numbers.Integral):
        return str(int(key))
    if isinstance(key, float):
        return _java_double(key)
    if isinstance(key, tuple | list):
        return KEY_SEPARATOR.join(NULL_KEY_PART if part is None else key_string(part)
                                  for part in key)
    if isinstance(key, dt.datetime):
        return key.isoformat(sep=" ")
    if isinstance(key, dt.date):
        return key.isoformat()
    if isinstance(key, bytes | bytearray):
        return bytes(key).decode("utf-8", "replace")
    return str(key)


def _java_double(x: float) -> str:
    """``Double.toString`` as Spark prints a double: ``1.0``, ``0.25``, ``1.0E7``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        return text if "." in text else f"{text}.0"
    sign, digits, exponent = decimal.Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + int(exponent) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def _pack(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Row):
        if is_named_row(value):
            return {"r": [[name, _pack(item)] for name, item in zip(value.__fields__, value,
                                                                     strict=True)]}
        return {"t": [_pack(item) for item in value]}
    if isinstance(value, tuple):
        return {"t": [_pack(item) for item in value]}
    if isinstance(value, Partial):
        return {"p": [_pack(value.key), _pack(value.value)]}
    if isinstance(value, list):
        return [_pack(item) for item in value]
    if isinstance(value, dict):
        return {"d": [[_pack(key), _pack(item)] for key, item in value.items()]}
    if isinstance(value, set | frozenset):
        return {"s": [_pack(item) for item in value]}
    if isinstance(value, bytes | bytearray):
        return {"b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):
        return {"dt": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"dec": str(value)}
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(
        f"a record of type {type(value).__name__} cannot be stored between vertices: use "
        "scalars, tuples, lists, dicts, Rows, bytes, dates or Decimals")


def _unpack(value: Any) -> Any:
    if isinstance(value, list):
        return [_unpack(item) for item in value]
    if not isinstance(value, dict):
        return value
    (tag, body), = value.items()
    if tag == "t":
        return tuple(_unpack(item) for item in body)
    if tag == "r":
        return Row(**{name: _unpack(item) for name, item in body})
    if tag == "d":
        return {_hashable(_unpack(key)): _unpack(item) for key, item in body}
    if tag == "s":
        return {_hashable(_unpack(item)) for item in body}
    if tag == "p":
        return Partial(_unpack(body[0]), _unpack(body[1]))
    if tag == "b":
        return base64.b64decode(body)
    if tag == "dt":
        return dt.datetime.fromisoformat(body)
    if tag == "date":
        return dt.date.fromisoformat(body)
    if tag == "dec":
        return decimal.Decimal(body)
    raise ValueError(f"unknown record tag {tag!r}")


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def encode_record(record: Any) -> str:
    """One record as tagged JSON (the ``__record`` column of an exchange)."""
    return json.dumps(_pack(record), separators=(",", ":"), ensure_ascii=False)


def decode_record(text: str) -> Any:
    return _unpack(json.loads(text))


def to_tagged(value: Any) -> Any:
    """A value as tagged JSON data (not text): how keyed state keeps the user's keys and
    aggregates in a checkpoint, with tuples, dicts, bytes and dates surviving."""
    return _pack(value)


def from_tagged(data: Any) -> Any:
    """``to_tagged`` backwards."""
    return _unpack(data)


def decode_record_row(row: Row) -> Any:
    """A row of an exchange's ``__record`` column back to its record (for workers)."""
    return decode_record(row[0])


def to_jsonable(value: Any) -> Any:
    """A collected record as plain JSON: tuples and sets become lists, Rows become
    objects, bytes become base64 text, dates ISO text, Decimals text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if is_named_row(value):
        return {name: to_jsonable(item) for name, item in zip(value.__fields__, value,
                                                               strict=True)}
    if isinstance(value, tuple | list | set | frozenset):
        return [to_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def text_line(record: Any) -> str:
    """A record as one line of a text sink: strings as they are, the rest with ``str``."""
    return record if isinstance(record, str) else str(record)

