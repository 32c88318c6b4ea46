"""Data buffers of the exchange as Arrow IPC: every record comes back exactly as today's
tagged JSON brings it back (types, NaN, -0.0, lone surrogates), buffers are cut by size
in order, and bytes that are not a buffer of the format fail with BufferFormatError,
never with another exception."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import Row

from clusterdeck.core.engine.arrowbuffers import (
    MAX_FIELDS,
    MAX_ROWS,
    BufferFormatError,
    decode_buffer,
    encode_buffers,
    native_columns,
)
from clusterdeck.core.engine.records import Partial, decode_record, encode_record

LIMIT = 32 * 1024


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down; NaN is NaN, -0.0 is not 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a)
                                                      == math.copysign(1, b))
    if isinstance(a, Row) and hasattr(a, "__fields__"):
        return a.__fields__ == b.__fields__ and same(tuple(a), tuple(b))
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    return a == b


def through_json(elements: list) -> list:
    """Today's path: each record through the engine's tagged JSON."""
    return [(None if t is None else float(t), decode_record(encode_record(r)))
            for t, r in elements]


def through_arrow(elements: list, limit: int = LIMIT) -> list:
    return [element for payload in encode_buffers(elements, limit)
            for element in decode_buffer(payload)]


texts = st.one_of(st.text(max_size=12),
                  st.text(alphabet=st.sampled_from(["\ud800", "\udfff", "a", "é", "\x00",
                                                    "😀"]), max_size=6))
ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(), st.just(-(2**63)))
floats = st.floats(allow_nan=True, allow_infinity=True)
FIELD_KINDS = [ints, floats, texts, st.booleans(), st.binary(max_size=8), st.none()]
timestamps = st.one_of(st.none(), st.floats(-1e9, 1e9), st.integers(-10**6, 10**6))
scalars = st.one_of(*FIELD_KINDS)
nested = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.one_of(texts, st.integers()), inner, max_size=3)), max_leaves=8)
others = st.one_of(nested, st.builds(lambda a, b: Row(a=a, b=b), scalars, scalars),
                   st.just(dt.date(2024, 2, 29)), st.just(decimal.Decimal("1.10")),
                   st.builds(Partial, scalars, ints))


@st.composite
def columnar_records(draw: Any) -> list:
    """Tuples of one width whose fields each keep one type, or None, or anything: native
    columns most of the time, a fallback to tagged JSON now and then (big ints, surrogates,
    one odd field)."""
    width = draw(st.integers(1, 5))
    kinds = [draw(st.sampled_from(FIELD_KINDS)) for _ in range(width)]
    field = [st.one_of(kind, st.none()) for kind in kinds]
    rows = draw(st.lists(st.tuples(*field), min_size=1, max_size=40))
    return [(draw(timestamps), row) for row in rows]


@settings(max_examples=150, deadline=None)
@given(columnar_records())
def test_tuples_of_plain_fields_come_back_exactly_as_through_tagged_json(elements) -> None:
    got, expected = through_arrow(elements), through_json(elements)
    assert len(got) == len(expected)
    assert all(same(a, b) for a, b in zip(got, expected, strict=True)), (got, expected)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(timestamps, st.one_of(scalars, others)), min_size=1, max_size=20))
def test_any_records_come_back_exactly_as_through_tagged_json(elements) -> None:
    got, expected = through_arrow(elements), through_json(elements)
    assert all(same(a, b) for a, b in zip(got, expected, strict=True)), (got, expected)
    assert len(got) == len(expected)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.tuples(st.integers(0, 9), texts)),
                min_size=1, max_size=300), st.integers(16, 2000))
def test_buffers_are_cut_by_size_in_order(elements, limit) -> None:
    payloads = encode_buffers(elements, limit)
    assert all(same(a, b) for a, b in zip(
        [e for p in payloads for e in decode_buffer(p)], through_json(elements), strict=True))
    for payload in payloads:
        rows = len(decode_buffer(payload))
        # each holds one row, or rows of at most `limit` bytes of data (plus the stream's
        # own schema and metadata, under a kilobyte)
        assert rows == 1 or len(payload) <= limit + 1024


def test_pairs_take_fewer_bytes_than_in_todays_json() -> None:
    elements = [(float(i), (i, f"key-{i % 10}")) for i in range(2000)]
    arrow = sum(map(len, encode_buffers(elements, LIMIT)))
    assert arrow < sum(len(json.dumps([t, encode_record(r)])) + 1 for t, r in elements)


def stream(batch: pa.RecordBatch, **options: Any) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema,
                           options=pa.ipc.IpcWriteOptions(**options)) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def batch(**columns: pa.Array) -> pa.RecordBatch:
    return pa.record_batch(list(columns.values()), names=list(columns))


TS = pa.array([1.0, 2.0])
REFUSED = {
    "no timestamp first": stream(batch(_1=pa.array([1, 2]))),
    "a timestamp of int64": stream(batch(timestamp=pa.array([1, 2]), _1=pa.array([1, 2]))),
    "a column type not accepted": stream(batch(timestamp=TS, _1=pa.array([1, 2], pa.int32()))),
    "a nested column": stream(batch(timestamp=TS, _1=pa.array([[1], [2]]))),
    "columns misnamed": stream(batch(timestamp=TS, _2=pa.array([1, 2]))),
    "too many columns": stream(pa.record_batch(
        [TS] + [pa.array([1, 2])] * (MAX_FIELDS + 1),
        names=["timestamp"] + [f"_{i + 1}" for i in range(MAX_FIELDS + 1)])),
    "a record text of the wrong type": stream(batch(timestamp=TS,
                                                    __record=pa.array(["1", "2"]))),
    "a tagged text that does not decode": stream(batch(
        timestamp=TS, __record=pa.array([b'{"zz": 1}', b"2"], pa.binary()))),
    "a record text that is not JSON": stream(batch(
        timestamp=TS, __record=pa.array([b"[", b"2"], pa.binary()))),
    "a null record text": stream(batch(timestamp=TS,
                                       __record=pa.array([b"1", None], pa.binary()))),
    "a compressed batch": stream(batch(timestamp=TS, _1=pa.array([1, 2])),
                                 compression="zstd"),
    "a dictionary column": stream(batch(timestamp=TS,
                                        _1=pa.array(["a", "b"]).dictionary_encode())),
    "two batches": stream(batch(timestamp=TS, _1=pa.array([1, 2])))[:-8]
    + stream(batch(timestamp=TS, _1=pa.array([1, 2]))).split(b"\xff\xff\xff\xff", 2)[-1],
    "a schema alone": stream(batch(timestamp=TS, _1=pa.array([1, 2])))[:200],
    "JSON of today": b'[[1.0, "{\\"t\\":[1,2]}"]]',
    "nothing": b"",
    "deep nesting": stream(batch(timestamp=TS[:1], __record=pa.array([b"[" * 100_000],
                                                                      pa.binary()))),
}


@pytest.mark.parametrize("payload", REFUSED.values(), ids=REFUSED.keys())
def test_a_buffer_not_of_the_format_is_refused(payload) -> None:
    with pytest.raises(BufferFormatError):
        decode_buffer(payload)


def test_a_batch_of_more_rows_than_a_buffer_can_hold_is_refused_before_it_is_read() -> None:
    rows = MAX_ROWS + 1
    payload = stream(batch(timestamp=pa.nulls(rows, pa.float64()),
                           value=pa.array([True] * rows)))
    with pytest.raises(BufferFormatError, match=f"{rows} rows"):
        decode_buffer(payload)


def test_a_string_column_of_invalid_utf8_is_refused_by_full_validation() -> None:
    good = stream(batch(timestamp=TS[:1], _1=pa.array(["abcdef"])))
    bad = good.replace(b"abcdef", b"abc\xff\xfe\xfd")
    with pytest.raises(BufferFormatError, match=r"(?i)utf"):
        decode_buffer(bad)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_never_raise_anything_else(payload) -> None:
    with contextlib.suppress(BufferFormatError):
        decode_buffer(payload)


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_a_damaged_buffer_decodes_or_is_refused_never_crashes(data) -> None:
    records = data.draw(st.sampled_from([[(1.0, (1, "a", 2.5, True, b"x"))] * 3,
                                         [(None, {"k": [1, 2]})] * 3, [(2.0, "word")] * 3]))
    payload = bytearray(encode_buffers(records, LIMIT)[0])
    for _ in range(data.draw(st.integers(1, 4))):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(BufferFormatError):
        decode_buffer(bytes(payload))


def test_a_field_of_a_given_columns_very_values_is_that_column_unless_all_null() -> None:
    strings, nulls = pa.array(["a", None, "b"]), pa.array([None, None], pa.string())
    values = strings.to_pylist()
    records = [(value, index) for index, value in enumerate(values)]
    columns = native_columns(records, [(strings, values)])
    assert columns is not None and columns[0][1] is strings
    copies = [(value, 1) for value in (None, None)]
    columns = native_columns(copies, [(nulls, [None, None])])
    assert columns is not None and columns[0][1].type == pa.int64()  # as without it


@pytest.mark.parametrize("records", [
    [(1, 2), (1,), (1, 2, 3)],  # widths adding up to twice three
    [(1, 2, 3), (1, 2, 3), ()],
    [(1,), (1, 2)],
])
def test_tuples_of_different_widths_are_not_columns_and_come_back_exactly(records) -> None:
    assert native_columns(records) is None
    elements = [(None, record) for record in records]
    assert decode_buffer(encode_buffers(elements, LIMIT)[0]) == elements
