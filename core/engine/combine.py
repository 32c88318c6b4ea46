"""Keyed folds, and combining them before the exchange (Spark's map-side combine in
``reduceByKey``, Flink's combinable reduce).

Without combining, every record crosses a HASH exchange: a word count writes one
``(word, 1)`` per word of its input into the result partitions and reads each back.
With it, a producer whose HASH edge leads into a keyed sum, count or reduce sends one
``Partial`` per key and Spark partition instead. The consumer's operator folds Partials
and raw records alike (``KeyedFold.pair``), so it does not matter which producers
combined. As in Spark and Flink, a reduce function must be associative and commutative.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from clusterdeck.core.engine.records import Partial, field_key
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.plan import KeySpec, UserCode
from clusterdeck.core.protocol.jobgraph import OperatorSpec

HELD_KEYS = 100_000  # partial results one Spark partition holds; more are sent early
_NONE = object()


@dataclass(frozen=True)
class KeyedFold:
    """A keyed sum, count or reduce as key, a record's contribution, and merge."""

    key: Callable[[Any], Any]
    value: Callable[[Any], Any]
    merge: Callable[[Any, Any], Any]

    def pair(self, record: Any) -> tuple[Any, Any]:
        """(key, contribution) of a raw record or of a producer's Partial."""
        if isinstance(record, Partial):
            return record.key, record.value
        return self.key(record), self.value(record)

    def combine(self, records: Iterable[Any]) -> Iterator[Any]:
        """One Spark partition's records folded per key (in Spark's Python workers).
        Memory stays bounded: past HELD_KEYS keys, what is held is sent and folding
        starts over. A record with an unhashable key passes unchanged."""
        held: dict[Any, Any] = {}
        key_of, value_of, merge, get = self.key, self.value, self.merge, held.get
        for record in records:  # per record: no attribute lookups, one dict probe
            if type(record) is Partial:
                key, value = record.key, record.value
            else:
                key, value = key_of(record), value_of(record)
            try:
                previous = get(key, _NONE)
            except TypeError:
                yield record
                continue
            if previous is not _NONE:
                held[key] = merge(previous, value)
                continue
            if len(held) >= HELD_KEYS:
                yield from (Partial(k, v) for k, v in held.items())
                held.clear()
            held[key] = value
        yield from (Partial(k, v) for k, v in held.items())


def key_function(op: OperatorSpec, code: UserCode) -> Callable[[Any], Any]:
    """A keyed operator's key of a record: the user's key function, or its key fields."""
    spec = KeySpec.from_params(op.params["key"])
    key = code.keys[0] if spec.by_function else field_key(spec.fields)
    assert key is not None
    return key


def keyed_fold(op: OperatorSpec, code: UserCode) -> KeyedFold | None:
    """The fold of a keyed sum, count or reduce on records; None for other operators."""
    if op.kind not in (plan.SUM, plan.COUNT, plan.REDUCE):
        return None
    key = key_function(op, code)
    if op.kind == plan.COUNT:
        return KeyedFold(key, _one, operator.add)
    if op.kind == plan.REDUCE:
        assert code.fn is not None
        return KeyedFold(key, _itself, code.fn)
    field = op.params.get("field")
    return KeyedFold(key, _itself if field is None else field_key((field,)), operator.add)


def _one(_record: Any) -> int:
    return 1


def _itself(record: Any) -> Any:
    return record
