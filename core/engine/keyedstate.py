"""The keyed state of one streaming subtask: its open event-time windows (a window's
count/sum/reduce/aggregate), its running aggregate per key (a streaming reduce/sum/count)
fed per batch with partial aggregates Spark computed, or a ``process`` function's value
per key; carried through checkpoints as JSON.

State lives in the task's memory, on its slot thread; its snapshot is plain JSON data
(keys and aggregates as tagged records, so tuples, dicts, bytes and dates come back as
they were). It is bounded: a batch that would take it past ``max_entries`` (open
(key, window) pairs, or keys of a running aggregate) fails the task, saying so, rather
than growing without end: a watermark that does not advance keeps every window open, and
a running aggregate keeps every key it ever saw (Flink would need state TTL there).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from clusterdeck.core.engine import windowaggregates
from clusterdeck.core.engine.records import from_tagged, key_string, to_tagged
from clusterdeck.core.engine.streamfunctions import (
    Accumulated,
    Element,
    Late,
    itself,
)
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.plan import UserCode
from clusterdeck.core.protocol.jobgraph import OperatorSpec
from clusterdeck.core.streaming.eventtime import SlidingWindows, TumblingWindows, WindowAssigner
from clusterdeck.core.streaming.windowstate import KeyedWindows

MAX_STATE_ENTRIES = 1_000_000
"""Open (key, window) pairs, or running keys, a subtask holds at most by default."""
RESULT_DELAY = 0.001
"""A window's result carries the time ``end - RESULT_DELAY`` (Flink's ``maxTimestamp``):
inside the window, so a later window of the same size downstream takes it."""


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


def _ordered(key: Any) -> tuple[str, str]:
    """Keys in a stable order whatever their types: by the string the exchange hashes."""
    return key_string(key) or "", repr(key)


class WindowState:
    """The open windows of a keyed window operator (Flink's ``WindowOperator``)."""

    def __init__(self, op: OperatorSpec, code: UserCode,
                 max_entries: int = MAX_STATE_ENTRIES) -> None:
        self.aggregation = aggregation(op, code)
        self.assigner = window_assigner(op.params)
        self.max_entries = max_entries
        self._windows = KeyedWindows(self.assigner, self.aggregation.merge)

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
        new = sum(1 for (key, window), _ in batch if not windows.is_open(key, window))
        if windows.open_windows + new > self.max_entries:
            raise StateLimitExceeded(
                f"this subtask would hold {windows.open_windows + new:,} open (key, window) "
                f"pairs, more than its limit of {self.max_entries:,}: too many keys, or a "
                "watermark that does not advance (does the source's time move?)")
        for (key, window), partial in batch:
            windows.merge(key, window, partial)

    def fire(self, watermark: float) -> list[Element]:
        """Every window that ends at or before ``watermark``, by end then key, as its
        output ``(key, start, end, value)``; forgotten once fired."""
        result = self.aggregation.result
        return [(max(start, end - RESULT_DELAY), (key, start, end, result(aggregate)))
                for key, (start, end), aggregate in self._windows.fire(watermark)]

    def snapshot(self) -> dict[str, Any]:
        state = self._windows.snapshot()
        return {"fired_to": state["fired_to"], "ended": self.fired_to == math.inf,
                "late": state["late"],
                "open": [[_tagged(key), window, _tagged(aggregate)]
                         for key, window, aggregate in state["open"]]}

    def restore(self, state: dict[str, Any] | None) -> None:
        self._windows = KeyedWindows(self.assigner, self.aggregation.merge)
        if state is None:
            return
        self._windows.restore({
            "fired_to": state["fired_to"], "late": state["late"],
            "open": [[from_tagged(key), window, from_tagged(aggregate)]
                     for key, window, aggregate in state["open"]]})
        if state["ended"]:  # JSON has no infinity: the end of input fired everything
            self._windows.fire(math.inf)


class ValuesByKey:
    """A value per key, checkpointed as ``[[key, value], ...]`` in tagged JSON."""

    def __init__(self, max_entries: int = MAX_STATE_ENTRIES) -> None:
        self.max_entries = max_entries
        self._values: dict[Any, Any] = {}

    def _check_room(self, grown: int, what: str, advice: str) -> None:
        """Fail before a batch that would take the state past ``max_entries``."""
        if len(self._values) + grown > self.max_entries:
            raise StateLimitExceeded(
                f"this subtask would hold the {what} of {len(self._values) + grown:,} keys, "
                f"more than its limit of {self.max_entries:,}: {advice}")

    def snapshot(self) -> list[list[Any]]:
        return [[_tagged(key), _tagged(value)] for key, value in self._values.items()]

    def restore(self, state: list[list[Any]] | None) -> None:
        self._values = {from_tagged(key): from_tagged(value) for key, value in state or ()}


class RunningState(ValuesByKey):
    """A running keyed reduce/sum/count (Flink's keyed ``reduce`` with value state): the
    aggregate of every record of a key so far. A batch emits, for each key it updated,
    the value after it: ``(key, value)`` for sum and count, the reduced record for
    reduce, as a batch job emits them once at the end."""

    def __init__(self, op: OperatorSpec, code: UserCode,
                 max_entries: int = MAX_STATE_ENTRIES) -> None:
        super().__init__(max_entries)
        self.aggregation = aggregation(op, code)
        self.keyed_output = op.kind != plan.REDUCE

    def merge(self, partials: Iterable[tuple[Any, Any]]) -> list[Element]:
        """A batch's ``(key, (aggregate, timestamp))`` merged into each key's value; the
        updated values, by key, each with its batch's latest timestamp."""
        values, merge = self._values, self.aggregation.merge
        batch = sorted(partials, key=lambda pair: _ordered(pair[0]))
        self._check_room(sum(1 for key, _ in batch if key not in values), "running values",
                         "a running aggregate keeps every key it saw; use a window, or "
                         "fewer keys")
        out: list[Element] = []
        for key, (partial, timestamp) in batch:
            value = merge(values[key], partial) if key in values else partial
            values[key] = value
            out.append((timestamp, (key, value) if self.keyed_output else value))
        return out


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
        values = self._values
        return [(key, values.get(key), elements[key])
                for key in sorted(elements, key=_ordered)]

    def merge(self, results: Iterable[tuple[Any, Any, list[Element]]]) -> list[Element]:
        """Each key's value after the batch kept (or forgotten); what was emitted, by key."""
        results = list(results)
        values = self._values
        self._check_room(sum((value is not None) - (key in values) for key, value, _ in results),
                         "values", "clear() the state of keys that are done with, or use "
                         "fewer keys")
        out: list[Element] = []
        for key, value, emitted in results:
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
            out.extend(emitted)
        return out


def _tagged(value: Any) -> Any:
    try:
        return to_tagged(value)
    except TypeError as error:
        raise TypeError(f"keyed state cannot be checkpointed: {error}") from None
