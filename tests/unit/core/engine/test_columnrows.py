"""The user's per-record functions over a column batch's rows (columnrows.py), and a
window's key function over them (columnar.py), give exactly what the per-record path
gives on the same records: the same elements or partials, the same largest timestamp,
and when a function raises, the same error from the same record."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdeck.core.engine.arrowbuffers import decode_columns, elements_of, encode_buffers
from clusterdeck.core.engine.columnar import ColumnarWindowPartials
from clusterdeck.core.engine.columnbatches import ColumnarChain
from clusterdeck.core.engine.columnrows import RowFilter, RowFlatMap, RowMap, RowTimestamped
from clusterdeck.core.engine.streamfunctions import BATCH, Chained, Late, Stage
from clusterdeck.core.streaming.eventtime import TumblingWindows


def column_batch(elements: list) -> pa.RecordBatch:
    """The elements as the exchange sends them, in one buffer."""
    (payload,) = encode_buffers(elements, 1 << 30)
    return decode_columns(payload)


STAGES: list[Callable[[], Stage]] = [
    lambda: RowMap(lambda record: (record[0], f"key-{record[0] % 3}")),
    lambda: RowMap(lambda record: record[0]),  # scalars
    lambda: RowMap(lambda record: {"index": record}),  # not columns: the rest per record
    lambda: RowMap(lambda record: (record, 1 / record[0])),  # nested; 0 raises
    lambda: RowFilter(lambda record: record[0] % 2),  # None raises
    lambda: RowFlatMap(lambda record: [record] * (abs(record[0]) % 3)),
    lambda: RowTimestamped(lambda record: record[0] / 4),
    lambda: RowTimestamped(lambda record: record[0]),  # ints, or None: not a time
    lambda: RowTimestamped(lambda record: float("inf") if record[0] == 5 else 1.5),
]
records = st.tuples(st.one_of(st.none(), st.integers(-6, 6)),
                    st.sampled_from(["a", "é", ""]))


def outcome(run: Callable[[], list]) -> tuple[Any, float]:
    """What a run gives, or the error it raises (type and message), and the largest
    timestamp it saw."""
    BATCH.reset()
    try:
        return run(), BATCH.largest
    except Exception as error:
        return (type(error), str(error)), BATCH.largest


def as_elements(out: list) -> list:
    return elements_of(out[0]) if out and isinstance(out[0], pa.RecordBatch) else out


@settings(max_examples=300, deadline=None)
@given(st.lists(records, min_size=1, max_size=40),
       st.lists(st.integers(0, len(STAGES) - 1), min_size=1, max_size=4))
def test_functions_over_the_rows_give_the_per_record_elements_or_error(
        rows: list, chosen: list[int]) -> None:
    elements = [(None, record) for record in rows]
    over_columns = outcome(lambda: as_elements(ColumnarChain(
        [STAGES[index]() for index in chosen])(iter([column_batch(elements)]))))
    per_record = outcome(lambda: Chained([STAGES[index]() for index in chosen])(
        iter(elements)))
    assert over_columns == per_record


def test_a_chain_of_lambdas_keeps_its_batch_columns() -> None:
    elements = [(None, (index, "k")) for index in range(10)]
    stages = [STAGES[0](), STAGES[6](), RowFilter(lambda record: record[0] > 2)]
    (out,) = ColumnarChain(stages)(iter([column_batch(elements)]))
    assert isinstance(out, pa.RecordBatch)
    assert elements_of(out) == [(index / 4, (index, f"key-{index % 3}"))
                                for index in range(3, 10)]


def test_a_run_of_functions_keeps_its_rows_python_values_between_them() -> None:
    """Records that could not be columns (dicts) in the middle of a run of row stages
    stay rows: the run's last records are columns again, not elements."""
    elements = [(None, (index, "k")) for index in range(6)]
    stages = [RowMap(lambda record: {"index": record[0]}),
              RowTimestamped(lambda record: record["index"] / 2),
              RowMap(lambda record: (record["index"], "k"))]
    (out,) = ColumnarChain(stages)(iter([column_batch(elements)]))
    assert isinstance(out, pa.RecordBatch)
    assert elements_of(out) == [(index / 2, (index, "k")) for index in range(6)]


def test_the_error_of_a_function_over_the_rows_is_the_users_alone() -> None:
    """Run again per record, the error is not chained to the one over the columns."""
    stages = [STAGES[3]()]
    with pytest.raises(ZeroDivisionError) as raised:
        ColumnarChain(stages)(iter([column_batch([(None, (1, "a")), (None, (0, "b"))])]))
    assert raised.value.__context__ is None


KEY_FUNCTIONS: list[Callable[[Any], Any]] = [
    lambda record: record[1],
    lambda record: (record[0] % 2, record[1]),  # None raises
    lambda record: [record[0] == 1, 1.0] if record[0] else 1,  # 1 == 1.0 == True: one key
    lambda record: {"unhashable": record},  # fails as a key
]
timed = st.tuples(st.floats(0, 12, allow_nan=False).map(lambda t: round(t, 1)), records)


@settings(max_examples=200, deadline=None)
@given(st.lists(timed, min_size=1, max_size=50), st.integers(0, len(KEY_FUNCTIONS) - 1),
       st.sampled_from(["count", "sum"]), st.sampled_from([-math.inf, 4.0]))
def test_a_window_keyed_by_a_function_over_the_rows_gives_the_per_record_partials(
        rows: list, chosen: int, function: str, fired_to: float) -> None:
    elements = [(stamp, record) for stamp, record in rows]
    key = KEY_FUNCTIONS[chosen]

    def partials() -> ColumnarWindowPartials:
        return ColumnarWindowPartials((), function, None if function == "count" else 1,
                                      TumblingWindows(2.0), fired_to, key)

    over_columns = outcome(lambda: comparable(ColumnarChain([], partials())(
        iter([column_batch(elements)]))))
    per_record = outcome(lambda: comparable(partials().per_record(elements)))
    assert over_columns == per_record


def comparable(partials: list) -> list:
    return [(key, value.records if isinstance(value, Late) else value)
            for key, value in partials]


def data_address(array: pa.Array) -> int:
    return array.buffers()[1].address


def test_a_field_passed_on_is_the_input_column_again_a_new_field_is_converted() -> None:
    batch = column_batch([(None, (index * 1000, f"k{index}")) for index in range(5)])
    passed_on = RowMap(lambda record: (record[0], record[1] + "!"))
    (out,) = ColumnarChain([passed_on, STAGES[6]()])(iter([batch]))
    assert data_address(out.column(1)) == data_address(batch.column(1))
    assert data_address(out.column(2)) != data_address(batch.column(2))
    assert elements_of(out) == [(index * 250.0, (index * 1000, f"k{index}!"))
                                for index in range(5)]


def test_equal_values_that_are_not_the_columns_own_or_rows_filtered_are_converted() -> None:
    batch = column_batch([(None, (index * 1000, "k")) for index in range(5)])
    for stages, kept in (([RowMap(lambda record: (int(str(record[0])), "k"))], range(5)),
                         ([RowFilter(lambda record: record[0] > 0), RowMap(tuple)],
                          range(1, 5))):
        (out,) = ColumnarChain(stages)(iter([batch]))
        assert data_address(out.column(1)) != data_address(batch.column(1))
        assert elements_of(out) == [(None, (index * 1000, "k")) for index in kept]
