"""A data buffer of a streaming exchange as Apache Arrow IPC: one stream of one record
batch, a ``timestamp`` column and the records (docs/streaming.md, "The data plane").

Records go as native columns when every record of the buffer is a tuple of the same
length whose fields are each of one type among int (within int64), float, str, bool,
bytes, with None anywhere (columns ``_1`` … ``_n``), or when every record is such a
scalar (column ``value``). Anything else (dicts, lists, nested tuples, mixed types in a
field, big ints, Rows, str with lone surrogates) goes as one ``__record`` column of each
record's tagged JSON (``records.encode_record``, UTF-8 with surrogates passed), so every
record comes back exactly as it went: the native columns only take values Arrow gives
back as the same Python value. Timestamps travel as float64 seconds.

A received buffer is checked before anything is made of it: one IPC stream, a schema of
exactly these columns and types, one uncompressed record batch of at most ``MAX_ROWS``
rows (a compressed one could expand a 1 MiB buffer into gigabytes), ``validate(full=True)``
(offsets, UTF-8, buffer sizes), and a ``__record`` text that decodes. Nothing is
unpickled: pyarrow (>= 14.0.1) loads no pickled extension types, and the schema accepts
none. Whatever fails raises ``BufferFormatError``.

Pure functions of bytes, called on a task's slot thread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from operator import is_, itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clusterdeck.core.engine.records import (
    RECORD_COLUMN,
    SCALAR_COLUMN,
    decode_record,
    encode_record,
)

Element = tuple[float | None, Any]  # (event timestamp or None, record)
GivenColumn = tuple[pa.Array, list[Any]]  # a record column and the values made of it
TIMESTAMP_COLUMN = "timestamp"
MAX_FIELDS = 64
"""Tuple fields that go as columns at most; wider records go as tagged JSON."""
MAX_ROWS = 1 << 17
"""Rows a received buffer may claim: a row takes 8 bytes of timestamp at least, so a
buffer of the channel's largest size (1 MiB) holds fewer."""
NATIVE_TYPES: dict[type, pa.DataType] = {
    int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_(),
    bytes: pa.binary(),
}
_ACCEPTED = frozenset(NATIVE_TYPES.values())
_FIXED_WIDTH = {pa.int64(): 8, pa.float64(): 8, pa.bool_(): 1}
_OFFSET_WIDTH = 4  # a str or bytes value's offset, besides its bytes
_NONE = type(None)
_U16, _I32, _U32, _I64 = (struct.Struct(f"<{code}") for code in "HiIq")
_RECORD_BATCH = 3  # MessageHeader.RecordBatch in Arrow's Message.fbs


class BufferFormatError(ValueError):
    """Received bytes that are not a data buffer of this format."""


def encode_buffers(elements: Sequence[Element], limit: int) -> list[bytes]:
    """``elements`` as IPC streams of about ``limit`` bytes of column data each (a record
    larger than that goes alone), in order."""
    if not elements:
        return []
    timestamps = list(map(itemgetter(0), elements))  # not zip(*elements): a call of
    records = list(map(itemgetter(1), elements))  # thousands of arguments is slower
    columns = native_columns(records)
    if columns is None:
        texts = [encode_record(record).encode("utf-8", "surrogatepass") for record in records]
        columns = [(RECORD_COLUMN, pa.array(texts, pa.binary()))]
    arrays = [pa.array(timestamps, pa.float64())] + [array for _, array in columns]
    names = [TIMESTAMP_COLUMN] + [name for name, _ in columns]
    batch = pa.record_batch(arrays, names=names)
    return [_stream(batch.slice(start, end - start))
            for start, end in _cuts(_row_sizes(arrays), limit)]


def encode_columns(batch: pa.RecordBatch, limit: int) -> list[bytes]:
    """A batch already in this format (``timestamp`` and record columns, as
    ``decode_columns`` gives or ``columnbatches.exchange_batch`` makes) as IPC streams of
    about ``limit`` bytes of column data each, in order."""
    if not batch.num_rows:
        return []
    return [_stream(batch.slice(start, end - start))
            for start, end in _cuts(_row_sizes(batch.columns), limit)]


def decode_buffer(payload: bytes) -> list[Element]:
    """The elements of one received buffer; BufferFormatError if it is not one."""
    return elements_of(decode_columns(payload))


def decode_columns(payload: bytes) -> pa.RecordBatch:
    """The checked record batch of one received buffer; BufferFormatError if it is not
    one (its ``__record`` texts are checked when ``elements_of`` decodes them)."""
    try:
        batch = _read_batch(pa.py_buffer(payload))
        batch.validate(full=True)
        return batch
    except BufferFormatError:
        raise
    except StopIteration:
        raise BufferFormatError("a stream that ends before its record batch") from None
    except (pa.ArrowException, ValueError, TypeError, KeyError, AttributeError,
            ArithmeticError, RecursionError, OSError, struct.error, IndexError) as error:
        raise BufferFormatError(f"{type(error).__name__}: {error}") from None


def elements_of(batch: pa.RecordBatch) -> list[Element]:
    """A batch of this format as elements, every record as it went; BufferFormatError if
    a ``__record`` text is not a record."""
    try:
        return list(zip(batch.column(0).to_pylist(), records_of(batch), strict=True))
    except BufferFormatError:
        raise
    except (pa.ArrowException, ValueError, TypeError, KeyError, AttributeError,
            ArithmeticError, RecursionError, UnicodeError) as error:
        raise BufferFormatError(f"{type(error).__name__}: {error}") from None


def records_of(batch: pa.RecordBatch) -> list[Any]:
    """A batch's records without their timestamps, as ``elements_of`` gives them (a
    function run over a column batch's rows takes them so, columnrows.py)."""
    return records_and_columns(batch)[0]


def records_and_columns(batch: pa.RecordBatch) -> tuple[list[Any], list[GivenColumn]]:
    """``records_of``, and each typed record column with the Python values made of it
    (none for tagged JSON): ``native_columns`` takes such a column back as it is for a
    field of records that holds those very values (a function that passes a field on)."""
    try:
        if batch.schema.names[1] == RECORD_COLUMN:
            texts = batch.column(1)
            if texts.null_count:
                raise BufferFormatError("a null record text")
            return [decode_record(text.decode("utf-8", "surrogatepass"))
                    for text in texts.to_pylist()], []
        columns = batch.columns[1:]
        values = [column.to_pylist() for column in columns]
        if batch.schema.names[1] == SCALAR_COLUMN:
            return values[0], [(columns[0], values[0])]
        return list(zip(*values, strict=True)), list(zip(columns, values, strict=True))
    except BufferFormatError:
        raise
    except (pa.ArrowException, ValueError, TypeError, KeyError, AttributeError,
            ArithmeticError, RecursionError, UnicodeError) as error:
        raise BufferFormatError(f"{type(error).__name__}: {error}") from None


def is_native(schema: pa.Schema) -> bool:
    """Whether a batch of this format holds its records as typed columns (not tagged
    JSON)."""
    try:
        _check_schema(schema)
    except BufferFormatError:
        return False
    return schema.names[1] != RECORD_COLUMN


def native_columns(records: Sequence[Any],
                   given: Sequence[GivenColumn] = ()) -> list[tuple[str, pa.Array]] | None:
    """The records as typed columns, or None when they are not all alike (see the module
    docstring). Checks run over whole columns (``set(map(type, ...))``), not per record
    in Python. A field whose values are, row for row, the very objects made of a
    ``given`` column (``records_and_columns``) is that column: no check, no conversion."""
    shapes = set(map(type, records))
    fields: Sequence[Sequence[Any]] | None
    if shapes == {tuple}:
        fields = _tuple_fields(records)
        if fields is None:
            return None
        names = [f"_{index + 1}" for index in range(len(fields))]
    elif shapes - {_NONE} and all(shape in NATIVE_TYPES for shape in shapes - {_NONE}):
        fields, names = [records], [SCALAR_COLUMN]
    else:
        return None
    columns = []
    for name, values in zip(names, fields, strict=True):
        array = _given_array(values, given)
        if array is None:
            array = _native_array(values)
        if array is None:
            return None
        columns.append((name, array))
    return columns


def _tuple_fields(records: Sequence[tuple[Any, ...]]) -> list[list[Any]] | None:
    """The fields of tuples all as wide as the first (at most ``MAX_FIELDS``), else None.
    Their widths add up to n times the first's, and none is narrower (its last field
    raises IndexError): so all are that wide, and a sum is cheaper than a set of them."""
    width = len(records[0])
    if not 0 < width <= MAX_FIELDS or sum(map(len, records)) != width * len(records):
        return None
    try:
        return [list(map(itemgetter(index), records)) for index in range(width)]
    except IndexError:
        return None


def _given_array(values: Sequence[Any], given: Sequence[GivenColumn]) -> pa.Array | None:
    """The given column whose values ``values`` are (``is``, so the same type and value,
    which the column gives back), unless all null (an all-None field is int64 here)."""
    for array, objects in given:
        if len(objects) == len(values) and array.null_count < len(array) \
                and all(map(is_, values, objects)):
            return array
    return None


def _native_array(values: Sequence[Any]) -> pa.Array | None:
    kinds = set(map(type, values)) - {_NONE}
    if len(kinds) > 1 or not kinds <= NATIVE_TYPES.keys():
        return None
    arrow_type = NATIVE_TYPES[kinds.pop()] if kinds else pa.int64()  # all None
    try:
        return pa.array(values, arrow_type)
    except (OverflowError, UnicodeEncodeError, pa.ArrowException):
        return None  # an int beyond int64, a str with a lone surrogate: as tagged JSON


def _row_sizes(arrays: Sequence[pa.Array]) -> np.ndarray:
    """Bytes of column data per row, near enough to cut buffers by."""
    sizes = np.zeros(len(arrays[0]), dtype=np.int64)
    for array in arrays:
        width = _FIXED_WIDTH.get(array.type)
        if width is not None:
            sizes += width
        else:
            lengths = pc.binary_length(array).fill_null(0)
            sizes += lengths.to_numpy(zero_copy_only=False) + _OFFSET_WIDTH
    return sizes


def _cuts(sizes: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Row ranges of at most ``limit`` bytes each (at least one row), as today's JSON
    buffers were cut: before the row that would take one past the limit."""
    ends = np.cumsum(sizes)
    cuts, start, count = [], 0, len(sizes)
    while start < count:
        before = int(ends[start - 1]) if start else 0
        end = max(start + 1, int(np.searchsorted(ends, before + limit, side="right")))
        cuts.append((start, end))
        start = end
    return cuts


def _stream(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _read_batch(payload: pa.Buffer) -> pa.RecordBatch:
    """The one record batch of an IPC stream of an accepted schema, read only after its
    metadata said it is uncompressed and not too long."""
    reader = pa.ipc.MessageReader.open_stream(payload)
    message = reader.read_next_message()
    if message.type != "schema":
        raise BufferFormatError(f"a stream that starts with a {message.type}")
    schema = pa.ipc.read_schema(message)
    _check_schema(schema)
    message = reader.read_next_message()
    if message.type != "record batch":
        raise BufferFormatError(f"a {message.type} where a record batch belongs")
    rows = _uncompressed_rows(message.metadata.to_pybytes())
    if rows > MAX_ROWS:
        raise BufferFormatError(f"a record batch of {rows} rows (at most {MAX_ROWS})")
    try:
        extra = reader.read_next_message()
    except StopIteration:
        return pa.ipc.read_record_batch(message, schema)
    raise BufferFormatError(f"a {extra.type} after the record batch")


def _check_schema(schema: pa.Schema) -> None:
    names, types = schema.names, schema.types
    if len(names) < 2 or names[0] != TIMESTAMP_COLUMN or types[0] != pa.float64():
        raise BufferFormatError(f"a schema without its timestamp column first: {names[:3]}")
    if names[1:] == [RECORD_COLUMN] and types[1] == pa.binary():
        return
    if len(names) - 1 > MAX_FIELDS:
        raise BufferFormatError(f"{len(names) - 1} record columns (at most {MAX_FIELDS})")
    expected = [SCALAR_COLUMN] if names[1:] == [SCALAR_COLUMN] \
        else [f"_{index}" for index in range(1, len(names))]
    if names[1:] != expected:
        raise BufferFormatError(f"record columns named {names[1:6]}")
    refused = [str(kind) for kind in types[1:] if kind not in _ACCEPTED]
    if refused:
        raise BufferFormatError(f"record columns of types {refused[:3]}")


def _uncompressed_rows(metadata: bytes) -> int:
    """The row count of a record batch message, from its flatbuffer (Arrow's
    Message.fbs: Message{version, header_type, header, bodyLength}, RecordBatch{length,
    nodes, buffers, compression}); BufferFormatError if its body is compressed. pyarrow
    has verified the flatbuffer; the reads are bounds-checked all the same."""
    message = _U32.unpack_from(metadata, 0)[0]
    kind = _field(metadata, message, 1)
    if kind is None or metadata[kind] != _RECORD_BATCH:
        raise BufferFormatError("a record batch message of another kind")
    header = _field(metadata, message, 2)
    if header is None:
        raise BufferFormatError("a record batch message without its header")
    batch = header + _U32.unpack_from(metadata, header)[0]
    if _field(metadata, batch, 3) is not None:
        raise BufferFormatError("a compressed record batch")
    length = _field(metadata, batch, 0)
    return 0 if length is None else _I64.unpack_from(metadata, length)[0]


def _field(data: bytes, table: int, index: int) -> int | None:
    """Where field ``index`` of the flatbuffer table at ``table`` is, None if absent."""
    vtable = table - _I32.unpack_from(data, table)[0]
    vtable_size = _U16.unpack_from(data, vtable)[0]
    entry = 4 + 2 * index
    if entry + 2 > vtable_size:
        return None
    offset = _U16.unpack_from(data, vtable + entry)[0]
    return table + offset if offset else None
