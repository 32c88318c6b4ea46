"""``map_batches`` functions as every path runs them (batchfunctions.py): a whole batch of
records, or its Arrow columns, in; records out; in a streaming chain each record out
timestamped with the batch's largest timestamp. No Spark: the functions are plain
Python, and local execution runs them as a Spark partition would."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from clusterdeck.core.engine.batchfunctions import BatchElements, BatchFunction
from clusterdeck.core.engine.localexecution import run_locally, source_items
from clusterdeck.core.engine.streamfunctions import Chained, MapElement
from clusterdeck.core.engine.tally import LiveCounts
from clusterdeck.core.jobapi.inputsplits import plan_splits
from clusterdeck.core.jobapi.loader import load_job


def test_a_records_function_gets_the_whole_batch_as_a_list_and_may_return_any_iterable():
    seen = []

    def pairs(records):
        seen.append(records)
        return ((record, len(records)) for record in records)

    assert BatchFunction(pairs, "records")(iter([3, 1, 2])) == [(3, 3), (1, 3), (2, 3)]
    assert seen == [[3, 1, 2]]


def test_an_empty_batch_is_not_given_to_the_function():
    def never(records):
        raise AssertionError("called with an empty batch")

    assert BatchFunction(never, "records")([]) == []
    assert BatchFunction(never, "arrow")(iter(())) == []


def test_a_records_function_that_returns_no_iterable_fails_saying_so():
    with pytest.raises(TypeError, match="returned NoneType, not an iterable of records"):
        BatchFunction(lambda records: None, "records")([1])
    with pytest.raises(TypeError, match="returned str"):
        BatchFunction(lambda records: "ab", "records")([1])


def test_an_arrow_function_gets_tuples_as_typed_columns_and_its_rows_come_back_as_tuples():
    def doubled(table: pa.Table) -> pa.Table:
        assert table.schema.names == ["_1", "_2"]
        assert table.schema.types == [pa.int64(), pa.string()]
        return pa.table({"key": table["_2"], "twice": pc.multiply(table["_1"], 2)})

    assert BatchFunction(doubled, "arrow")([(1, "a"), (2, None)]) == [("a", 2), (None, 4)]


def test_scalars_are_one_value_column_and_a_one_column_result_gives_scalars():
    def upper(table: pa.Table) -> pa.RecordBatch:
        assert table.schema.names == ["value"]
        return pa.record_batch([pc.utf8_upper(table["value"]).combine_chunks()],
                               names=["v"])

    assert BatchFunction(upper, "arrow")(["a", "b"]) == ["A", "B"]


@pytest.mark.parametrize("records, named", [
    ([{"a": 1}], "dict"),
    ([(1, "a"), (2,)], "tuple"),       # two lengths
    ([(1, "a"), ("b", 2)], "tuple"),   # a field of two types
    ([1, "a", [2]], "int, list, str"),
])
def test_a_batch_that_cannot_be_columns_fails_naming_its_records_types(records, named):
    with pytest.raises(TypeError, match=rf"a batch of {named} records cannot be Arrow columns"):
        BatchFunction(lambda table: table, "arrow")(records)


def test_an_arrow_function_must_return_a_table_or_record_batch():
    with pytest.raises(TypeError, match="returned list, not a pyarrow Table or RecordBatch"):
        BatchFunction(lambda table: table.to_pylist(), "arrow")([1, 2])


def test_in_a_streaming_chain_every_record_out_carries_the_largest_timestamp_in():
    chained = Chained([MapElement(lambda r: r * 10),
                       BatchElements(lambda records: [sum(records), max(records)], "records")])
    assert chained(iter([(2.0, 1), (5.0, 2), (3.0, 3)])) == [(5.0, 60), (5.0, 30)]
    assert chained(iter([(None, 1), (None, 2)])) == [(None, 30), (None, 20)]


def test_a_local_subtask_is_one_batch_through_its_batch_functions(tmp_path: Path):
    path = tmp_path / "job.py"
    path.write_text("def build(env):\n" + textwrap.indent(textwrap.dedent("""
        import pyarrow.compute as pc
        (env.from_range(0, 5)
            .map_batches(lambda records: [(r, len(records)) for r in records])
            .map_batches(lambda t: t.append_column("s", pc.add(t["_1"], t["_2"])),
                         format="arrow")
            .collect())
    """), "    "))
    job = load_job(path, ())
    vertex = job.graph.vertices[0]
    items = source_items(job, vertex, plan_splits(vertex))
    rows = run_locally(job, vertex, items, None, LiveCounts(), lambda: False, "attempt")
    assert rows == [[r, 5, r + 5] for r in range(5)]
