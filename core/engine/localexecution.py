"""Local execution: a subtask whose whole input is a few generated records runs its chain
in the TaskManager's own Python process, with no Spark job.

A Spark job costs the same whatever it reads: a one-row subtask paid about 0.1 s of
scheduling, closure cleaning and a Python worker's round trip for a microsecond of
work (docs/benchmarks.md, section 14), 7x slower than Spark's own tasks. As Spark once
ran small ``take()`` jobs in the driver (``spark.localExecution.enabled``), a source
subtask whose chain is maps, flat maps, filters and batch functions into a text or
collect sink runs here when its input is small:

- a range or a collection whose parts (they come with the deployment) hold at most
  ``max_records`` records: the whole subtask;
- a batch of text splits of at most ``max_records`` lines and ``max_records`` KiB, in
  plain files on this machine: that batch (a bigger one, a URL or a compressed file goes
  to Spark's readers). Lines end at ``\n``, ``\r\n`` or ``\r``, as Spark's text reader
  cuts them.

Anything else takes the Spark path unchanged.

The user's functions and the collection's items are pickled and unpickled first, inside
the attempt's CounterScope, as they are on their way to a Spark worker: the attempt gets
its own copies, and its counters are bound to its own accumulators. Records stream
through the chain one at a time (a flat map's output is never held whole; a batch
function's input and output are: all of the subtask's records, one batch); the attempt's
cancellation is checked as they go. Runs on the slot thread.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pyspark import cloudpickle

from clusterdeck.core.engine.batchfunctions import BatchFunction
from clusterdeck.core.engine.records import to_jsonable
from clusterdeck.core.engine.sinks import FileSinkWriter
from clusterdeck.core.engine.sources import generated_count
from clusterdeck.core.engine.tally import LiveCounts
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.errors import SubtaskCancelled
from clusterdeck.core.jobapi.inputsplits import is_compressed, part_bounds, read_lines
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.jobapi.plan import UserCode
from clusterdeck.core.protocol.jobgraph import (
    InputSplit,
    JobKind,
    JobVertex,
    OperatorSpec,
    is_url,
)

DEFAULT_MAX_RECORDS = 1000  # 0 turns local execution off
_GENERATED = frozenset({plan.SOURCE_RANGE, plan.SOURCE_COLLECTION})
_CHAINABLE = frozenset({plan.MAP, plan.FLAT_MAP, plan.FILTER, plan.MAP_BATCHES})
_SINKS = frozenset({plan.SINK_TEXT, plan.SINK_COLLECT})
_CHECK_EVERY = 256  # records between two looks at the cancellation flag
_LINE_END = re.compile(rb"\r\n|\n|\r")


def generated_source(vertex: JobVertex) -> bool:
    """A source whose splits are parts of a range or a collection: all given up front."""
    return vertex.is_source and vertex.operators[0].kind in _GENERATED


def local_chain(job: LoadedJob, vertex: JobVertex) -> bool:
    """Whether the vertex's chain can run here at all (module docstring)."""
    operators = vertex.operators
    return (job.kind is JobKind.DATAFLOW and vertex.is_source and vertex.is_sink
            and operators[0].kind in _GENERATED | {plan.SOURCE_TEXT}
            and operators[-1].kind in _SINKS
            and all(op.kind in _CHAINABLE for op in operators[1:-1]))


def runs_locally(job: LoadedJob, vertex: JobVertex, splits: Sequence[InputSplit],
                 max_records: int) -> bool:
    """Whether the subtask of a generated source reading ``splits`` runs here. Empty
    parts do not: the Spark path skips them without a Spark job, and sooner."""
    return (generated_source(vertex) and local_chain(job, vertex)
            and 0 < _records(job, vertex.operators[0], splits) <= max_records)


def small_text(splits: Sequence[InputSplit], max_records: int) -> list[str] | None:
    """The lines of a batch of text splits when it is small enough to read here, else
    None (module docstring)."""
    if any(not split.path or is_url(split.path) or is_compressed(split.path)
           for split in splits):
        return None
    size = sum(split.length if split.length >= 0 else os.path.getsize(split.path)
               for split in splits)
    if size > max_records * 1024:
        return None
    lines: list[str] = []
    for split in splits:
        lines.extend(read_lines(split.path, split.start, split.length)
                     if split.length >= 0 else _file_lines(split.path))
        if len(lines) > max_records:
            return None
    return lines


def _file_lines(path: str) -> list[str]:
    with open(path, "rb") as stream:
        data = stream.read()
    lines = _LINE_END.split(data)
    if data.endswith((b"\n", b"\r")) or not data:
        lines.pop()
    return [line.decode("utf-8", "replace") for line in lines]


def source_items(job: LoadedJob, vertex: JobVertex,
                 splits: Sequence[InputSplit]) -> list[Any]:
    """The records of a generated source's parts."""
    source = vertex.operators[0]
    count = generated_count(source, job.code.get(source.id, UserCode()))
    bounds = [part_bounds(count, s.part, s.parts) for s in splits]
    if source.kind == plan.SOURCE_RANGE:
        start = source.params["start"]
        return [start + i for lo, hi in bounds for i in range(lo, hi)]
    items = list(job.code.get(source.id, UserCode()).items or ())
    return [item for lo, hi in bounds for item in items[lo:hi]]


def run_locally(job: LoadedJob, vertex: JobVertex, items: list[Any],
                writer: FileSinkWriter | None, counts: LiveCounts,
                cancelled: Callable[[], bool], attempt_id: str) -> list[Any]:
    """Run the chain over the source's ``items`` on this thread, inside the attempt's
    CounterScope; adds to ``counts``. ``writer``: the text sink's, which stages the
    lines (its ``publish`` is the caller's); None for a collect sink, whose rows are
    returned."""
    _source, *chain, _sink = vertex.operators
    items, functions = _copies(items, [job.code.get(op.id, UserCode()).fn for op in chain])
    counts.records_in += len(items)
    records: Iterator[Any] = _watched(iter(items), cancelled, attempt_id)
    for op, fn in zip(chain, functions, strict=True):
        records = _apply(op, fn, records)
    emitted = _Counted(records)
    collected = []
    if writer is None:
        collected = [to_jsonable(record) for record in emitted]
    else:
        writer.write_lines(emitted)
    counts.records_out += emitted.seen
    return collected


def _records(job: LoadedJob, source: OperatorSpec, splits: Sequence[InputSplit]) -> int:
    count = generated_count(source, job.code.get(source.id, UserCode()))
    return sum(hi - lo for lo, hi in (part_bounds(count, s.part, s.parts) for s in splits))


def _copies(items: list[Any], functions: list[Any]) -> tuple[list[Any], list[Any]]:
    """What a Spark worker would get: fresh copies, counters bound to this attempt."""
    return cloudpickle.loads(cloudpickle.dumps((items, functions)))  # type: ignore[no-any-return]


def _apply(op: OperatorSpec, fn: Any, records: Iterator[Any]) -> Iterator[Any]:
    if op.kind == plan.MAP:
        return map(fn, records)
    if op.kind == plan.FLAT_MAP:
        return itertools.chain.from_iterable(map(fn, records))
    if op.kind == plan.MAP_BATCHES:  # the subtask's records are its one batch
        return iter(BatchFunction(fn, op.params["format"])(records))
    return filter(fn, records)


def _watched(records: Iterator[Any], cancelled: Callable[[], bool],
             attempt_id: str) -> Iterator[Any]:
    for index, record in enumerate(records):
        if index % _CHECK_EVERY == 0 and cancelled():
            raise SubtaskCancelled(attempt_id)
        yield record


class _Counted:
    """Passes records on and counts them."""

    def __init__(self, records: Iterable[Any]) -> None:
        self._records = records
        self.seen = 0

    def __iter__(self) -> Iterator[Any]:
        for record in self._records:
            self.seen += 1
            yield record
