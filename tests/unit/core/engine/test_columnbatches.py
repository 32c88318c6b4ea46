"""Column batches (columnbatches.py): every vectorised step gives what its per-record twin
gives on the same records: the rate source's columns are its records, a batch goes to
the consumers each of its records would go to, the stages and the window's
pre-aggregation over columns give the per-record elements and partials, and what columns
cannot do falls back to the per-record path, errors included."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdeck.core.engine import windowaggregates
from clusterdeck.core.engine.arrowbuffers import decode_columns, elements_of, encode_buffers
from clusterdeck.core.engine.batchfunctions import BatchElements
from clusterdeck.core.engine.columnar import ColumnarWindowPartials
from clusterdeck.core.engine.columnbatches import (
    ColumnarChain,
    FieldTimestamped,
    exchange_batch,
    rate_batch,
)
from clusterdeck.core.engine.records import field_key
from clusterdeck.core.engine.streamfunctions import BATCH, Chained
from clusterdeck.core.engine.streamio import _parts, keyed_subpartitions, subpartition_of
from clusterdeck.core.engine.streamoperators import OutputKey
from clusterdeck.core.streaming.eventtime import TumblingWindows
from clusterdeck.core.streaming.ratesource import rate_record


def column_batch(elements: list) -> pa.RecordBatch:
    """The elements as the exchange sends them, in one buffer."""
    (payload,) = encode_buffers(elements, 1 << 30)
    return decode_columns(payload)


@given(st.integers(0, 10**12), st.integers(1, 8), st.integers(0, 3000))
def test_the_rate_sources_columns_are_its_records(start: int, step: int, count: int) -> None:
    indices = range(start, start + step * count, step)
    assert elements_of(rate_batch(indices)) == [(None, rate_record(i)) for i in indices]


small_ints = st.integers(-3, 3)
keys = st.one_of(st.none(), st.sampled_from(["a", "b", "", "é", "key-1"]))
rows = st.tuples(st.one_of(st.none(), small_ints), keys, st.booleans(),
                 st.one_of(st.none(), st.sampled_from([b"x", b"", b"\xff"])))
KEYINGS = [(0,), (1,), (2,), (3,), ("_2",), (1, 0), (2, 1, 3)]


@settings(max_examples=200, deadline=None)
@given(st.lists(rows, min_size=1, max_size=60), st.sampled_from(KEYINGS),
       st.integers(1, 7))
def test_a_column_batch_goes_where_each_of_its_records_would_go(
        records: list, fields: tuple, consumers: int) -> None:
    batch = column_batch([(None, record) for record in records])
    key_of = OutputKey(field_key(fields), fields)
    chosen = keyed_subpartitions(batch, key_of, consumers)
    assert chosen is not None
    assert chosen.tolist() == [subpartition_of(key_of(record), consumers)
                               for record in records]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), small_ints), min_size=1, max_size=40).filter(
    lambda records: any(record is not None for record in records)),  # all None: JSON
       st.sampled_from([(0,), ("value",)]), st.integers(1, 5))
def test_scalar_records_keyed_by_themselves_go_where_each_would_go(
        records: list, fields: tuple, consumers: int) -> None:
    batch = column_batch([(None, record) for record in records])
    key_of = OutputKey(field_key(fields), fields)
    chosen = keyed_subpartitions(batch, key_of, consumers)
    assert chosen is not None
    assert chosen.tolist() == [subpartition_of(key_of(record), consumers)
                               for record in records]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, -0.0, 1.5, math.nan]), keys), min_size=1,
                max_size=40), st.integers(1, 5))
def test_float_keys_and_key_functions_go_where_each_record_would_go(
        records: list, consumers: int) -> None:
    """0.0 and -0.0, NaN: Arrow's equality is not Python's, so each row is keyed alone;
    a key function runs over the rows."""
    batch = column_batch([(None, record) for record in records])
    for key_of in (OutputKey(field_key((0,)), (0,)),
                   OutputKey(lambda record: f"{record[1]}/{record[0]}", None)):
        assert keyed_subpartitions(batch, key_of, consumers).tolist() == [
            subpartition_of(key_of(record), consumers) for record in records]


def arrow_keys(table: pa.Table) -> pa.Table:
    index = table.column("_1").to_numpy()
    names = pa.array(["k0", "k1", "k2"])
    key = pa.DictionaryArray.from_arrays(pa.array((index % 3).astype(np.int32)), names)
    return pa.table({"i": pa.array(index, pa.int32()), "key": key, "t": index / 4})


def records_keys(records: list) -> list:
    return [(index, f"k{index % 3}", index / 4) for index, _ in records]


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=50))
def test_stages_over_columns_give_the_per_record_elements(indices: list) -> None:
    rate = [(None, rate_record(i)) for i in indices]
    stages = [BatchElements(arrow_keys, "arrow"), FieldTimestamped(2)]
    BATCH.reset()
    (columns,) = ColumnarChain(stages)(iter([column_batch(rate)]))
    by_columns, largest = elements_of(columns), BATCH.largest
    BATCH.reset()
    per_record = Chained([BatchElements(records_keys, "records"), FieldTimestamped(2)])(
        iter(rate))
    assert by_columns == per_record
    assert largest == BATCH.largest == max(indices) / 4
    assert columns.schema.names == ["timestamp", "_1", "_2", "_3"]  # cast to the exchange's


def test_a_stage_that_cannot_keep_columns_hands_the_rest_elements() -> None:
    rate = [(None, rate_record(i)) for i in range(5)]
    nested = BatchElements(lambda t: pa.table({"l": [[1]] * t.num_rows}), "arrow")
    with pytest.raises(KeyError, match="has no field 'x'"):  # the per-record error
        ColumnarChain([nested, FieldTimestamped("x")])(iter([column_batch(rate)]))
    out = ColumnarChain([nested])(iter([column_batch(rate)]))
    assert out == [(None, [1])] * 5


def test_timestamps_from_a_field_that_is_not_a_number_fail_as_per_record() -> None:
    batch = column_batch([(None, (1, "a")), (None, (2, "b"))])
    with pytest.raises(TypeError, match="assign_timestamps\\(\\): the timestamp of"):
        FieldTimestamped(1).over_columns(batch)


def test_a_users_arrow_output_is_cast_to_the_exchanges_types_or_refused() -> None:
    stamps = pa.nulls(2, pa.float64())
    made = exchange_batch(stamps, pa.table({"a": pa.array([1, 2], pa.int8()),
                                            "b": pa.array(["x", "y"], pa.large_string())}))
    assert made is not None and made.schema.types[1:] == [pa.int64(), pa.string()]
    assert exchange_batch(stamps, pa.table({"a": [[1], [2]]})) is None
    assert exchange_batch(stamps, pa.table({"a": pa.array([1, 2], pa.uint64())})) is None


events = st.tuples(st.floats(0, 30, allow_nan=False).map(lambda t: round(t, 2)),
                   st.sampled_from(["a", "b", "c"]), st.integers(-5, 5))


@settings(max_examples=100, deadline=None)
@given(st.lists(events, min_size=1, max_size=80), st.sampled_from(["count", "sum", "max"]),
       st.sampled_from([0.0, 3.0, 11.0]))
def test_the_windows_partials_over_columns_are_the_per_record_ones(
        rows: list, function: str, fired_to: float) -> None:
    elements = [(t, (key, value)) for t, key, value in rows]
    partials = ColumnarWindowPartials((0,), function, None if function == "count" else 1,
                                      TumblingWindows(2.0), fired_to)
    assert function in windowaggregates.DECLARATIVE
    assert comparable(partials.over_columns(column_batch(elements))) \
        == comparable(partials.per_record(elements))


def comparable(partials: list) -> list[Any]:
    return [(key, (value.records if hasattr(value, "records") else value))
            for key, value in partials]


def test_a_batch_without_timestamps_fails_the_window_as_per_record() -> None:
    partials = ColumnarWindowPartials((0,), "count", None, TumblingWindows(1.0), -math.inf)
    with pytest.raises(ValueError, match="without a timestamp reached a window"):
        partials.over_columns(column_batch([(None, ("a", 1))]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 11), min_size=1, max_size=60), st.integers(1, 12))
def test_a_batch_split_among_its_consumers_keeps_each_ones_rows_in_order(
        chosen: list, consumers: int) -> None:
    """A filter per consumer for a few, one sort for more: the same parts."""
    chosen = [index % consumers for index in chosen]
    batch = column_batch([(None, (row, "k")) for row in range(len(chosen))])
    parts = _parts(batch, np.array(chosen), consumers)
    assert [(index, [record[0] for _, record in elements_of(part)])
            for index, part in parts] == [
        (index, [row for row, went in enumerate(chosen) if went == index])
        for index in range(consumers) if index in chosen]
