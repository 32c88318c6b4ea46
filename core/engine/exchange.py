"""Result partitions: how a producer subtask writes its output for each consumer, and how
a consumer subtask reads what its producers wrote (Flink's blocking exchange).

Layout, under the producer attempt's ``output_dir``::

    <target vertex id>.<input index>/         one folder per output edge
        _schema.json                          the columns, for consumers of empty output
        __part=<p>/part-*.parquet             result partition p

An edge has ``partitions_per_producer`` partitions: one for FORWARD and BROADCAST, one
per consumer subtask for HASH and REBALANCE (the ExecutionGraph's wiring says which
partitions a consumer subtask reads). Every partition folder exists after a write, empty
or not. Records that are Python values are stored as tagged JSON in one ``__record``
column; tables keep their columns. HASH partitions by ``pmod(hash(key string), n)``
computed by Spark, the key string coming from columns or from ``records.key_string``.
Runs on the slot thread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from clusterdeck.core.engine.records import (
    KEY_SEPARATOR,
    NULL_KEY_PART,
    RECORD_COLUMN,
    Partial,
    decode_record_row,
    encode_record,
    field_key,
    key_string,
)
from clusterdeck.core.engine.streams import (
    CountingPartition,
    Records,
    Stream,
    Table,
    Work,
    as_records,
    column_names,
    counted_table,
    empty_records,
)
from clusterdeck.core.protocol.jobgraph import JobEdge, ShipStrategy

PARTITION_COLUMN = "__part"
KEY_COLUMN = "__key"
SCHEMA_FILE = "_schema.json"


@dataclass(frozen=True)
class ResultPartition:
    """One result partition a producer subtask wrote (JSON-able via ``to_dict``)."""

    target_vertex_id: str
    input_index: int
    partition: int
    path: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> ResultPartition:
        return ResultPartition(data["target_vertex_id"], int(data["input_index"]),
                               int(data["partition"]), data["path"])


@dataclass(frozen=True)
class HashKey:
    """The key a HASH edge partitions by: columns (``fields``) or a function."""

    fields: tuple[str | int, ...]
    function: Callable[[Any], Any] | None = None


def partitions_per_producer(strategy: ShipStrategy, consumer_parallelism: int) -> int:
    if strategy in (ShipStrategy.HASH, ShipStrategy.REBALANCE):
        return consumer_parallelism
    return 1


def edge_dir(output_dir: str | os.PathLike[str], target_vertex_id: str, input_index: int) -> str:
    return os.path.join(os.fspath(output_dir), f"{target_vertex_id}.{input_index}")


def result_partition_path(output_dir: str | os.PathLike[str], target_vertex_id: str,
                          input_index: int, partition: int) -> str:
    """Where a producer attempt (writing under ``output_dir``) puts result partition
    ``partition`` of its edge to ``target_vertex_id`` (input ``input_index``)."""
    return os.path.join(edge_dir(output_dir, target_vertex_id, input_index),
                        f"{PARTITION_COLUMN}={partition}")


def write_exchange(work: Work, stream: Stream, output_dir: str, edge: JobEdge,
                   consumer_parallelism: int, subtask_index: int, key: HashKey | None) -> None:
    """Append ``stream`` to the edge's result partitions (one call per batch)."""
    count = partitions_per_producer(edge.ship_strategy, consumer_parallelism)
    folder = edge_dir(output_dir, edge.target, edge.input_index)
    df = _exchange_frame(work, stream, key if edge.ship_strategy is ShipStrategy.HASH else None)
    payload = [c for c in df.columns if c != KEY_COLUMN]
    if payload:
        work.check()
        if count == 1:
            df.select(*payload).write.mode("append").parquet(
                result_partition_path(output_dir, edge.target, edge.input_index, 0))
        else:
            df.withColumn(PARTITION_COLUMN, _partition_column(edge, df, key, count,
                                                              subtask_index)) \
                .select(*payload, PARTITION_COLUMN) \
                .write.mode("append").partitionBy(PARTITION_COLUMN).parquet(folder)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, SCHEMA_FILE), "w", encoding="utf-8") as out:
        out.write(df.select(*payload).schema.json())


def declare_partitions(output_dir: str, edge: JobEdge,
                       consumer_parallelism: int) -> list[ResultPartition]:
    """Every result partition of the edge, its folder created (empty when nothing was
    written to it), once the producer has finished writing."""
    partitions = []
    for partition in range(partitions_per_producer(edge.ship_strategy, consumer_parallelism)):
        path = result_partition_path(output_dir, edge.target, edge.input_index, partition)
        os.makedirs(path, exist_ok=True)
        partitions.append(ResultPartition(edge.target, edge.input_index, partition, path))
    return partitions


def _exchange_frame(work: Work, stream: Stream, key: HashKey | None) -> DataFrame:
    """The stream as the columns to store: a table's own (with Spark computing a key from
    them), or ``__record`` (+ ``__key`` computed in Python) for Python records."""
    if isinstance(stream, Table) and (key is None or key.function is None):
        return stream.df
    rdd = as_records(stream)
    if key is None:
        return work.session.createDataFrame(rdd.map(lambda r: (encode_record(r),)),
                                            f"{RECORD_COLUMN} STRING", verifySchema=False)
    key_of = key.function or field_key(key.fields)

    def stored(record: Any) -> tuple[str, str | None]:
        part = record.key if isinstance(record, Partial) else key_of(record)
        return encode_record(record), key_string(part)

    return work.session.createDataFrame(
        rdd.map(stored), f"{RECORD_COLUMN} STRING, {KEY_COLUMN} STRING", verifySchema=False)


def _partition_column(edge: JobEdge, df: DataFrame, key: HashKey | None, count: int,
                      subtask_index: int) -> Column:
    if edge.ship_strategy is ShipStrategy.REBALANCE:
        return F.pmod(F.monotonically_increasing_id() + F.lit(subtask_index), F.lit(count))
    assert key is not None
    if KEY_COLUMN in df.columns:
        key_column = F.col(KEY_COLUMN)
    else:
        names = column_names(df, key.fields)
        key_column = F.col(names[0]).cast("string") if len(names) == 1 else F.concat_ws(
            KEY_SEPARATOR, *[F.coalesce(F.col(n).cast("string"), F.lit(NULL_KEY_PART))
                             for n in names])
    return F.pmod(F.hash(key_column), F.lit(count))


def read_exchange(work: Work, paths: Sequence[str]) -> tuple[Stream, Callable[[], int]]:
    """The records of the given result partitions (missing or empty ones are empty), and
    how many there are (call after the subtask's Spark jobs)."""
    with_data = [path for path in paths if _has_data(path)]
    schema = _schema_near(paths)
    if with_data:
        reader = work.session.read if schema is None else work.session.read.schema(schema)
        df = reader.parquet(*with_data)
    elif schema is not None and schema.fields:
        df = work.session.createDataFrame([], schema)
    else:
        return empty_records(work), lambda: 0
    if df.columns == [RECORD_COLUMN]:
        counter = work.spark_context.accumulator(0)
        return (Records(df.rdd.mapPartitions(CountingPartition(counter, decode_record_row))),
                lambda: counter.value)
    return counted_table(work, df)


def _has_data(path: str) -> bool:
    return os.path.isdir(path) and any(
        name.endswith(".parquet") and not name.startswith(("_", "."))
        for name in os.listdir(path))


def _schema_near(paths: Sequence[str]) -> StructType | None:
    for path in paths:
        schema_file = os.path.join(os.path.dirname(os.path.normpath(path)), SCHEMA_FILE)
        if os.path.isfile(schema_file):
            with open(schema_file, encoding="utf-8") as handle:
                return StructType.fromJson(json.loads(handle.read()))
    return None
