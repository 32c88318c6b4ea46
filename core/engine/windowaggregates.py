"""The declarative aggregations of a window or running aggregate, one field's count, sum,
min, max and mean (docs/streaming.md, "Keyed streams and windows"): a record's
contribution, the merge of two partial aggregates and the value a window emits.

The per-record path (keyedstate.aggregation, in Spark's workers with streamfunctions)
and the vectorised one (columnar.py) both follow these definitions, so they give the same
windows: a mean's partial is ``(sum, count)``, its result ``sum / count``. Everything here
is a module-level function or a small class, so cloudpickle ships it by reference.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from clusterdeck.core.engine.records import field_key
from clusterdeck.core.engine.streamfunctions import itself, one

DECLARATIVE = ("count", "sum", "min", "max", "mean")


class MeanContribution:
    """A record's ``(value, 1)``: its share of a mean."""

    def __init__(self, value: Callable[[Any], Any]) -> None:
        self.value = value

    def __call__(self, record: Any) -> tuple[Any, int]:
        return self.value(record), 1


def add_pairs(a: tuple[Any, int], b: tuple[Any, int]) -> tuple[Any, int]:
    """Two ``(sum, count)`` partials of a mean as one."""
    return a[0] + b[0], a[1] + b[1]


def ratio(partial: tuple[Any, int]) -> float:
    """A mean's value: its sum over its count."""
    return partial[0] / partial[1]


def field_value(field: str | int | None) -> Callable[[Any], Any]:
    """A record's value of ``field``, or the record itself (None)."""
    return itself if field is None else field_key((field,))


def contribution(function: str, field: str | int | None) -> Callable[[Any], Any]:
    if function == "count":
        return one
    if function == "mean":
        return MeanContribution(field_value(field))
    return field_value(field)


def merge(function: str) -> Callable[[Any, Any], Any]:
    match function:
        case "count" | "sum":
            return operator.add
        case "min":
            return min
        case "max":
            return max
        case "mean":
            return add_pairs
    raise ValueError(f"{function!r} is not a declarative aggregation")


def result(function: str) -> Callable[[Any], Any]:
    return ratio if function == "mean" else itself
