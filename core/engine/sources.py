"""Reading a batch of input splits into a stream, on a source subtask's slot thread.

Whole files go through Spark's own readers (``read.text``, ``read.csv``, ``read.parquet``);
byte ranges of big text files are read by ``splits.read_lines`` inside Spark's Python
workers (one Spark partition per range), which Spark's reader cannot be told to do.
Ranges become ``spark.range``, or Python ints generated in Spark's Python workers when the
next operator takes Python records anyway (``records_wanted``): a table of one row costs a
SQL plan, a second task and its conversion back into records, which was most of a one-row
subtask's time. A collection's part is parallelised from the job's code.

Each reader also says how many records it read (``SourceBatch.records``), which is only
final once the batch's Spark jobs have run: byte ranges are counted by an accumulator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from clusterdeck.core.engine.records import SCALAR_COLUMN
from clusterdeck.core.engine.streams import (
    CountingPartition,
    Records,
    Stream,
    Table,
    Work,
    as_table,
    counted_table,
    parse_schema,
)
from clusterdeck.core.engine.tally import Tally
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.inputsplits import part_bounds, read_lines
from clusterdeck.core.jobapi.plan import UserCode
from clusterdeck.core.protocol.jobgraph import InputSplit, OperatorSpec

RANGES_UNIONED = 8  # more intervals in one batch are built from a table of intervals


@dataclass
class SourceBatch:
    stream: Stream
    records: Callable[[], int]   # records read; call after the batch's Spark jobs


def read_source(work: Work, source: OperatorSpec, code: UserCode,
                splits: Sequence[InputSplit], *, records_wanted: bool = False) -> SourceBatch:
    """``records_wanted``: the chain's next operator works on Python records."""
    if source.kind == plan.SOURCE_RANGE and records_wanted:
        return _range_records(work, source.params, splits)
    reader = _READERS.get(source.kind)
    if reader is None:
        raise ValueError(f"unknown source kind {source.kind!r}")
    return reader(work, source.params, code, splits)


def generates_nothing(source: OperatorSpec, code: UserCode, split: InputSplit) -> bool:
    """A part of a collection or range with no element in it: read without a Spark job
    (a job of more subtasks than elements has such parts; each costs one otherwise)."""
    if source.kind not in (plan.SOURCE_RANGE, plan.SOURCE_COLLECTION):
        return False
    lo, hi = part_bounds(generated_count(source, code), split.part, split.parts)
    return hi <= lo


def generated_count(source: OperatorSpec, code: UserCode) -> int:
    """How many records a range or collection source holds over all its parts."""
    if source.kind == plan.SOURCE_RANGE:
        return max(0, source.params["end"] - source.params["start"])
    return len(code.items or ())


def _text(work: Work, params: dict[str, Any], code: UserCode,
          splits: Sequence[InputSplit]) -> SourceBatch:
    whole = [split.path for split in splits if split.length < 0]
    ranges = [(split.path, split.start, split.length) for split in splits if split.length >= 0]
    parts: list[SourceBatch] = []
    if whole:
        parts.append(SourceBatch(*counted_table(work, work.session.read.text(whole))))
    if ranges:
        lines = work.spark_context.accumulator(0)
        rdd = work.spark_context.parallelize(ranges, len(ranges)).flatMap(_read_range) \
            .mapPartitions(CountingPartition(lines))
        parts.append(SourceBatch(Records(rdd, f"{SCALAR_COLUMN} STRING"),
                                 Tally(lambda: lines.value, lines)))
    if len(parts) == 1:
        return parts[0]
    df = as_table(work, parts[0].stream).unionByName(as_table(work, parts[1].stream))
    return SourceBatch(Table(df), lambda: parts[0].records() + parts[1].records())


def _read_range(split: tuple[str, int, int]) -> Iterator[str]:
    return read_lines(*split)


def _csv(work: Work, params: dict[str, Any], code: UserCode,
         splits: Sequence[InputSplit]) -> SourceBatch:
    schema = parse_schema(params["schema"]) if params.get("schema") else None
    df = work.session.read.csv([split.path for split in splits], header=params["header"],
                               schema=schema)
    return SourceBatch(*counted_table(work, df))


def _parquet(work: Work, params: dict[str, Any], code: UserCode,
             splits: Sequence[InputSplit]) -> SourceBatch:
    df = work.session.read.parquet(*[split.path for split in splits])
    return SourceBatch(*counted_table(work, df))


def _collection(work: Work, params: dict[str, Any], code: UserCode,
                splits: Sequence[InputSplit]) -> SourceBatch:
    items = list(code.items or ())
    chosen: list[Any] = []
    for split in splits:
        lo, hi = part_bounds(len(items), split.part, split.parts)
        chosen.extend(items[lo:hi])
    slices = max(1, min(len(chosen), work.spark_context.defaultParallelism))
    return SourceBatch(Records(work.spark_context.parallelize(chosen, slices)),
                       lambda: len(chosen))


def _range(work: Work, params: dict[str, Any], code: UserCode,
           splits: Sequence[InputSplit]) -> SourceBatch:
    start, end = params["start"], params["end"]
    bounds = _merged(part_bounds(max(0, end - start), split.part, split.parts)
                     for split in splits)
    if len(bounds) > RANGES_UNIONED:
        return SourceBatch(Table(_intervals(work, start, bounds)),
                           lambda: sum(hi - lo for lo, hi in bounds))
    df = None
    for lo, hi in bounds:
        part = work.session.range(start + lo, start + hi)
        df = part if df is None else df.union(part)
    assert df is not None
    return SourceBatch(Table(df.withColumnRenamed("id", SCALAR_COLUMN)),
                       lambda: sum(hi - lo for lo, hi in bounds))


def _range_records(work: Work, params: dict[str, Any],
                   splits: Sequence[InputSplit]) -> SourceBatch:
    """The batch's parts of a range as Python ints, in as many Spark partitions as the
    session has cores but never more than there are numbers (a one-row part is one task)."""
    start, end = params["start"], params["end"]
    bounds = [(start + lo, start + hi) for lo, hi in
              _merged(part_bounds(max(0, end - start), split.part, split.parts)
                      for split in splits) if hi > lo]
    total = sum(hi - lo for lo, hi in bounds)
    context = work.spark_context
    slices = max(1, min(total, context.defaultParallelism))
    if len(bounds) == 1:
        rdd = context.range(*bounds[0], numSlices=slices)
    else:
        rdd = context.parallelize(bounds or [(0, 0)], max(1, min(len(bounds), slices))) \
            .flatMap(_interval_values)
    return SourceBatch(Records(rdd, f"{SCALAR_COLUMN} BIGINT"), lambda: total)


def _interval_values(bounds: tuple[int, int]) -> range:
    return range(*bounds)


def _intervals(work: Work, start: int, bounds: list[tuple[int, int]]) -> DataFrame:
    """Many intervals as one table: a union of hundreds of ``spark.range`` took Spark
    13-20 s to plan for 500 rows."""
    rows = [(start + lo, start + hi - 1) for lo, hi in bounds if hi > lo]
    df = work.session.createDataFrame(rows, "lo LONG, last LONG")
    return df.select(F.explode(F.sequence("lo", "last")).alias(SCALAR_COLUMN))


def _merged(bounds: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent parts as one interval: fewer ``spark.range`` to union."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(bounds):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged or [(0, 0)]


_READERS: dict[str, Callable[[Work, dict[str, Any], UserCode, Sequence[InputSplit]],
                             SourceBatch]] = {
    plan.SOURCE_TEXT: _text,
    plan.SOURCE_CSV: _csv,
    plan.SOURCE_PARQUET: _parquet,
    plan.SOURCE_COLLECTION: _collection,
    plan.SOURCE_RANGE: _range,
}
