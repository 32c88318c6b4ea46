"""The operators between sources and sinks, as Spark work on one subtask's data.

``apply`` runs one operator of a chain: Python operators (map, flat_map, filter,
map_batches, reduce)
on Records through Spark's Python workers, relational ones (join, sql, aggregate) on
Tables through Spark SQL. A keyed operator or a join sees, in its subtask, every record
of the keys hashed to it, so it groups or joins locally. Runs on the slot thread; user
functions run in Spark's Python workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from clusterdeck.core.engine.batchfunctions import BatchFunction
from clusterdeck.core.engine.combine import KeyedFold, key_function, keyed_fold
from clusterdeck.core.engine.records import (
    SCALAR,
    RowDecoder,
    record_to_row,
    table_shape,
)
from clusterdeck.core.engine.streams import (
    Records,
    Stream,
    Table,
    Work,
    as_records,
    as_table,
    column_names,
    empty_records,
)
from clusterdeck.core.engine.valuestate import BatchProcess, KeyedRecord
from clusterdeck.core.engine.workermarks import marked
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.plan import KeySpec, UserCode
from clusterdeck.core.protocol.jobgraph import OperatorSpec

Operator = Callable[[Work, OperatorSpec, UserCode, Sequence[Stream]], Stream]

# Operators that run Python functions on records (a filter keeps a table's columns, but
# pays for decoding rows into records and back): a source feeding one of them may as well
# produce records (sources.read_source).
_ON_RECORDS = frozenset({plan.MAP, plan.FLAT_MAP, plan.FILTER, plan.MAP_BATCHES, plan.REDUCE,
                         plan.PROCESS})


def takes_records(op: OperatorSpec | None) -> bool:
    """Whether ``op`` works on Python records whatever its input is."""
    return op is not None and op.kind in _ON_RECORDS


def apply(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    implementation = _OPERATORS.get(op.kind)
    if implementation is None:
        raise ValueError(f"unknown operator kind {op.kind!r}")
    if op.kind not in _ON_RECORDS:
        return implementation(work, op, code, inputs)
    # The Python worker running the user's function says whose records it runs, in the
    # Spark stage of its input and of its output (workermarks.py)
    return _marked(implementation(work, op, code, [_marked(stream) for stream in inputs]))


def _marked(stream: Stream) -> Stream:
    if isinstance(stream, Records):
        return Records(stream.rdd.mapPartitions(marked, preservesPartitioning=True),
                       stream.schema)
    return stream


def _map(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    return Records(as_records(inputs[0]).map(code.fn), op.params.get("schema"))


def _flat_map(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    return Records(as_records(inputs[0]).flatMap(code.fn), op.params.get("schema"))


def _map_batches(work: Work, op: OperatorSpec, code: UserCode,
                 inputs: Sequence[Stream]) -> Stream:
    """The user's function over each Spark partition's records at once (batchfunctions.py)."""
    assert code.fn is not None
    function = BatchFunction(code.fn, op.params["format"])
    return Records(as_records(inputs[0]).mapPartitions(function), op.params.get("schema"))


def _filter(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    stream, fn = inputs[0], code.fn
    assert fn is not None
    if isinstance(stream, Records):
        return Records(stream.rdd.filter(fn), stream.schema)
    df = stream.df   # keep the table's columns: filter the rows, not decoded records
    decode = RowDecoder(table_shape(df.columns))
    rows = df.rdd.filter(lambda row: fn(decode(row)))
    return Table(work.session.createDataFrame(rows, df.schema, verifySchema=False))


def _keyed_table(stream: Stream, spec: KeySpec) -> DataFrame | None:
    """The input as a table when the key is given by fields of a table, else None."""
    if isinstance(stream, Table) and not spec.by_function:
        return stream.df
    return None


def _key_column(df: DataFrame, spec: KeySpec) -> Column:
    names = column_names(df, spec.fields)
    if len(names) == 1:
        return F.col(names[0])
    return F.struct(*[F.col(name) for name in names])


def _fold(op: OperatorSpec, code: UserCode) -> KeyedFold:
    fold = keyed_fold(op, code)
    assert fold is not None
    return fold


def _reduce(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    fold = _fold(op, code)
    return Records(as_records(inputs[0]).map(fold.pair).reduceByKey(fold.merge).values())


def _process(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    """Each key's records in the order this subtask got them, through the user's function
    with a value state that starts empty (valuestate.py)."""
    assert code.fn is not None
    pairs = as_records(inputs[0]).map(KeyedRecord(key_function(op, code)))
    return Records(pairs.groupByKey().flatMap(BatchProcess(code.fn)))


def _count(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    spec = KeySpec.from_params(op.params["key"])
    df = _keyed_table(inputs[0], spec)
    if df is not None:
        return Table(df.groupBy(_key_column(df, spec).alias("_1"))
                     .agg(F.count(F.lit(1)).alias("_2")))
    fold = _fold(op, code)
    return Records(as_records(inputs[0]).map(fold.pair).reduceByKey(fold.merge))


def _sum(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    spec = KeySpec.from_params(op.params["key"])
    field = op.params.get("field")
    df = _keyed_table(inputs[0], spec)
    if df is not None and (field is not None or table_shape(df.columns) == SCALAR):
        column = column_names(df, [field if field is not None else 0])[0]
        return Table(df.groupBy(_key_column(df, spec).alias("_1"))
                     .agg(F.sum(column).alias("_2")))
    fold = _fold(op, code)
    return Records(as_records(inputs[0]).map(fold.pair).reduceByKey(fold.merge))


_AGGREGATES: dict[str, Callable[[Column], Column]] = {
    "sum": F.sum, "count": F.count, "min": F.min, "max": F.max, "avg": F.avg, "mean": F.avg,
    "first": F.first, "last": F.last, "collect_list": F.collect_list,
    "collect_set": F.collect_set, "count_distinct": F.count_distinct,
}


def _aggregate(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    spec = KeySpec.from_params(op.params["key"])
    if spec.by_function:
        key = code.keys[0]
        assert key is not None

        def with_key(record: Any) -> Any:
            return record_to_row({"key": key(record), **record_to_row(record).asDict()})

        df = as_table(work, Records(as_records(inputs[0]).map(with_key)))
        keys = ["key"]
    else:
        df = as_table(work, inputs[0])
        keys = column_names(df, spec.fields) if df.columns else []
    if not df.columns:
        return empty_records(work)
    aggregates = []
    for output, column, function in op.params["aggregations"]:
        target = F.lit(1) if column == "*" else F.col(column_names(df, [column])[0])
        aggregates.append(_AGGREGATES[function](target).alias(output))
    return Table(df.groupBy(*keys).agg(*aggregates))


def _join(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    left, right = as_table(work, inputs[0]), as_table(work, inputs[1])
    how = op.params["how"]
    if not (left.columns and right.columns):
        return _join_with_unknown_side(work, left, right, how)
    left_keys = column_names(left, op.params["left_on"])
    right_keys = column_names(right, op.params["right_on"])
    shared_keys = op.params["same_keys"] and left_keys == right_keys
    renamed = {c: f"{c}_right" for c in right.columns
               if c in left.columns and not (shared_keys and c in right_keys)}
    right = right.select([F.col(c).alias(renamed.get(c, c)) for c in right.columns])
    if shared_keys:
        return Table(left.join(right, on=left_keys, how=how))
    condition = [left[a] == right[renamed.get(b, b)]
                 for a, b in zip(left_keys, right_keys, strict=True)]
    return Table(left.join(right, on=condition, how=how))


def _join_with_unknown_side(work: Work, left: DataFrame, right: DataFrame, how: str) -> Stream:
    """A side without columns had no records and no declared schema: the join keeps the
    other side's rows where ``how`` says unmatched rows survive."""
    if left.columns and how in ("left", "full", "left_anti"):
        return Table(left)
    if right.columns and how in ("right", "full"):
        return Table(right)
    return empty_records(work)


def _sql(work: Work, op: OperatorSpec, code: UserCode, inputs: Sequence[Stream]) -> Stream:
    tables = [as_table(work, stream) for stream in inputs]
    unknown = [view for view, table in zip(op.params["tables"], tables, strict=True)
               if not table.columns]
    if len(unknown) == len(tables):
        return empty_records(work)   # no records at all, and no declared columns
    if unknown:
        raise ValueError(
            f"sql {op.name!r}: {', '.join(unknown)} had no records here and no declared "
            "columns; give schema= to the map/flat_map that produces them")
    for view, table in zip(op.params["tables"], tables, strict=True):
        table.createOrReplaceTempView(view)
    return Table(work.session.sql(op.params["query"]))


_OPERATORS: dict[str, Operator] = {
    plan.MAP: _map,
    plan.FLAT_MAP: _flat_map,
    plan.FILTER: _filter,
    plan.MAP_BATCHES: _map_batches,
    plan.REDUCE: _reduce,
    plan.COUNT: _count,
    plan.PROCESS: _process,
    plan.SUM: _sum,
    plan.AGGREGATE: _aggregate,
    plan.JOIN: _join,
    plan.SQL: _sql,
}
