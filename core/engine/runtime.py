"""One subtask attempt's Spark work: the contract a TaskManager calls on a slot thread.

``run_subtask`` runs a vertex's operator chain for one subtask, start to end, on the
calling thread, against the TaskManager's SparkSession:

* a source subtask pulls input splits from ``splits`` (the JobMaster serves them) and
  processes them in batches of about ``split_batch_bytes``, or its ``split_share`` of the
  source's input in bytes (from its deployment; 0: none known) when that is smaller (a
  small input would else go whole to the first subtask to ask), so splits keep flowing to
  the subtasks that are free;
* any other subtask reads its result partitions (``inputs``: per input edge, in
  ``input_index`` order, the partitions it must read and who wrote them);
* the chain's output goes to each output edge as result partitions under
  ``output_dir`` (which must be the attempt's own), or into its sink.

Its Spark jobs run in the job group ``attempt_id``; ``cancel_subtask`` (any thread)
stops them and the call raises SubtaskCancelled. A failure raises SubtaskFailed with the
user's traceback; an input partition that is missing or unreadable raises its subclass
PartitionNotFound before any Spark work, naming the partitions and their producers. A
PySpark script vertex runs the script (``script.py``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from clusterdeck.core.engine.cancellation import attempt_scope, cancel_subtask
from clusterdeck.core.engine.combine import keyed_fold
from clusterdeck.core.engine.exchange import (
    FetchMissing,
    HashKey,
    InputPartition,
    PartitionNotFound,
    ResultPartition,
    declare_partitions,
    read_inputs,
    write_exchange,
)
from clusterdeck.core.engine.liveoutput import LiveOutput
from clusterdeck.core.engine.localexecution import (
    DEFAULT_MAX_RECORDS,
    generated_source,
    local_chain,
    run_locally,
    runs_locally,
    small_text,
    source_items,
)
from clusterdeck.core.engine.operators import apply, takes_records
from clusterdeck.core.engine.script import Submission, run_pyspark_script
from clusterdeck.core.engine.sinks import FileSinkWriter, collect_rows
from clusterdeck.core.engine.sources import generates_nothing, read_source
from clusterdeck.core.engine.streams import Records, Stream, Work, cache, counted
from clusterdeck.core.engine.tally import LiveCounts, size_of
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.counters import CounterScope
from clusterdeck.core.jobapi.errors import SubtaskCancelled, SubtaskFailed
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.jobapi.plan import KeySpec, UserCode
from clusterdeck.core.jobapi.tracebacks import in_process_traceback, last_line, worker_traceback
from clusterdeck.core.protocol.jobgraph import (
    InputSplit,
    JobEdge,
    JobKind,
    JobVertex,
    OperatorSpec,
    ShipStrategy,
    is_url,
)

DEFAULT_SPLIT_BATCH_BYTES = 64 * 1024 * 1024

__all__ = ["DEFAULT_SPLIT_BATCH_BYTES", "SubtaskResult", "cancel_subtask", "run_subtask"]


@dataclass(frozen=True)
class SubtaskResult:
    """What a finished attempt reports (JSON-able via ``to_dict``): records read and
    emitted, counter totals, the result partitions it wrote, the rows of its collect sink
    (op id -> rows), the files its file sink published (op id -> paths), the ids of the
    splits it read, and a script's output."""

    vertex_id: str
    subtask_index: int
    attempt_id: str
    records_in: int = 0
    records_out: int = 0
    counters: dict[str, int | float] = field(default_factory=dict)
    partitions: tuple[ResultPartition, ...] = ()
    collected: dict[str, list[Any]] = field(default_factory=dict)
    sink_files: dict[str, list[str]] = field(default_factory=dict)
    splits: tuple[int, ...] = ()
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    # The file holding all of ``stdout`` when the attempt wrote it as it printed (a
    # streaming print sink: an unbounded stream's output is not kept in memory); ``stdout``
    # is then its end. "" when ``stdout`` is all of it.
    stdout_file: str = ""
    # Not reported: whether this thread made a Spark call (its TaskManager then does not
    # reuse the thread for another attempt: PySpark pins thread-local state to it).
    used_spark: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"vertex_id": self.vertex_id, "subtask_index": self.subtask_index,
                "attempt_id": self.attempt_id, "records_in": self.records_in,
                "records_out": self.records_out, "counters": dict(self.counters),
                "partitions": [p.to_dict() for p in self.partitions],
                "collected": dict(self.collected), "sink_files": dict(self.sink_files),
                "splits": list(self.splits), "stdout": self.stdout, "stderr": self.stderr,
                "duration": self.duration, "stdout_file": self.stdout_file}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> SubtaskResult:
        return SubtaskResult(
            data["vertex_id"], int(data["subtask_index"]), data["attempt_id"],
            int(data.get("records_in", 0)), int(data.get("records_out", 0)),
            dict(data.get("counters", {})),
            tuple(ResultPartition.from_dict(p) for p in data.get("partitions", ())),
            dict(data.get("collected", {})), dict(data.get("sink_files", {})),
            tuple(data.get("splits", ())), data.get("stdout", ""), data.get("stderr", ""),
            float(data.get("duration", 0.0)), stdout_file=data.get("stdout_file", ""))


def run_subtask(spark: SparkSession, job: LoadedJob, vertex_id: str, subtask_index: int,
                attempt_id: str, inputs: Sequence[Sequence[InputPartition]],
                splits: Iterable[InputSplit], output_dir: str | os.PathLike[str],
                consumer_parallelism: Mapping[str, int] | None = None, *,
                split_batch_bytes: int = DEFAULT_SPLIT_BATCH_BYTES, split_share: int = 0,
                fetch_missing: FetchMissing | None = None,
                live: LiveOutput | None = None, counts: LiveCounts | None = None,
                first: bool = False,
                local_max_records: int = DEFAULT_MAX_RECORDS) -> SubtaskResult:
    """Run one subtask attempt to its end on this thread (see the module docstring).

    ``consumer_parallelism``: target vertex id -> its parallelism, for the output edges
    (default: the graph's). ``fetch_missing``: how input partitions written on another
    machine are brought here (exchange.read_inputs). ``live``: where a PySpark script's
    output goes as it is printed, too (core/engine/liveoutput.py). ``first``: no attempt of
    this subtask ran since the job's sinks were initialized (sinks.py). ``local_max_records``:
    the most generated records a subtask runs without Spark (localexecution.py; 0: never).
    Raises SubtaskFailed
    (PartitionNotFound for an input that cannot be read) or SubtaskCancelled.
    """
    started = time.monotonic()
    vertex = job.graph.vertex(vertex_id)
    if job.kind is JobKind.PYSPARK_SCRIPT:
        try:
            return _run_script(spark, job, vertex, subtask_index, attempt_id, started, live)
        except (SubtaskFailed, SubtaskCancelled):
            raise
        except Exception as exc:
            raise failure_of(exc, vertex_id, subtask_index, attempt_id) from exc
    run = _Run(job, vertex, subtask_index, attempt_id, os.fspath(output_dir),
               dict(consumer_parallelism or {}), fetch_missing, first, counts,
               local_max_records)
    if generated_source(vertex):
        splits = list(splits)  # a range's or collection's parts come with the deployment
        local = runs_locally(job, vertex, splits, local_max_records)
    else:
        local = False
    description = f"{job.graph.name}: {vertex.name} ({subtask_index + 1}/{vertex.parallelism})"
    with (attempt_scope(spark.sparkContext, attempt_id, description, lazy=True)
          as (cancelled, group),
          CounterScope(spark.sparkContext, job.counter_names) as counters):
        work = Work(spark, attempt_id, cancelled, fresh=True, first_use=group.enter)
        try:
            if local:
                run.splits.extend(split.split_id for split in splits)
                run.locally(source_items(job, vertex, splits), cancelled)
            elif vertex.is_source:
                for batch in _batches(splits, _batch_bytes(split_batch_bytes, split_share)):
                    run.splits.extend(split.split_id for split in batch)
                    batch = [split for split in batch if not run.empty(split)]
                    lines = run.small_text(batch)
                    if lines is not None:
                        run.locally(lines, cancelled)
                        run.counts.bytes_in += _split_bytes(batch)
                    elif batch:
                        run.batch(work, batch=batch)
            else:
                run.batch(work, inputs=inputs)
            sink_files = run.finish()
        except Exception as exc:
            run.abort()
            if cancelled() or isinstance(exc, SubtaskCancelled):
                raise SubtaskCancelled(attempt_id) from exc
            if isinstance(exc, PartitionNotFound):
                raise  # already says what is missing; failover needs its producers
            raise failure_of(exc, vertex_id, subtask_index, attempt_id) from exc
        finally:
            work.release()
        totals = counters.values()
    return SubtaskResult(
        vertex_id, subtask_index, attempt_id, run.counts.records_in, run.counts.records_out,
        totals,
        tuple(run.partitions), run.collected, sink_files, tuple(run.splits),
        duration=time.monotonic() - started, used_spark=group.used)


class _Run:
    """The state of one attempt across its batches (slot thread only)."""

    def __init__(self, job: LoadedJob, vertex: JobVertex, subtask_index: int,
                 attempt_id: str, output_dir: str, consumer_parallelism: dict[str, int],
                 fetch_missing: FetchMissing | None = None, first: bool = False,
                 counts: LiveCounts | None = None, local_max_records: int = 0) -> None:
        self.job = job
        self.counts = counts or LiveCounts()  # the attempt's records: its result's too
        self.vertex = vertex
        self.subtask_index = subtask_index
        self.attempt_id = attempt_id
        self.output_dir = output_dir
        self.outputs = job.graph.outputs_of(vertex.id)
        self.consumer_parallelism = {
            edge.target: consumer_parallelism.get(edge.target,
                                                  job.graph.vertex(edge.target).parallelism)
            for edge in self.outputs}
        last = vertex.operators[-1]
        self.sink = last if vertex.is_sink else None
        self.writer = FileSinkWriter(last, subtask_index, attempt_id, first) \
            if last.kind in plan.FILE_SINKS else None
        self.splits: list[int] = []
        self.partitions: list[ResultPartition] = []
        self.fetch_missing = fetch_missing
        self.local_max_records = local_max_records
        self.local_text = (local_max_records > 0 and vertex.operators[0].kind == plan.SOURCE_TEXT
                           and local_chain(job, vertex))
        self.collected: dict[str, list[Any]] = {last.id: []} \
            if last.kind == plan.SINK_COLLECT else {}

    def locally(self, items: list[Any], cancelled: Callable[[], bool]) -> None:
        """The chain over a source's records without Spark (localexecution.py)."""
        rows = run_locally(self.job, self.vertex, items, self.writer, self.counts,
                           cancelled, self.attempt_id)
        for collected in self.collected.values():
            collected.extend(rows)

    def small_text(self, batch: Sequence[InputSplit]) -> list[str] | None:
        """The batch's lines when it runs without Spark (localexecution.py), else None."""
        if not (batch and self.local_text):
            return None
        return small_text(batch, self.local_max_records)

    def code(self, op_id: str) -> UserCode:
        return self.job.code.get(op_id, UserCode())

    def empty(self, split: InputSplit) -> bool:
        source = self.vertex.operators[0]
        return generates_nothing(source, self.code(source.id), split)

    def batch(self, work: Work, batch: Sequence[InputSplit] = (),
              inputs: Sequence[Sequence[InputPartition]] = ()) -> None:
        """Read a batch of splits (a source) or the inputs, run the chain, emit."""
        operators = list(self.vertex.operators)
        if self.vertex.is_source:
            source = read_source(work, operators[0], self.code(operators[0].id), batch,
                                 records_wanted=takes_records(_after(operators, 0)))
            streams: list[Stream] = [source.stream]
            records_read = [source.records]
            operators = operators[1:]
            bytes_read = _split_bytes(batch)
        else:
            read = read_inputs(work, inputs, self.fetch_missing)
            streams = [stream for stream, _ in read]
            records_read = [records for _, records in read]
            bytes_read = size_of([partition.path for edge in inputs for partition in edge])
        self.counts.reading = tuple(records_read)
        for op in operators:
            if op is self.sink:
                break
            streams = [apply(work, op, self.code(op.id), streams)]
        self._emit(work, streams[0])
        counts = self.counts  # the records read join the total as the batch stops counting
        counts.records_in, counts.reading = (
            counts.records_in + sum(records() for records in records_read), ())
        self.counts.bytes_in += bytes_read
        work.release()

    def _emit(self, work: Work, stream: Stream) -> None:
        """The chain's output into its sink or its output edges, counted as it goes."""
        if self.sink is not None and self.sink.kind == plan.SINK_COLLECT:
            rows = collect_rows(work, stream)
            self.collected[self.sink.id].extend(rows)
            self.counts.records_out += len(rows)
            return
        stream, records = counted(work, stream)
        self.counts.writing = (records,)
        if self.writer is not None:
            self.writer.write(work, stream)
        else:
            if len(self.outputs) > 1:
                stream = cache(work, stream)
            for edge in self.outputs:
                write_exchange(work, self._combined(stream, edge), self.output_dir, edge,
                               self.consumer_parallelism[edge.target], self.subtask_index,
                               self._hash_key(edge))
        self.counts.records_out, self.counts.writing = self.counts.records_out + records(), ()

    def _consumer_head(self, edge: JobEdge) -> OperatorSpec:
        return self.job.graph.vertex(edge.target).operators[0]

    def _combined(self, stream: Stream, edge: JobEdge) -> Stream:
        """Python records into a keyed sum, count or reduce, folded per key first."""
        head = self._consumer_head(edge)
        fold = keyed_fold(head, self.code(head.id)) \
            if edge.ship_strategy is ShipStrategy.HASH else None
        if fold is None or not isinstance(stream, Records):
            return stream
        return Records(stream.rdd.mapPartitions(fold.combine))

    def _hash_key(self, edge: JobEdge) -> HashKey | None:
        """The key a HASH edge partitions by, from the consuming operator."""
        head = self._consumer_head(edge)
        if head.kind in plan.KEYED:
            spec = KeySpec.from_params(head.params["key"])
            keys = self.code(head.id).keys
            return HashKey(spec.fields, keys[0] if spec.by_function and keys else None)
        if head.kind == plan.JOIN:
            return HashKey(tuple(head.params["left_on" if edge.input_index == 0 else "right_on"]))
        if head.kind == plan.SQL and head.params.get("partition_by"):
            return HashKey(tuple(head.params["partition_by"]))
        return None

    def finish(self) -> dict[str, list[str]]:
        for edge in self.outputs:
            self.partitions.extend(declare_partitions(
                self.output_dir, edge, self.consumer_parallelism[edge.target],
                self.counts.records_out))
        if self.writer is None:
            self.counts.bytes_out = size_of([self.output_dir])
            return {}
        published = self.writer.publish(self.counts.records_out)
        self.counts.bytes_out = size_of(published)
        return {self.writer.op.id: published}

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.discard()


def _after(operators: Sequence[OperatorSpec], index: int) -> OperatorSpec | None:
    return operators[index + 1] if index + 1 < len(operators) else None


def _split_bytes(splits: Sequence[InputSplit]) -> int:
    """Bytes a batch of splits reads: their ranges, or their whole files (0 when the
    source has no size: generated records, URLs)."""
    return sum(split.length if split.length >= 0 else
               size_of([split.path]) if split.path and not is_url(split.path) else 0
               for split in splits)


def _batch_bytes(split_batch_bytes: int, split_share: int) -> int:
    """How much a source subtask's batch holds: its share of the input when that is
    smaller (a share of 0 or less is none known)."""
    return min(split_batch_bytes, split_share) if split_share > 0 else split_batch_bytes


def _batches(splits: Iterable[InputSplit], max_bytes: int) -> Iterator[list[InputSplit]]:
    """Pull splits until a batch holds about ``max_bytes`` (only then the next pull)."""
    batch: list[InputSplit] = []
    size = 0
    for split in splits:
        batch.append(split)
        if split.length >= 0:
            size += split.length
        elif split.path and is_url(split.path):
            size = max_bytes  # no size known here: a URL is a batch of its own
        elif split.path:
            size += os.path.getsize(split.path)
        if size >= max_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def failure_of(exc: BaseException, vertex_id: str, subtask_index: int,
               attempt_id: str) -> SubtaskFailed:
    """An attempt's failure as the user should read it: the Python worker's traceback
    when Spark wrapped one, else the exception's own."""
    text = worker_traceback(str(exc))
    if text:
        message = last_line(text)
    else:
        text = in_process_traceback(exc)
        first = str(exc).strip().splitlines()
        message = f"{type(exc).__name__}: {first[0]}" if first else type(exc).__name__
    return SubtaskFailed(message, text, vertex_id=vertex_id, subtask_index=subtask_index,
                         attempt_id=attempt_id)


def _run_script(spark: SparkSession, job: LoadedJob, vertex: JobVertex, subtask_index: int,
                attempt_id: str, started: float, live: LiveOutput | None) -> SubtaskResult:
    params = vertex.operators[0].params
    submission = Submission(params.get("script", ""), params.get("cwd", ""),
                            dict(params.get("conf", {})))
    result = run_pyspark_script(spark, job.path, params.get("args", job.args), attempt_id,
                                submission, live)
    if result.cancelled:
        raise SubtaskCancelled(attempt_id)
    if not result.succeeded:
        message = last_line(result.traceback or "") or f"exit status {result.exit_code}"
        raise SubtaskFailed(message, result.traceback or "",
                            vertex_id=vertex.id, subtask_index=subtask_index,
                            attempt_id=attempt_id, stdout=result.stdout, stderr=result.stderr,
                            exit_code=result.exit_code)
    return SubtaskResult(vertex.id, subtask_index, attempt_id, stdout=result.stdout,
                         stderr=result.stderr, duration=time.monotonic() - started)
