"""The operators of one streaming vertex, between its input (its source, or the exchange
from the vertex before it) and its output (its sink, or the exchange to the next one):
the task (streamtask.py) hands each batch of elements to ``StreamChain.process`` and
tells it each move of its input watermark with ``advance``; ``output_key`` is what the
exchange hashes when the vertex's output is keyed (docs/streaming.md, "Keyed streams and
windows").

A vertex's operators are ``[map/flat_map/filter/assign_timestamps]*`` and at most one
keyed operator (a window, a running reduce/sum/count, or a process function with value
state, valuestate.py) followed by ``[map/flat_map/filter]*``, the shape the job API
accepts. Each batch is one Spark job (``parallelize`` then the user's functions, as a
batch task): the stateless operators, and a keyed operator's pre-aggregation of the batch
per key and window with ``reduceByKey``; its result is merged into the keyed state
(keyedstate.py) here, in the task's memory. A process function takes a second job (its
keys' values ship with it). What a keyed operator emits goes through the operators after
it in one more small Spark job. Everything here runs on the task's slot thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from clusterdeck.core.engine.combine import key_function
from clusterdeck.core.engine.keyedstate import (
    MAX_STATE_ENTRIES,
    ProcessState,
    RunningState,
    WindowState,
)
from clusterdeck.core.engine.records import NULL_KEY_PART, key_string
from clusterdeck.core.engine.streamfunctions import (
    Element,
    FilterElement,
    FlatMapElement,
    LargestTimestamp,
    MapElement,
    PreAggregated,
    RunningContributions,
    Timestamped,
    WindowContributions,
    state_key,
)
from clusterdeck.core.engine.valuestate import KeyedElement, KeyedProcess
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.jobapi.plan import UserCode
from clusterdeck.core.protocol.jobgraph import JobGraph, JobVertex, OperatorSpec, ShipStrategy
from clusterdeck.core.streaming.eventtime import BoundedOutOfOrderness
from clusterdeck.core.streaming.statebackend import KeyedStore

__all__ = ["Element", "StreamChain", "output_key"]

Stage = tuple[OperatorSpec, UserCode]


class StreamChain:
    """The operators of one streaming vertex between its input (a source or the exchange)
    and its output (a sink or the exchange), on the slot thread.

    Its watermark: a chain that assigns timestamps carries its own bounded-out-of-
    orderness watermark (the largest timestamp its assigner saw, minus the bound, minus a
    millisecond), whatever comes in; any other carries the input watermark the task
    gives it. Its windows fire by that watermark; ``math.inf`` (the end of the input)
    fires them all. ``max_state_entries`` bounds its keyed state (keyedstate.py);
    ``store``: the task's embedded state backend that keeps it (None: its memory)."""

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
        self._before: list[Stage] = [(op, job.code[op.id]) for op in operators[:cut]]
        self._after: list[Stage] = [(op, job.code[op.id]) for op in operators[cut + 1:]]
        if any(op.kind not in plan.STATELESS for op, _ in self._after):
            raise ValueError(f"{vertex.name}: only map/flat_map/filter may follow its "
                             "keyed operator")
        stamps = [op for op, _ in self._before if op.kind == plan.ASSIGN_TIMESTAMPS]
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
        self.restore(None)

    def process(self, elements: list[Element]) -> list[Element]:
        """One batch through the chain: its stateless operators through Spark, timestamps
        assigned, keyed state updated (Spark pre-aggregates the batch per key and window,
        and the result is merged into the state here), running aggregates emitted (one
        element per key the batch updated). Windows do not fire here: ``advance`` fires
        them. A chain with no operators passes the batch on without a Spark job."""
        if not elements:
            return []
        if not self._before and self._keyed is None:
            return list(elements)
        context = self.spark.sparkContext
        largest = context.accumulator(-math.inf, LargestTimestamp()) \
            if self._assigner is not None else None
        rdd = _staged(context.parallelize(elements, 1), self._before, largest)
        if self._windows is not None:
            windows = self._windows
            assert self._key is not None and self._keyed is not None
            contributions = WindowContributions(self._key, windows.assigner,
                                                windows.aggregation.contribution,
                                                windows.fired_to)
            partials = rdd.flatMap(contributions).mapPartitions(
                PreAggregated(windows.aggregation.merge)).collect()
            self._saw(largest)
            windows.merge(partials)
            return []
        if self._running is not None:
            running = self._running
            assert self._key is not None
            contributions = RunningContributions(self._key, running.aggregation.contribution)
            partials = rdd.map(contributions).mapPartitions(
                PreAggregated(running.aggregation.merge)).collect()
            self._saw(largest)
            return self._after_keyed(running.merge(partials))
        if self._values is not None:
            return self._after_keyed(self._processed(rdd, largest))
        out = rdd.collect()
        self._saw(largest)
        return out

    def _processed(self, rdd: Any, largest: Any) -> list[Element]:
        """A ``process`` function's batch: a first Spark job keys the elements, a second
        runs each key's elements through the function with that key's value, since the
        values to ship are known only once the keys are."""
        assert self._values is not None and self._key is not None
        keyed = rdd.map(KeyedElement(self._key)).collect()
        self._saw(largest)
        groups = self._values.groups(keyed)
        results = self.spark.sparkContext.parallelize(groups, 1).map(self._process).collect()
        return self._values.merge(results)

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

    def _saw(self, largest: Any) -> None:
        """The batch's largest timestamp to the assigner, once its Spark job ran."""
        if largest is not None and self._assigner is not None:
            self._assigner.on_record(largest.value)

    def _after_keyed(self, elements: list[Element]) -> list[Element]:
        """What the keyed operator emitted through the operators after it (in order)."""
        if not elements or not self._after:
            return elements
        rdd = self.spark.sparkContext.parallelize(elements, 1)
        return _staged(rdd, self._after, None).collect()


def output_key(job: LoadedJob, graph: JobGraph, vertex_id: str) -> Callable[[Any], str] | None:
    """For a vertex whose output edge is HASH: the function giving a record's key string
    (the consumer's key spec, records.key_string; lists as tuples, a missing key as
    ``NULL_KEY_PART``), which the exchange hashes with a stable hash to pick the consumer
    subtask; None when its output is not keyed."""
    hashed = [edge for edge in graph.outputs_of(vertex_id)
              if edge.ship_strategy is ShipStrategy.HASH]
    if not hashed:
        return None
    head = graph.vertex(hashed[0].target).operators[0]
    key = key_function(head, job.code[head.id])

    def keyed(record: Any) -> str:
        text = key_string(state_key(key(record)))
        return NULL_KEY_PART if text is None else text

    return keyed


def _staged(rdd: Any, stages: Sequence[Stage], largest: Any) -> Any:
    """The user's stateless operators (and the timestamp assigner) over an RDD of
    elements, each keeping its input's timestamp."""
    for op, code in stages:
        fn = code.fn
        if op.kind == plan.MAP:
            rdd = rdd.map(MapElement(fn))
        elif op.kind == plan.FLAT_MAP:
            rdd = rdd.flatMap(FlatMapElement(fn))
        elif op.kind == plan.FILTER:
            rdd = rdd.filter(FilterElement(fn))
        elif op.kind == plan.ASSIGN_TIMESTAMPS:
            rdd = rdd.map(Timestamped(fn, largest))
        else:
            raise ValueError(f"{op.kind} is not a stateless streaming operator")
    return rdd
