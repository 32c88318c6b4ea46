"""Result partitions: how a producer subtask writes its output for each consumer, and how
a consumer subtask reads what its producers wrote (Flink's blocking exchange).

Layout, under the producer attempt's ``output_dir``::

    <target vertex id>.<input index>/         one folder per output edge
        _schema.json                          the columns, for consumers of empty output
        __part=<p>/part-*.parquet             result partition p
        __part=<p>/_complete.json             its data files, once the producer finished

An edge has ``partitions_per_producer`` partitions: one for FORWARD and BROADCAST, one
per consumer subtask for HASH and REBALANCE (the ExecutionGraph's wiring says which
partitions a consumer subtask reads). A producer that finished has written every
partition folder with its completion marker, empty or not, so a consumer tells an empty
partition (a marker listing no files) from a missing one (no marker, a listed file gone:
the producer ran where this machine cannot see, or its files were deleted). A missing
one fails the consumer with PartitionNotFound, naming the partition and its producer,
never reads as empty. Records that are Python values are stored as tagged JSON in one
``__record`` column; tables keep their columns. HASH partitions by
``pmod(hash(key string), n)`` computed by Spark, the key string coming from columns or
from ``records.key_string``. Runs on the slot thread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
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
from clusterdeck.core.engine.tally import Tally
from clusterdeck.core.jobapi.errors import SubtaskFailed
from clusterdeck.core.protocol.failures import unreachable_ids
from clusterdeck.core.protocol.jobgraph import JobEdge, ShipStrategy
from clusterdeck.core.protocol.wiring import ResultPartitionRef
from clusterdeck.core.protocol.workdir import COMPLETE_FILE

PARTITION_COLUMN = "__part"
KEY_COLUMN = "__key"
SCHEMA_FILE = "_schema.json"
NAMED_IN_MESSAGE = 3  # missing partitions a PartitionNotFound message names one by one


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
class InputPartition:
    """One result partition a consumer subtask reads: where it is, which of the
    consumer's inputs it feeds and who wrote it (named when it cannot be read)."""

    path: str
    target_vertex_id: str
    input_index: int
    producer: ResultPartitionRef

    def describe(self) -> str:
        ref = self.producer
        where = f" on TaskManager {ref.taskmanager_id}" if ref.taskmanager_id else ""
        return (f"partition {ref.partition} of input {self.input_index} of "
                f"{self.target_vertex_id} at {self.path}, written by "
                f"{ref.producer_vertex_id}[{ref.producer_subtask}] (attempt "
                f"{ref.producer_attempt_id}{where})")


MAX_LOST_PRODUCERS = 500  # about 45 bytes each: well inside one rpc.framesize


class PartitionNotFound(SubtaskFailed):
    """Result partitions a subtask must read are missing or unreadable (Flink's
    PartitionNotFoundException). Running the subtask again would read the same nothing:
    ``lost_producers`` (their attempt ids) must run again first, and the JobMaster's
    failover does that when the failure names them."""

    def __init__(self, missing: Sequence[tuple[InputPartition, str]], attempt_id: str,
                 unreachable: Iterable[str] = ()) -> None:
        named = "; ".join(f"{partition.describe()}: {why}"
                          for partition, why in missing[:NAMED_IN_MESSAGE])
        more = len(missing) - NAMED_IN_MESSAGE
        message = f"result partition not found: {named}" + (
            f"; and {more} more" if more > 0 else "")
        super().__init__(message, vertex_id=missing[0][0].target_vertex_id,
                         attempt_id=attempt_id)
        self.missing = tuple(partition for partition, _ in missing)
        # Bounded, so the failure always fits one message: producers beyond it are found
        # missing by the next attempt, which names them in turn.
        self.lost_producers = tuple(dict.fromkeys(
            partition.producer.producer_attempt_id for partition in self.missing
        ))[:MAX_LOST_PRODUCERS]
        # The producers' TaskManagers whose data service did not answer a fetch (not one
        # that answered "not here"): the JobMaster blocks them for the job, so their
        # producers run again where this consumer can reach them.
        self.unreachable = unreachable_ids(unreachable)


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


def declare_partitions(output_dir: str, edge: JobEdge, consumer_parallelism: int,
                       records_written: int = 0) -> list[ResultPartition]:
    """Every result partition of the edge, its folder created (empty when nothing was
    written to it) and marked complete, once the producer has finished writing.

    Spark's executors write the files; when they do not share this machine's disk (a
    Spark cluster behind the TaskManager, ``spark.master``) the files land where no
    marker can list them, and the partitions would read as empty. ``records_written``
    records with no data file in sight fail the producer instead (OutputNotVisible)."""
    partitions, files = [], 0
    for partition in range(partitions_per_producer(edge.ship_strategy, consumer_parallelism)):
        path = result_partition_path(output_dir, edge.target, edge.input_index, partition)
        os.makedirs(path, exist_ok=True)
        files += _mark_complete(path)
        partitions.append(ResultPartition(edge.target, edge.input_index, partition, path))
    if records_written and not files:
        raise output_not_visible(records_written, edge.target,
                                 edge_dir(output_dir, edge.target, edge.input_index))
    return partitions


def output_not_visible(records_written: int, written_for: str, folder: str) -> SubtaskFailed:
    """Records counted as written with no data file in sight: Spark's executors wrote them
    on a disk this machine does not see, and passing on nothing would lose them silently."""
    return SubtaskFailed(
        f"OutputNotVisible: {records_written} records were written for {written_for}, "
        f"but no data file is in {folder} on this machine: Spark's executors wrote them "
        f"elsewhere. With a Spark cluster behind the TaskManagers (spark.master), the "
        f"clusterdeck home's data folder must be on a filesystem the executors share "
        f"(docs/distributed.md).", vertex_id=written_for)


def _mark_complete(path: str) -> int:
    """Write the partition's completion marker, listing its data files; written whole or
    not at all (a rename), so a reader never takes half a list for the partition.
    Returns how many files it lists."""
    files = sorted(name for name in os.listdir(path) if _is_data_file(name))
    marker = os.path.join(path, COMPLETE_FILE)
    with open(f"{marker}.tmp", "w", encoding="utf-8") as out:
        json.dump({"files": files}, out)
    os.replace(f"{marker}.tmp", marker)
    return len(files)


def _is_data_file(name: str) -> bool:
    return name.endswith(".parquet") and not name.startswith(("_", "."))


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


@dataclass(frozen=True)
class Unfetched:
    """Why a partition could not be fetched; ``unanswered`` when its TaskManager's data
    service did not answer at all (cut off, a port closed one way), as opposed to answering
    that it does not have the partition."""

    why: str
    unanswered: bool = False


FetchMissing = Callable[[Sequence[InputPartition]], dict[InputPartition, Unfetched]]


def read_inputs(work: Work, inputs: Sequence[Sequence[InputPartition]],
                fetch_missing: FetchMissing | None = None
                ) -> list[tuple[Stream, Callable[[], int]]]:
    """Per input edge, the records of its result partitions and how many there are (call
    after the subtask's Spark jobs). Partitions this machine cannot see are first given
    to ``fetch_missing`` (which copies them here from the TaskManagers that wrote them and
    says why for those it cannot). Every partition is checked before any is read, so one
    PartitionNotFound names all that are missing and failover reruns their producers in
    one go."""
    found, missing = _located(p for edge in inputs for p in edge)
    unfetched: dict[InputPartition, Unfetched] = {}
    if missing and fetch_missing is not None:
        unfetched = fetch_missing(list(missing))
        fetched, still = _located(p for p in missing if p not in unfetched)
        found.update(fetched)
        missing = {**{partition: f"{why}; {unfetched[partition].why}"
                      for partition, why in missing.items() if partition in unfetched},
                   **still}
    if missing:
        raise PartitionNotFound(list(missing.items()), work.attempt_id, unreachable=(
            p.producer.taskmanager_id for p, u in unfetched.items()
            if u.unanswered and p.producer.taskmanager_id))
    return [_read_edge(work, [(partition.path, found[partition]) for partition in edge])
            for edge in inputs]


def _located(partitions: Iterable[InputPartition]
             ) -> tuple[dict[InputPartition, list[str]], dict[InputPartition, str]]:
    """The partitions' data files where they can be read here, and why for the others."""
    found: dict[InputPartition, list[str]] = {}
    missing: dict[InputPartition, str] = {}
    for partition in partitions:
        try:
            found[partition] = partition_files(partition.path)
        except IncompletePartition as problem:
            missing[partition] = str(problem)
    return found, missing


class IncompletePartition(Exception):
    """Why one result partition cannot be read (``partition_files``)."""


def partition_files(path: str) -> list[str]:
    """The data files of the complete result partition at ``path``, as its producer's
    completion marker lists them; raises IncompletePartition when the folder, the marker
    or a listed file is missing, or the marker cannot be read."""
    if not os.path.isdir(path):
        raise IncompletePartition("its folder does not exist")
    try:
        with open(os.path.join(path, COMPLETE_FILE), encoding="utf-8") as handle:
            names = json.load(handle)["files"]
        files = [os.path.join(path, name) for name in names]
    except FileNotFoundError:
        raise IncompletePartition(f"it has no completion marker ({COMPLETE_FILE}): its "
                                  f"producer never finished it") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise IncompletePartition(f"its completion marker cannot be read: "
                                  f"{type(error).__name__}: {error}") from None
    gone = [file for file in files if not os.path.isfile(file)]
    if gone:
        raise IncompletePartition(f"{len(gone)} of its {len(files)} data files are gone, "
                                  f"e.g. {os.path.basename(gone[0])}")
    return files


def _read_edge(work: Work, partitions: Sequence[tuple[str, list[str]]]
               ) -> tuple[Stream, Callable[[], int]]:
    """The records of one edge's complete partitions (folder, data files), and how many
    there are; partitions without files are empty."""
    with_data = [path for path, files in partitions if files]
    schema = _schema_near([path for path, _ in partitions])
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
                Tally(lambda: counter.value, counter))
    return counted_table(work, df)


def _schema_near(paths: Sequence[str]) -> StructType | None:
    for path in paths:
        schema_file = os.path.join(os.path.dirname(os.path.normpath(path)), SCHEMA_FILE)
        if os.path.isfile(schema_file):
            with open(schema_file, encoding="utf-8") as handle:
                return StructType.fromJson(json.loads(handle.read()))
    return None
