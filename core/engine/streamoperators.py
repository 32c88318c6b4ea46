"""The operators of one streaming vertex, between its input (its source, or the exchange
from the vertex before it) and its output (its sink, or the exchange to the next one):
the task (streamtask.py) hands each batch of elements to ``StreamChain.process`` and
tells it each move of its input watermark with ``advance``; ``output_key`` is what the
exchange hashes when the vertex's output is keyed (docs/streaming.md, "Keyed streams and
windows").

A vertex's operators are ``[map/flat_map/filter/map_batches/assign_timestamps]*`` and at
most one keyed operator (a window, a running reduce/sum/count, or a process function with
value state, valuestate.py) followed by ``[map/flat_map/filter/map_batches]*``, the shape
the job API
accepts. Each batch runs in Spark as one partition function (streamfunctions.py): the
stateless operators, and a keyed operator's pre-aggregation of the batch per key and
window; its result is merged into the keyed state (keyedstate.py) here, in the task's
memory. The batch runner (continuous.py) sends it to the attempt's long-lived Spark task,
not a Spark job per batch. A process function takes a second batch (its keys' values
ship with it); what a keyed operator emits goes through the operators after it in one
more. Everything here runs on the task's slot thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from clusterdeck.core.engine.arrowbuffers import elements_of
from clusterdeck.core.engine.batchfunctions import BatchElements
from clusterdeck.core.engine.columnar import ColumnarWindowPartials, window_partials
from clusterdeck.core.engine.columnbatches import (
    ColumnarChain,
    ColumnarStage,
    FieldTimestamped,
    takes_columns,
)
from clusterdeck.core.engine.columnrows import RowFilter, RowFlatMap, RowMap, RowTimestamped
from clusterdeck.core.engine.combine import key_function
from clusterdeck.core.engine.continuous import BatchRunner, batch_runner
from clusterdeck.core.engine.keyedstate import (
    MAX_STATE_ENTRIES,
    ProcessState,
    RunningState,
    WindowState,
)
from clusterdeck.core.engine.records import NULL_KEY_PART, key_string
from clusterdeck.core.engine.streamfunctions import (
    Chained,
    Each,
    Element,
    PartitionFunction,
    RunningContributions,
    RunningPartials,
    Stage,
    WindowContributions,
    WindowPartials,
    state_key,
)
from clusterdeck.core.engine.valuestate import KeyedElement, KeyedProcess
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.jobapi.plan import KeySpec, UserCode
from clusterdeck.core.protocol.jobgraph import JobGraph, JobVertex, OperatorSpec, ShipStrategy
from clusterdeck.core.streaming.eventtime import BoundedOutOfOrderness
from clusterdeck.core.streaming.statebackend import KeyedStore

__all__ = ["Batch", "Element", "OutputKey", "StreamChain", "output_key"]

Batch = list[Element] | pa.RecordBatch
"""A batch of elements, or the same as a column batch (columnbatches.py)."""

BATCH_SECONDS = 0.1
"""Seconds of its operators' work a batch holds at most, by the pace of the batches
before (Flink's buffer timeout bounds a buffer's wait; this bounds how long a barrier
waits behind the batch before it)."""
FEWEST = 10  # records a batch may always hold, however slow its operators
FIRST_BATCH = 2000  # records of a batch before its operators' pace is known


class StreamChain:
    """The operators of one streaming vertex between its input (a source or the exchange)
    and its output (a sink or the exchange), on the slot thread.

    Its watermark: a chain that assigns timestamps carries its own bounded-out-of-
    orderness watermark (the largest timestamp its assigner saw, minus the bound, minus a
    millisecond), whatever comes in; any other carries the input watermark the task
    gives it. Its windows fire by that watermark; ``math.inf`` (the end of the input)
    fires them all. ``max_state_entries`` bounds its keyed state (keyedstate.py);
    ``store``: the task's embedded state backend that keeps it (None: its memory).
    ``close`` ends its batch runner's Spark task."""

    def __init__(self, spark: Any, job: LoadedJob, vertex: JobVertex, subtask: int,
                 parallelism: int, *, max_state_entries: int = MAX_STATE_ENTRIES,
                 store: KeyedStore | None = None) -> None:
        self.spark = spark
        self.vertex = vertex
        self.subtask = subtask
        self.parallelism = parallelism
        operators = list(vertex.operators)
        if operators and operators[0].kind.startswith("source."):
            operators.pop(0)
        if operators and operators[-1].kind.startswith("sink."):
            operators.pop()
        keyed = [index for index, op in enumerate(operators) if op.kind in plan.STREAMING_KEYED]
        if len(keyed) > 1:
            raise ValueError(f"{vertex.name} holds more than one keyed operator")
        cut = keyed[0] if keyed else len(operators)
        if any(op.kind not in plan.STATELESS for op in operators[cut + 1:]):
            raise ValueError(f"{vertex.name}: only map/flat_map/filter/map_batches may "
                             "follow its keyed operator")
        self._before = [_stage(op, job.code[op.id]) for op in operators[:cut]]
        self._after = [_stage(op, job.code[op.id]) for op in operators[cut + 1:]]
        stamps = [op for op in operators[:cut] if op.kind == plan.ASSIGN_TIMESTAMPS]
        self._max_delay = stamps[-1].params["max_out_of_orderness"] if stamps else None
        self._assigner: BoundedOutOfOrderness | None = None
        self._keyed = operators[cut] if keyed else None
        self._key: Callable[[Any], Any] | None = None
        self._windows: WindowState | None = None
        self._running: RunningState | None = None
        self._values: ProcessState | None = None
        self._process: KeyedProcess | None = None
        if self._keyed is not None:
            code = job.code[self._keyed.id]
            self._key = key_function(self._keyed, code)
            if self._keyed.kind == plan.WINDOW:
                self._windows = WindowState(self._keyed, code, max_state_entries, store)
            elif self._keyed.kind == plan.PROCESS:
                assert code.fn is not None
                self._values = ProcessState(max_state_entries, store)
                self._process = KeyedProcess(code.fn)
            else:
                self._running = RunningState(self._keyed, code, max_state_entries, store)
        self._watermark: float | None = None  # the output watermark, last returned
        self._runner: BatchRunner | None = None  # started by ``start`` or the first batch
        self._pace = 0.0  # seconds of work a record took in the batches before (0: none)
        self._work = 0.0  # seconds of work of the batch under way, as its runs report them
        self._output_pace = 0.0  # seconds a record of the last batches waited for consumers
        self._counter_names = job.counter_names
        self.restore(None)

    @property
    def takes_columns(self) -> bool:
        """Whether its batches may come as column batches: every operator before its
        keyed one runs over columns (``map_batches(format="arrow")``,
        ``assign_timestamps(field=...)``, and the per-record functions over the rows,
        columnrows.py; ``map_batches`` of records does not) and its keyed operator, if
        any, is a window whose pre-aggregation is vectorised (columnar.py). Its source or
        input gate then gives it columns, and it gives the exchange columns."""
        if not all(takes_columns(stage) for stage in self._before):
            return False
        return self._keyed is None or isinstance(self._columnar_tail(), ColumnarWindowPartials)

    def batch_limit(self, most: int) -> int:
        """How many records the next batch may hold, at most ``most``: as many as the
        batches before ran in ``BATCH_SECONDS``, at least ``FEWEST``, so that a barrier or
        a watermark behind a batch of a slow operator waits about that long, not for
        thousands of its records. The wait for slow consumers counts as work
        (``output_waited``): a barrier waits behind a batch still being sent as behind one
        still being processed. Before any batch, at most ``FIRST_BATCH``: a column batch
        may now hold a slow per-record function's rows (columnrows.py)."""
        if self._pace <= 0 and self._output_pace <= 0:
            return min(most, FIRST_BATCH)
        return max(FEWEST, min(most, int(BATCH_SECONDS / (self._pace + self._output_pace))))

    def output_waited(self, seconds: float, records: int) -> None:
        """The last batch of ``records`` waited ``seconds`` for its consumers to take its
        output (backpressure): the next batches hold about what they take in
        ``BATCH_SECONDS``, so checkpoints go on at the consumers' pace. The pace rises at
        once and falls by half a batch: a small batch that found room (the consumer had
        just drained the queue) must not make the next batch hold all a source owes,
        whose wait a barrier behind it would share (seconds, for a slow consumer)."""
        waited = seconds / records if records else 0.0
        self._output_pace = max(waited, (self._output_pace + waited) / 2)

    def process(self, elements: Batch) -> Batch:
        """One batch through the chain: its stateless operators in Spark, timestamps
        assigned, keyed state updated (Spark pre-aggregates the batch per key and window,
        and the result is merged into the state here), running aggregates emitted (one
        element per key the batch updated). Windows do not fire here: ``advance`` fires
        them. A chain with no operators passes the batch on without Spark. A column batch
        runs over columns (``takes_columns``) and comes out as one, or as elements where
        an operator could not keep it columns."""
        if not len(elements):
            return []
        if isinstance(elements, pa.RecordBatch) and not self.takes_columns:
            elements = elements_of(elements)
        self._work = 0.0
        out = self._processed_batch(elements)
        pace = self._work / len(elements)
        self._pace = pace if self._pace <= 0 else (self._pace + pace) / 2
        return out

    def _processed_batch(self, elements: Batch) -> Batch:
        if not self._before and self._keyed is None:
            return elements if isinstance(elements, pa.RecordBatch) else list(elements)
        if isinstance(elements, pa.RecordBatch):
            return self._processed_columns(elements)
        if self._windows is not None:
            windows = self._windows
            assert self._key is not None
            windows.merge(self._run(Chained(self._before, self._window_partials()), elements))
            return []
        if self._running is not None:
            running = self._running
            assert self._key is not None
            contributions = RunningContributions(self._key, running.aggregation.contribution)
            partials = self._run(Chained(self._before, RunningPartials(
                contributions, running.aggregation.merge)), elements)
            return self._after_keyed(running.merge(partials))
        if self._values is not None:
            return self._after_keyed(self._processed(elements))
        return self._run(Chained(self._before), elements)

    def _processed_columns(self, batch: pa.RecordBatch) -> Batch:
        """A column batch through ``ColumnarChain`` in Spark: into the window's state,
        or out as a column batch (or elements, where an operator fell back to them)."""
        stages: list[ColumnarStage] = self._before  # type: ignore[assignment]
        if self._windows is not None:
            tail = self._columnar_tail()
            assert isinstance(tail, ColumnarWindowPartials)
            self._windows.merge(self._run(ColumnarChain(stages, tail), [batch]))
            return []
        out = self._run(ColumnarChain(stages), [batch])
        return out[0] if out and isinstance(out[0], pa.RecordBatch) else out

    def _columnar_tail(self) -> ColumnarWindowPartials | None:
        windows, keyed, key = self._windows, self._keyed, self._key
        if windows is None or keyed is None or key is None:
            return None
        return window_partials(keyed, windows.assigner, windows.fired_to, key)

    def _window_partials(self) -> PartitionFunction:
        """The window's pre-aggregation of a batch of elements: vectorised over the
        whole batch for a declarative aggregate keyed by fields (columnar.py), else a
        Python call per record; both give the same partials."""
        windows = self._windows
        assert windows is not None and self._key is not None and self._keyed is not None
        columnar = self._columnar_tail()
        if columnar is not None and columnar.key_function is None:
            return columnar
        contributions = WindowContributions(self._key, windows.assigner,
                                            windows.aggregation.contribution,
                                            windows.fired_to)
        return WindowPartials(contributions, windows.aggregation.merge)

    def _processed(self, elements: list[Element]) -> list[Element]:
        """A ``process`` function's batch: a first run keys the elements, a second runs
        each key's elements through the function with that key's value, since the
        values to ship are known only once the keys are."""
        assert self._values is not None and self._key is not None \
            and self._process is not None
        keyed = self._run(Chained(self._before, Each(KeyedElement(self._key))), elements)
        groups = self._values.groups(keyed)
        return self._values.merge(self._run(Each(self._process), groups))

    def advance(self, watermark: float | None) -> tuple[list[Element], float | None]:
        """After each batch, and whenever the task's input watermark (the smallest over
        its input channels; None for a source vertex) moved: the windows this vertex's
        watermark fired, as elements through the operators after the window (by window
        end, then key), and the watermark its output carries now (None while it has
        none). That watermark is its assigner's if it assigns timestamps, else the one
        given; ``math.inf`` (end of input) passes through and fires every open window.
        It never goes back: a smaller one than before returns the one before."""
        if watermark == math.inf:
            current: float | None = math.inf
        elif self._assigner is not None:
            current = self._assigner.watermark()
        else:
            current = watermark
        fired: list[Element] = []
        if current is not None and self._windows is not None:
            fired = self._after_keyed(self._windows.fire(current))
        if current is not None and current > -math.inf \
                and (self._watermark is None or current > self._watermark):
            self._watermark = current
        return fired, self._watermark

    def snapshot(self) -> Any:
        """The chain's state as JSON data: its assigner's largest timestamp, its open
        windows (and late count), running values or process values. Taken between two
        batches."""
        largest = self._assigner.snapshot() if self._assigner is not None else -math.inf
        return {"largest_timestamp": None if largest == -math.inf else largest,
                "windows": self._windows.snapshot() if self._windows is not None else None,
                "running": self._running.snapshot() if self._running is not None else None,
                "values": self._values.snapshot() if self._values is not None else None}

    def restore(self, state: Any) -> None:
        """From ``snapshot``'s data, or afresh (None)."""
        if state is None:
            state = {"largest_timestamp": None, "windows": None, "running": None}
        elif any((state.get(part) is not None) != (mine is not None) for part, mine in
               (("windows", self._windows), ("running", self._running),
                ("values", self._values))):
            raise ValueError(f"{self.vertex.name}: the state restored is not this chain's "
                             "(a window's state for a running aggregate, say)")
        if self._max_delay is not None:
            self._assigner = BoundedOutOfOrderness(self._max_delay)
            if state["largest_timestamp"] is not None:
                self._assigner.restore(float(state["largest_timestamp"]))
        if self._windows is not None:
            self._windows.restore(state["windows"])
        if self._running is not None:
            self._running.restore(state["running"])
        if self._values is not None:
            self._values.restore(state.get("values"))
        self._watermark = None

    @property
    def late_records(self) -> int:
        """Records dropped because every window they fall into had fired."""
        return self._windows.late_records if self._windows is not None else 0

    @property
    def counters(self) -> dict[str, int | float]:
        """The user's counters, summed over this attempt's batches."""
        if self._runner is None:
            return dict.fromkeys(self._counter_names, 0)
        return self._runner.counters

    def worker_pid(self) -> int | None:
        """The Spark Python worker running its batches now (any thread: one read)."""
        runner = self._runner
        return runner.pid if runner is not None else None

    def start(self) -> None:
        """The attempt starts (in its ``attempt_scope``): a chain that runs its batches
        in Spark starts its Spark task now, so its Python worker is ready by the first
        batch. Idempotent."""
        if self._runner is None and (self._before or self._keyed is not None):
            self._runner = batch_runner(self.spark, self._counter_names)
        if self._runner is not None:
            self._runner.start()

    def close(self) -> None:
        """The attempt ends: its Spark task ends too. Idempotent."""
        if self._runner is not None:
            self._runner.close()

    def _run(self, function: PartitionFunction, items: list[Any]) -> list[Any]:
        """One batch through Spark; its largest timestamp to the assigner."""
        if self._runner is None:
            self._runner = batch_runner(self.spark, self._counter_names)
        outcome = self._runner.run(function, items)
        self._work += outcome.seconds
        if self._assigner is not None:
            self._assigner.on_record(outcome.largest)
        return outcome.results

    def _after_keyed(self, elements: list[Element]) -> list[Element]:
        """What the keyed operator emitted through the operators after it (in order)."""
        if not elements or not self._after:
            return elements
        return self._run(Chained(self._after), elements)


class OutputKey:
    """A record's key string for a HASH exchange (``output_key``); ``fields``: the key
    fields when the key is given by them (the exchange then groups a column batch's rows
    by those columns, columnbatches.key_groups), None for a key function."""

    def __init__(self, key: Callable[[Any], Any], fields: tuple[str | int, ...] | None) -> None:
        self.key = key
        self.fields = fields

    def __call__(self, record: Any) -> str:
        text = key_string(state_key(self.key(record)))
        return NULL_KEY_PART if text is None else text


def output_key(job: LoadedJob, graph: JobGraph, vertex_id: str) -> OutputKey | None:
    """For a vertex whose output edge is HASH: the function giving a record's key string
    (the consumer's key spec, records.key_string; lists as tuples, a missing key as
    ``NULL_KEY_PART``), which the exchange hashes with a stable hash to pick the consumer
    subtask; None when its output is not keyed."""
    hashed = [edge for edge in graph.outputs_of(vertex_id)
              if edge.ship_strategy is ShipStrategy.HASH]
    if not hashed:
        return None
    head = graph.vertex(hashed[0].target).operators[0]
    spec = KeySpec.from_params(head.params["key"])
    return OutputKey(key_function(head, job.code[head.id]),
                     None if spec.by_function else tuple(spec.fields))


def _stage(op: OperatorSpec, code: UserCode) -> Stage:
    """A stateless operator (or the timestamp assigner) over a batch's elements, each
    keeping its input's timestamp (a batch function's: the batch's largest,
    batchfunctions.py)."""
    fn = code.fn
    if op.kind == plan.MAP:
        return RowMap(fn)
    if op.kind == plan.FLAT_MAP:
        return RowFlatMap(fn)
    if op.kind == plan.FILTER:
        return RowFilter(fn)
    if op.kind == plan.MAP_BATCHES:
        return BatchElements(fn, op.params["format"])
    if op.kind == plan.ASSIGN_TIMESTAMPS:
        if op.params.get("field") is not None:
            return FieldTimestamped(op.params["field"])
        return RowTimestamped(fn)
    raise ValueError(f"{op.kind} is not a stateless streaming operator")
