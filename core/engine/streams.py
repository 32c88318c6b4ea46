"""A subtask's data inside Spark: a Table (a DataFrame) or Records (an RDD of Python values).

Operators take whichever form suits them and convert with ``as_records`` / ``as_table``
following the record model of ``records.py``. Converting Records to a Table infers the
column types from *all* records (over a cached RDD, so user functions still run once per
record and counters stay exact) unless the producing operator declared ``schema=``.

``Work`` is the Spark side of one attempt: the session, what was cached, and the
cancellation check made before every Spark action. It lives on the attempt's slot thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import RDD, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    NullType,
    StringType,
    StructType,
    _parse_datatype_string,
)

from clusterdeck.core.engine.records import RowDecoder, record_to_row, record_to_tuple, table_shape
from clusterdeck.core.engine.tally import Tally
from clusterdeck.core.jobapi.errors import SubtaskCancelled


@dataclass
class Table:
    """A DataFrame. ``counter`` (see ``counted_table``) counts its rows as they are
    decoded into records; ``decoded`` says whether that happened."""

    df: DataFrame
    counter: Any = None
    decoded: bool = False


@dataclass
class Records:
    rdd: RDD
    schema: str | None = None   # declared by the operator that produced the records


Stream = Table | Records


class Work:
    """One attempt's Spark work, on its slot thread (see module docstring)."""

    def __init__(self, session: SparkSession, attempt_id: str,
                 cancelled: Callable[[], bool], *, fresh: bool = False,
                 first_use: Callable[[], None] | None = None) -> None:
        """``fresh``: the attempt works in a new session of ``session``'s, made when it
        first needs one (an attempt that reads only empty parts never does: a new
        session costs a few Py4J calls). ``first_use``: called on this thread before
        the attempt first touches Spark (it enters the attempt's job group)."""
        self._spark = session
        self._session: SparkSession | None = None if fresh else session
        self.attempt_id = attempt_id
        self._cancelled = cancelled
        self._cached: list[Any] = []
        self._first_use = first_use

    def _touch(self) -> None:
        if self._first_use is not None:
            first_use, self._first_use = self._first_use, None
            first_use()

    @property
    def session(self) -> SparkSession:
        self._touch()
        if self._session is None:
            self._session = self._spark.newSession()
        return self._session

    @property
    def spark_context(self) -> Any:
        self._touch()
        return self._spark.sparkContext

    def check(self) -> None:
        """Called before each Spark action: a cancelled attempt starts no new Spark job."""
        if self._cancelled():
            raise SubtaskCancelled(self.attempt_id)

    def cache(self, data: Any) -> Any:
        data.persist(StorageLevel.MEMORY_AND_DISK)
        self._cached.append(data)
        return data

    def release(self) -> None:
        for data in self._cached:
            data.unpersist()
        self._cached.clear()


def parse_schema(text: str) -> StructType:
    """A schema kept as text in the graph: a StructType's JSON, or a DDL string (needs a
    running SparkContext)."""
    if text.lstrip().startswith("{"):
        return StructType.fromJson(json.loads(text))
    from_ddl = getattr(DataType, "fromDDL", None) or _parse_datatype_string  # pyspark < 4
    schema = from_ddl(text)
    if not isinstance(schema, StructType):
        raise ValueError(f"schema {text!r} is not a list of columns")
    return schema


def as_records(stream: Stream) -> RDD:
    if isinstance(stream, Records):
        return stream.rdd
    decode = RowDecoder(table_shape(stream.df.columns))
    if stream.counter is None:
        return stream.df.rdd.map(decode)
    stream.decoded = True
    return stream.df.rdd.mapPartitions(CountingPartition(stream.counter, decode))


def as_table(work: Work, stream: Stream) -> DataFrame:
    if isinstance(stream, Table):
        return stream.df
    if stream.schema:
        schema = parse_schema(stream.schema)
        names = schema.fieldNames()
        return work.session.createDataFrame(
            stream.rdd.map(lambda record: record_to_tuple(record, names)), schema)
    rows = work.cache(stream.rdd.map(record_to_row))
    work.check()
    if rows.isEmpty():
        return work.session.createDataFrame([], StructType([]))
    work.check()
    df = work.session.createDataFrame(rows, samplingRatio=1.0)
    nulls = {f.name for f in df.schema.fields if isinstance(f.dataType, NullType)}
    if nulls:
        df = df.select([F.col(c).cast(StringType()).alias(c) if c in nulls else F.col(c)
                        for c in df.columns])
    return df


def counted_table(work: Work, df: DataFrame) -> tuple[Table, Tally]:
    """A table read by a subtask, and how many rows it has (call after the Spark jobs):
    counted for free when the chain decodes it into records, else by a count job."""
    table = Table(df, work.spark_context.accumulator(0))

    def rows() -> int:
        if table.decoded:
            return table.counter.value
        work.check()
        return df.count()

    return table, Tally(rows, table.counter)


def counted(work: Work, stream: Stream) -> tuple[Stream, Tally]:
    """The stream, and how many records passed through it (call after the Spark jobs):
    Records are counted as they pass, a Table by a count job."""
    if isinstance(stream, Table):
        return stream, Tally(lambda: count(work, stream))
    counter = work.spark_context.accumulator(0)
    return (Records(stream.rdd.mapPartitions(CountingPartition(counter)), stream.schema),
            Tally(lambda: counter.value, counter))


class CountingPartition:
    """Passes a Spark partition's records on (through ``each`` when given) and adds their
    number to an accumulator once, at the partition's end: an add per record cost more
    than a word count's own work per record (picklable, for workers)."""

    def __init__(self, counter: Any, each: Callable[[Any], Any] | None = None) -> None:
        self.counter = counter
        self.each = each

    def __call__(self, records: Iterable[Any]) -> Iterator[Any]:
        seen = 0
        each = self.each
        for seen, record in enumerate(records, 1):  # noqa: B007 (seen counts them)
            yield record if each is None else each(record)
        self.counter.add(seen)


def column_names(df: DataFrame, fields: Sequence[str | int]) -> list[str]:
    """Key fields (names or positions) as the table's column names."""
    return [df.columns[f] if isinstance(f, int) else f for f in fields]


def cache(work: Work, stream: Stream) -> Stream:
    if isinstance(stream, Table):
        return Table(work.cache(stream.df))
    return Records(work.cache(stream.rdd), stream.schema)


def count(work: Work, stream: Stream) -> int:
    work.check()
    return stream.df.count() if isinstance(stream, Table) else stream.rdd.count()


def empty_records(work: Work) -> Records:
    return Records(work.spark_context.emptyRDD())
