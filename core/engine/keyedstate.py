"""The keyed state of one streaming subtask: its open event-time windows (a window's
count/sum/reduce/aggregate), its running aggregate per key (a streaming reduce/sum/count)
fed per batch with partial aggregates Spark computed, or a ``process`` function's value
per key; carried through checkpoints.

State lives where the task's state backend keeps it (core/streaming/statebackend/): in
the task's memory (``heap``), its snapshot plain JSON data; or in the task's embedded
RocksDB (``rocksdb``, a ``KeyedStore`` given to the constructors), whose entries the
store's change log carries into incremental checkpoints, the snapshot's JSON only saying
how many there are. Keys and aggregates are tagged records either way (in the store as
JSON bytes), so tuples, dicts, bytes and dates come back as they were. On the task's
slot thread. It is bounded: a batch that would take it past ``max_entries`` (open
(key, window) pairs, or keys of a running aggregate) fails the task, saying so, rather
than growing without end: a watermark that does not advance keeps every window open, and
a running aggregate keeps every key it ever saw (Flink would need state TTL there).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from clusterdeck.core.engine import windowaggregates
from clusterdeck.core.engine.records import NULL_KEY_PART, from_tagged, key_string, to_tagged
from clusterdeck.core.engine.streamfunctions import (
    Accumulated,
    Element,
    Late,
    itself,
)
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.plan import UserCode
from clusterdeck.core.protocol.jobgraph import OperatorSpec
from clusterdeck.core.protocol.keygroups import key_group_of
from clusterdeck.core.streaming.eventtime import SlidingWindows, TumblingWindows, WindowAssigner
from clusterdeck.core.streaming.statebackend import (
    HeapValues,
    KeyedStore,
    StoredValues,
    StoredWindows,
)
from clusterdeck.core.streaming.windowstate import KeyedWindows

MAX_STATE_ENTRIES = 1_000_000
"""Open (key, window) pairs, or running keys, a subtask holds at most by default."""
RESULT_DELAY = 0.001
"""A window's result carries the time ``end - RESULT_DELAY`` (Flink's ``maxTimestamp``):
inside the window, so a later window of the same size downstream takes it."""
NOT_ON_HEAP = ("the checkpoint's keyed state was kept by the rocksdb state backend, and this "
               "TaskManager's state.backend is heap: set it to rocksdb to restore it")
"""A restore of rocksdb state on a TaskManager whose backend is heap: why it fails."""


class StateLimitExceeded(RuntimeError):
    """Keyed state would grow past its bound; the task fails with this message."""


@dataclass(frozen=True)
class Aggregation:
    """How a keyed operator aggregates: a record's ``contribution`` (in Spark's
    workers), ``merge`` of two partial aggregates (there and in the state), and the
    ``result`` an aggregate emits."""

    contribution: Callable[[Any], Any]
    merge: Callable[[Any, Any], Any]
    result: Callable[[Any], Any] = itself


def aggregation(op: OperatorSpec, code: UserCode) -> Aggregation:
    """The aggregation of a window (by its ``function``) or of a running reduce/sum/count:
    the declarative ones (count, sum, min, max, mean) from windowaggregates.py, which the
    vectorised path (columnar.py) follows too."""
    function = op.params["function"] if op.kind == plan.WINDOW else op.kind
    if function in windowaggregates.DECLARATIVE:
        field = op.params.get("field")
        return Aggregation(windowaggregates.contribution(function, field),
                           windowaggregates.merge(function), windowaggregates.result(function))
    if function == "reduce":
        assert code.fn is not None
        return Aggregation(itself, code.fn)
    if function == "aggregate":
        functions = code.aggregate
        assert functions is not None
        return Aggregation(Accumulated(functions.create, functions.add), functions.merge,
                           functions.result or itself)
    raise ValueError(f"{op.kind} {function!r} is not a keyed aggregate of streaming jobs")


def window_assigner(params: dict[str, Any]) -> WindowAssigner:
    size, slide, offset = params["size"], params["slide"], params["offset"]
    if slide == size:
        return TumblingWindows(size, offset)
    return SlidingWindows(size, slide, offset)


def key_group_of_key(key: Any, max_parallelism: int) -> int:
    """The key group of a key as keyed state holds it: that of the key string the
    exchange routed its records by (streamoperators.OutputKey)."""
    text = key_string(key)
    return key_group_of(NULL_KEY_PART if text is None else text, max_parallelism)


def _ordered(key: Any) -> tuple[str, str]:
    """Keys in a stable order whatever their types: by the string the exchange hashes."""
    return key_string(key) or "", repr(key)


class WindowState:
    """The open windows of a keyed window operator (Flink's ``WindowOperator``), in the
    task's memory, or in ``store``."""

    def __init__(self, op: OperatorSpec, code: UserCode,
                 max_entries: int = MAX_STATE_ENTRIES, store: KeyedStore | None = None) -> None:
        self.aggregation = aggregation(op, code)
        self.assigner = window_assigner(op.params)
        self.max_entries = max_entries
        self.store = store
        self._windows = self._empty()

    def _empty(self) -> KeyedWindows | StoredWindows:
        if self.store is None:
            return KeyedWindows(self.assigner, self.aggregation.merge)
        return StoredWindows(self.store, self.aggregation.merge, encoded, decoded)

    @property
    def fired_to(self) -> float:
        return self._windows.fired_to

    @property
    def late_records(self) -> int:
        return self._windows.late

    def merge(self, partials: Iterable[tuple[Any, Any]]) -> None:
        """A batch's partial aggregates ``((key, start, end), (aggregate, timestamp))``
        and its late count ``(LATE, Late(n))`` into the windows."""
        windows = self._windows
        batch = []
        for slot, value in partials:
            if type(value) is Late:
                windows.count_late(value.records)
            else:
                batch.append(((slot[0], (slot[1], slot[2])), value[0]))
        windows.merge_many(batch, self._check_room)

    def _check_room(self, open_windows: int) -> None:
        if open_windows > self.max_entries:
            raise StateLimitExceeded(
                f"this subtask would hold {open_windows:,} open (key, window) "
                f"pairs, more than its limit of {self.max_entries:,}: too many keys, or a "
                "watermark that does not advance (does the source's time move?)")

    def fire(self, watermark: float) -> list[Element]:
        """Every window that ends at or before ``watermark``, by end then key, as its
        output ``(key, start, end, value)``; forgotten once fired."""
        result = self.aggregation.result
        return [(max(start, end - RESULT_DELAY), (key, start, end, result(aggregate)))
                for key, (start, end), aggregate in self._windows.fire(watermark)]

    def snapshot(self) -> dict[str, Any]:
        state = self._windows.snapshot()
        snapshot = {"fired_to": state["fired_to"], "ended": self.fired_to == math.inf,
                    "late": state["late"]}
        if isinstance(self._windows, StoredWindows):
            return {**snapshot, "stored": state["stored"]}
        return {**snapshot, "open": [[_tagged(key), window, _tagged(aggregate)]
                                     for key, window, aggregate in state["open"]]}

    def restore(self, state: dict[str, Any] | None) -> None:
        """From ``snapshot``'s data (of either backend: a heap snapshot's windows go into
        the store), or afresh; a store is restored from its files before this."""
        windows = self._windows = self._empty()
        if state is None:
            if self.store is not None:
                self.store.clear()
            return
        small = {"fired_to": state["fired_to"], "late": state["late"]}
        if "stored" in state:
            if not isinstance(windows, StoredWindows):
                raise ValueError(NOT_ON_HEAP)
            windows.restore({**small, "stored": state["stored"]})
        else:
            open_windows = [(from_tagged(key), (float(window[0]), float(window[1])),
                             from_tagged(aggregate)) for key, window, aggregate in state["open"]]
            if isinstance(windows, StoredWindows):
                windows.restore({**small, "stored": 0})
                windows.load(open_windows)
            else:
                windows.restore({**small, "open": [[key, list(window), aggregate]
                                                   for key, window, aggregate in open_windows]})
        if state["ended"]:  # JSON has no infinity: the end of input fired everything
            windows.fire(math.inf)


class ValuesByKey:
    """A value per key, in the task's memory (checkpointed as ``[[key, value], ...]`` in
    tagged JSON) or in ``store`` (checkpointed as its count)."""

    def __init__(self, max_entries: int = MAX_STATE_ENTRIES,
                 store: KeyedStore | None = None) -> None:
        self.max_entries = max_entries
        self.store = store
        self._values: HeapValues | StoredValues = self._empty()

    def _empty(self) -> HeapValues | StoredValues:
        return HeapValues() if self.store is None else StoredValues(self.store, encoded,
                                                                     decoded)

    def _check_room(self, grown: int, what: str, advice: str) -> None:
        """Fail before a batch that would take the state past ``max_entries``."""
        if len(self._values) + grown > self.max_entries:
            raise StateLimitExceeded(
                f"this subtask would hold the {what} of {len(self._values) + grown:,} keys, "
                f"more than its limit of {self.max_entries:,}: {advice}")

    def snapshot(self) -> list[list[Any]] | dict[str, int]:
        if isinstance(self._values, StoredValues):
            return {"stored": len(self._values)}
        return [[_tagged(key), _tagged(value)] for key, value in self._values.entries()]

    def restore(self, state: list[list[Any]] | dict[str, int] | None) -> None:
        """From ``snapshot``'s data (a heap one's values go into the store), or afresh; a
        store is restored from its files before this."""
        values = self._values = self._empty()
        if isinstance(state, dict):
            if not isinstance(values, StoredValues):
                raise ValueError(NOT_ON_HEAP)
            values.recount()
            if len(values) != state["stored"]:
                raise ValueError(f"the restored state holds the values of {len(values)} "
                                 f"keys, its checkpoint {state['stored']}")
            return
        if self.store is not None:
            self.store.clear()
        values.load((from_tagged(key), from_tagged(value)) for key, value in state or ())


class RunningState(ValuesByKey):
    """A running keyed reduce/sum/count (Flink's keyed ``reduce`` with value state): the
    aggregate of every record of a key so far. A batch emits, for each key it updated,
    the value after it: ``(key, value)`` for sum and count, the reduced record for
    reduce, as a batch job emits them once at the end."""

    def __init__(self, op: OperatorSpec, code: UserCode,
                 max_entries: int = MAX_STATE_ENTRIES, store: KeyedStore | None = None) -> None:
        super().__init__(max_entries, store)
        self.aggregation = aggregation(op, code)
        self.keyed_output = op.kind != plan.REDUCE

    def merge(self, partials: Iterable[tuple[Any, Any]]) -> list[Element]:
        """A batch's ``(key, (aggregate, timestamp))`` merged into each key's value; the
        updated values, by key, each with its batch's latest timestamp."""
        merge = self.aggregation.merge
        batch: dict[Any, tuple[Any, Any]] = {}
        for key, (partial, timestamp) in partials:  # a key twice: folded in order
            batch[key] = (merge(batch[key][0], partial), timestamp) if key in batch \
                else (partial, timestamp)
        keys = sorted(batch, key=_ordered)
        before = self._values.get_many(keys)
        self._check_room(sum(1 for value in before if value is None), "running values",
                         "a running aggregate keeps every key it saw; use a window, or "
                         "fewer keys")
        after = [batch[key][0] if value is None else merge(value, batch[key][0])
                 for key, value in zip(keys, before, strict=True)]
        self._values.put_many(zip(keys, after, strict=True), before)
        return [(batch[key][1], (key, value) if self.keyed_output else value)
                for key, value in zip(keys, after, strict=True)]


class ProcessState(ValuesByKey):
    """The value state of a ``process`` function (Flink's ``ValueState``), per key. A
    batch is grouped by key here (each key's elements in order of arrival, keys in a
    stable order), run through the user's function in Spark with each key's value
    (valuestate.py), and the values it left are kept; a key whose value became None takes
    no place."""

    def groups(self, keyed: Iterable[tuple[Any, Element]]) -> list[tuple[Any, Any, list[Element]]]:
        """A batch's ``(key, element)`` pairs as ``(key, value, elements)`` per key."""
        elements: dict[Any, list[Element]] = {}
        for key, element in keyed:
            elements.setdefault(key, []).append(element)
        keys = sorted(elements, key=_ordered)
        return [(key, value, elements[key])
                for key, value in zip(keys, self._values.get_many(keys), strict=True)]

    def merge(self, results: Iterable[tuple[Any, Any, list[Element]]]) -> list[Element]:
        """Each key's value after the batch kept (or forgotten); what was emitted, by key."""
        results = list(results)
        before = self._values.get_many([key for key, _, _ in results])
        self._check_room(sum((value is not None) - (old is not None)
                             for (_, value, _), old in zip(results, before, strict=True)),
                         "values", "clear() the state of keys that are done with, or use "
                         "fewer keys")
        self._values.put_many(((key, value) for key, value, _ in results), before)
        return [element for _, _, emitted in results for element in emitted]


def _tagged(value: Any) -> Any:
    try:
        return to_tagged(value)
    except TypeError as error:
        raise TypeError(f"keyed state cannot be checkpointed: {error}") from None


def encoded(value: Any) -> bytes:
    """A key or value as the store keeps it: tagged JSON (the same key, the same bytes)."""
    tagged = _tagged(value)
    try:
        return orjson.dumps(tagged)
    except TypeError:  # an int beyond 64 bits
        return json.dumps(tagged, separators=(",", ":")).encode()


def decoded(data: bytes) -> Any:
    return from_tagged(orjson.loads(data))

