"""The functions a streaming vertex's batch runs inside Spark's Python workers: the user's
operators over elements ``(timestamp, record)``, and each record's contribution to a
keyed window or running aggregate, pre-aggregated per key over the batch.

A batch runs one *partition function* (``Iterator[item] -> Iterable[result]``, the shape
of a Spark ``mapPartitions`` function): ``Chained``, the stateless operators in order and
then, for a keyed operator, its pre-aggregation (``WindowPartials``, ``RunningPartials``)
or its keying. What a batch sees besides its results (the largest timestamp assigned,
the user's counters) goes to ``BATCH``, which the runner (continuousworker.py) resets
before the batch and returns with its results.

Each is a small class holding the user's function, so cloudpickle ships it by value and
the worker imports only this module, the record model and the window assigners. Keys
are made hashable here (``state_key``) the same way the exchange renders them, so a key
computed as a list and the same key as a tuple meet in one subtask and one state entry.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from clusterdeck.core.streaming.eventtime import WindowAssigner

Element = tuple[float | None, Any]  # (event timestamp in seconds, or None; record)
PartitionFunction = Callable[[Iterator[Any]], Iterable[Any]]
LATE = ()  # the key under which a batch counts its late records


class BatchSeen:
    """What the batch running in this Python process saw besides its results: the
    largest timestamp its assigner gave and what the user's counters added. A Spark
    Python worker runs one task at a time, and a task one batch at a time, so one per
    process (``BATCH``) is the batch's own."""

    def __init__(self) -> None:
        self.largest = -math.inf
        self.counters: dict[str, int | float] = {}

    def reset(self) -> None:
        self.largest = -math.inf
        self.counters = {}

    def count(self, name: str, amount: int | float) -> None:
        self.counters[name] = self.counters.get(name, 0) + amount


BATCH = BatchSeen()


class BatchCounter:
    """Stands in for a Spark accumulator under a user Counter shipped with a batch
    (continuous.py binds it): ``add`` counts into the batch's ``BATCH``, and the counts
    come back with the batch's results, so a long-lived Spark task reports them per
    batch rather than at its end."""

    def __init__(self, name: str) -> None:
        self.name = name

    def add(self, amount: int | float) -> None:
        BATCH.count(self.name, amount)


class Late:
    """The number of records a batch found late (the value under the key ``LATE``)."""

    def __init__(self, records: int) -> None:
        self.records = records


def state_key(key: Any) -> Any:
    """A record's key as keyed state holds it: lists become tuples (JSON brings tuples
    back as lists, and lists cannot be dict keys); anything else unhashable fails."""
    if isinstance(key, list | tuple) and not hasattr(key, "__fields__"):
        return tuple(state_key(part) for part in key)
    try:
        hash(key)
    except TypeError:
        raise TypeError(f"the key {key!r} cannot key state: keys are scalars, tuples, "
                        "lists or Rows of them") from None
    return key


def later(a: float | None, b: float | None) -> float | None:
    """The later of two timestamps, either of which may be missing."""
    if a is None:
        return b
    return a if b is None or a >= b else b


class Stage(Protocol):
    """One stateless operator over a batch's elements, lazily."""

    def over(self, elements: Iterator[Element]) -> Iterator[Element]: ...


class MapElement:
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, element: Element) -> Element:
        return element[0], self.fn(element[1])

    def over(self, elements: Iterator[Element]) -> Iterator[Element]:
        return map(self, elements)


class FlatMapElement:
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, element: Element) -> Iterator[Element]:
        timestamp = element[0]
        return ((timestamp, record) for record in self.fn(element[1]))

    def over(self, elements: Iterator[Element]) -> Iterator[Element]:
        return itertools.chain.from_iterable(map(self, elements))


class FilterElement:
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, element: Element) -> bool:
        return bool(self.fn(element[1]))

    def over(self, elements: Iterator[Element]) -> Iterator[Element]:
        return filter(self, elements)


class Timestamped:
    """``assign_timestamps``: the record's event time from the user's function, the
    largest one into the batch's ``BATCH`` (the bound of the vertex's watermark)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, element: Element) -> Element:
        record = element[1]
        timestamp = self.fn(record)
        if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) \
                or not math.isfinite(timestamp):
            raise TypeError(f"assign_timestamps(): the timestamp of {record!r} is "
                            f"{timestamp!r}, not a finite number of seconds")
        if timestamp > BATCH.largest:
            BATCH.largest = float(timestamp)
        return float(timestamp), record

    def over(self, elements: Iterator[Element]) -> Iterator[Element]:
        return map(self, elements)


class Chained:
    """A batch's partition function: its elements through the stateless ``stages`` in
    order, then through ``tail`` (a keyed operator's pre-aggregation or keying, itself a
    partition function; ``columnar.py``'s vectorised pre-aggregation fits there too) if
    there is one; the results as a list."""

    def __init__(self, stages: Sequence[Stage], tail: PartitionFunction | None = None) -> None:
        self.stages = list(stages)
        self.tail = tail

    def __call__(self, elements: Iterator[Element]) -> list[Any]:
        for stage in self.stages:
            elements = stage.over(elements)
        return list(self.tail(elements) if self.tail is not None else elements)


class Each:
    """A function of one item as a partition function (``map``)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, items: Iterator[Any]) -> Iterator[Any]:
        return map(self.fn, items)


class WindowContributions:
    """A record's ``((key, start, end), (contribution, timestamp))`` for every window it
    falls into that has not fired by ``fired_to`` (the windows' state before this batch:
    firing happens between batches), or ``(LATE, Late(1))`` when there is none."""

    def __init__(self, key: Callable[[Any], Any], assigner: WindowAssigner,
                 contribution: Callable[[Any], Any], fired_to: float) -> None:
        self.key = key
        self.assigner = assigner
        self.contribution = contribution
        self.fired_to = fired_to

    def __call__(self, element: Element) -> list[tuple[Any, Any]]:
        timestamp, record = element
        if timestamp is None:
            raise ValueError(f"a record without a timestamp reached a window: {record!r} "
                             "(assign_timestamps before key_by)")
        windows = [window for window in self.assigner.assign(timestamp)
                   if window[1] > self.fired_to]
        if not windows:
            return [(LATE, Late(1))]
        key = state_key(self.key(record))
        value = self.contribution(record)
        return [((key, start, end), (value, timestamp)) for start, end in windows]


class RunningContributions:
    """A record's ``(key, (contribution, timestamp))`` for a running aggregate."""

    def __init__(self, key: Callable[[Any], Any], contribution: Callable[[Any], Any]) -> None:
        self.key = key
        self.contribution = contribution

    def __call__(self, element: Element) -> tuple[Any, Any]:
        timestamp, record = element
        return state_key(self.key(record)), (self.contribution(record), timestamp)


class MergeContributions:
    """Two partial aggregates of one key (and window) merged, with the later timestamp;
    late counts add up."""

    def __init__(self, merge: Callable[[Any, Any], Any]) -> None:
        self.merge = merge

    def __call__(self, a: Any, b: Any) -> Any:
        if type(a) is Late:
            return Late(a.records + b.records)
        return self.merge(a[0], b[0]), later(a[1], b[1])


def one(_record: Any) -> int:
    """A record's contribution to a count."""
    return 1


def itself(record: Any) -> Any:
    """A record's contribution to a reduce, or to a sum of the records themselves."""
    return record


class Accumulated:
    """A record's contribution to a window's ``aggregate``: a fresh accumulator with the
    record added."""

    def __init__(self, create: Callable[[], Any], add: Callable[[Any, Any], Any]) -> None:
        self.create = create
        self.add = add

    def __call__(self, record: Any) -> Any:
        return self.add(self.create(), record)


class WindowPartials:
    """A window's pre-aggregation of a batch: every record's contributions to the windows
    it falls into, folded per key and window (``flatMap`` then ``PreAggregated``)."""

    def __init__(self, contributions: WindowContributions,
                 merge: Callable[[Any, Any], Any]) -> None:
        self.contributions = contributions
        self.fold = PreAggregated(merge)

    def __call__(self, elements: Iterator[Element]) -> Iterator[tuple[Any, Any]]:
        return self.fold(itertools.chain.from_iterable(map(self.contributions, elements)))


class RunningPartials:
    """A running aggregate's pre-aggregation of a batch, folded per key."""

    def __init__(self, contributions: RunningContributions,
                 merge: Callable[[Any, Any], Any]) -> None:
        self.contributions = contributions
        self.fold = PreAggregated(merge)

    def __call__(self, elements: Iterator[Element]) -> Iterator[tuple[Any, Any]]:
        return self.fold(map(self.contributions, elements))


class PreAggregated:
    """A batch's ``(key, (contribution, timestamp))`` pairs folded per key: what
    ``reduceByKey`` gives, without its shuffle, since a batch is one Spark partition.
    Holds one entry per key (and window) of the batch."""

    def __init__(self, merge: Callable[[Any, Any], Any]) -> None:
        self.merge = MergeContributions(merge)

    def __call__(self, pairs: Iterator[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
        held: dict[Any, Any] = {}
        merge = self.merge
        for key, value in pairs:
            held[key] = merge(held[key], value) if key in held else value
        return iter(held.items())
