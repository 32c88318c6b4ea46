"""Keyed and windowed streams: what ``DataStream.key_by`` returns, and its windows.

The next operator of a keyed stream sees all records of a key together (its input is
hashed by the key); a windowed stream cuts each key's records into event-time windows.
Declaring them runs nothing, as everywhere in the job API. Called on whichever thread
loads the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.arguments import (
    AGGREGATE_FUNCTIONS,
    MAX_WINDOWS_PER_RECORD,
    checked_operator,
    is_seconds,
    user_function,
)
from clusterdeck.core.jobapi.plan import AggregateFunctions, InputRef, KeySpec, UserCode

if TYPE_CHECKING:
    from clusterdeck.core.jobapi.environment import DataStream


class KeyedStream:
    """A stream grouped by a key; the next operator sees all records of a key together."""

    def __init__(self, stream: DataStream, key: KeySpec,
                 key_fn: Callable[[Any], Any] | None) -> None:
        self._stream = stream
        self._key = key
        self._key_fn = key_fn

    def _keyed(self, kind: str, name: str, parallelism: int | None,
               params: dict[str, Any], fn: Callable[..., Any] | None = None,
               aggregate: AggregateFunctions | None = None) -> DataStream:
        stream = self._stream
        return stream._derive(kind, name, parallelism,
                              {"key": self._key.to_params(), **params},
                              UserCode(fn=fn, keys=(self._key_fn,), aggregate=aggregate),
                              inputs=(InputRef(stream._transformation, plan.HASH),))

    @checked_operator("window")
    def window(self, size: float, slide: float | None = None,
               offset: float = 0.0) -> WindowedStream:
        """Event-time windows of each key, streaming jobs only (timestamps assigned
        earlier with ``assign_timestamps``): ``[start, start + size)`` seconds, one after
        the other (tumbling), or starting every ``slide`` seconds (sliding, ``slide <
        size``), from ``offset``. Aggregate them with ``count``, ``sum``, ``min``, ``max``,
        ``mean``, ``reduce`` or ``aggregate``: each window emits ``(key, start, end,
        value)`` once the watermark passes its end (docs/streaming.md)."""
        if not is_seconds(size) or not size > 0:
            raise ValueError(f"window(): size is seconds, > 0; got {size!r}")
        step = size if slide is None else slide
        if not is_seconds(step) or not 0 < step <= size:
            raise ValueError(f"window(): slide is seconds, > 0 and at most size ({size!r}): "
                             f"a record then falls into at least one window; got {slide!r}")
        if size / step > MAX_WINDOWS_PER_RECORD:
            raise ValueError(f"window(): size / slide is {size / step:g}: each record would "
                             f"be state in that many windows; at most "
                             f"{MAX_WINDOWS_PER_RECORD}")
        if not is_seconds(offset) or not abs(offset) < step:
            raise ValueError(f"window(): offset is seconds, smaller than the slide (or size) "
                             f"{step!r}; got {offset!r}")
        return WindowedStream(self, {"size": float(size), "slide": float(step),
                                     "offset": float(offset)})

    @checked_operator("reduce")
    def reduce(self, fn: Callable[[Any, Any], Any], *, name: str | None = None,
               parallelism: int | None = None) -> DataStream:
        """Combine the records of each key pairwise with ``fn(a, b)``. In a batch job one
        record per key comes out at the end; in a streaming job the running result,
        each time a batch of records updated the key (docs/streaming.md)."""
        return self._keyed(plan.REDUCE, name or "reduce", parallelism, {},
                           user_function("reduce", fn))

    @checked_operator("sum")
    def sum(self, field: str | int | None = None, *, name: str | None = None,
            parallelism: int | None = None) -> DataStream:
        """``(key, total)`` per key: the sum of ``field`` (or of the records themselves);
        in a streaming job the running total, each time a batch updated the key."""
        if field is not None and (isinstance(field, bool) or not isinstance(field, str | int)):
            raise TypeError(f"sum(): field is a name or a position, got {field!r}")
        return self._keyed(plan.SUM, name or "sum", parallelism, {"field": field})

    @checked_operator("count")
    def count(self, *, name: str | None = None, parallelism: int | None = None) -> DataStream:
        """``(key, number of records)`` per key; in a streaming job the running count,
        each time a batch updated the key."""
        return self._keyed(plan.COUNT, name or "count", parallelism, {})

    @checked_operator("process")
    def process(self, fn: Callable[[Any, Any], Iterable[Any] | None], *,
                name: str | None = None, parallelism: int | None = None) -> DataStream:
        """Each record with its key's value state (Flink's ``KeyedProcessFunction`` with a
        ``ValueState``): ``fn(record, state)`` returns or yields the records it emits
        (None: none), and reads and writes the state with ``state.value()`` (None until
        set), ``state.update(value)`` and ``state.clear()``; ``state.key`` is the key.
        A key's records come in their order of arrival. In a streaming job the state is
        checkpointed (so JSON-like: numbers, strings, lists, dicts, tuples, dates) and
        restored after a failure; in a batch job each key starts afresh."""
        return self._keyed(plan.PROCESS, name or "process", parallelism, {},
                           user_function("process", fn))

    @checked_operator("aggregate")
    def aggregate(self, aggregations: Mapping[str, tuple[str | int, str]], *,
                  name: str | None = None, parallelism: int | None = None) -> DataStream:
        """Named aggregates per key, as Rows of the key column(s) and the aggregates:
        ``aggregate({"revenue": ("amount", "sum"), "orders": ("*", "count")})``.
        Functions: sum, count, min, max, avg/mean, first, last, collect_list,
        collect_set, count_distinct."""
        if not isinstance(aggregations, Mapping) or not aggregations:
            raise TypeError("aggregate(): expected a mapping of output name -> "
                            "(column, function)")
        specs = []
        for output, spec in aggregations.items():
            if (not isinstance(spec, tuple | list) or len(spec) != 2
                    or spec[1] not in AGGREGATE_FUNCTIONS):
                raise ValueError(f"aggregate(): {output!r}: expected (column, function) with a "
                                 f"function in {sorted(AGGREGATE_FUNCTIONS)}, got {spec!r}")
            specs.append([str(output), spec[0], spec[1]])
        return self._keyed(plan.AGGREGATE, name or "aggregate", parallelism,
                           {"aggregations": specs})


class WindowedStream:
    """A keyed stream cut into event-time windows (``KeyedStream.window``); each of its
    aggregates emits ``(key, window_start, window_end, value)`` per key and window once
    the watermark passes the window's end. Streaming jobs only."""

    def __init__(self, keyed: KeyedStream, window: dict[str, float]) -> None:
        self._keyed = keyed
        self._window = window

    def _aggregate(self, function: str, name: str, parallelism: int | None,
                   field: str | int | None = None, fn: Callable[..., Any] | None = None,
                   aggregate: AggregateFunctions | None = None) -> DataStream:
        return self._keyed._keyed(plan.WINDOW, name, parallelism,
                                  {**self._window, "function": function, "field": field},
                                  fn, aggregate)

    @checked_operator("count")
    def count(self, *, name: str | None = None, parallelism: int | None = None) -> DataStream:
        """The number of records of each key and window."""
        return self._aggregate("count", name or "window count", parallelism)

    @checked_operator("sum")
    def sum(self, field: str | int | None = None, *, name: str | None = None,
            parallelism: int | None = None) -> DataStream:
        """The sum of ``field`` (or of the records themselves) of each key and window."""
        return self._of_field("sum", field, name, parallelism)

    @checked_operator("min")
    def min(self, field: str | int | None = None, *, name: str | None = None,
            parallelism: int | None = None) -> DataStream:
        """The smallest ``field`` (or record) of each key and window."""
        return self._of_field("min", field, name, parallelism)

    @checked_operator("max")
    def max(self, field: str | int | None = None, *, name: str | None = None,
            parallelism: int | None = None) -> DataStream:
        """The largest ``field`` (or record) of each key and window."""
        return self._of_field("max", field, name, parallelism)

    @checked_operator("mean")
    def mean(self, field: str | int | None = None, *, name: str | None = None,
             parallelism: int | None = None) -> DataStream:
        """The mean of ``field`` (or of the records themselves) of each key and window, a
        float: its sum over its count (the checkpointed aggregate is the pair)."""
        return self._of_field("mean", field, name, parallelism)

    def _of_field(self, function: str, field: str | int | None, name: str | None,
                  parallelism: int | None) -> DataStream:
        if field is not None and (isinstance(field, bool) or not isinstance(field, str | int)):
            raise TypeError(f"{function}(): field is a name or a position, got {field!r}")
        return self._aggregate(function, name or f"window {function}", parallelism,
                               field=field)

    @checked_operator("reduce")
    def reduce(self, fn: Callable[[Any, Any], Any], *, name: str | None = None,
               parallelism: int | None = None) -> DataStream:
        """The records of each key and window combined pairwise with ``fn(a, b)``
        (associative and commutative, as batch ``reduce``)."""
        return self._aggregate("reduce", name or "window reduce", parallelism,
                               fn=user_function("reduce", fn))

    @checked_operator("aggregate")
    def aggregate(self, create: Callable[[], Any], add: Callable[[Any, Any], Any],
                  merge: Callable[[Any, Any], Any], result: Callable[[Any], Any] | None = None,
                  *, name: str | None = None, parallelism: int | None = None) -> DataStream:
        """Flink's AggregateFunction: ``create()`` a fresh accumulator, ``add(accumulator,
        record)`` the accumulator with one more record, ``merge(a, b)`` two accumulators
        as one, ``result(accumulator)`` the window's value (default: the accumulator).
        Accumulators are checkpointed: scalars, tuples, lists, dicts (as records between
        vertices), e.g. an average: ``aggregate(lambda: (0, 0), lambda a, r: (a[0] +
        r[1], a[1] + 1), lambda a, b: (a[0] + b[0], a[1] + b[1]), lambda a: a[0] / a[1])``."""
        finish = None if result is None else user_function("aggregate", result)
        functions = AggregateFunctions(user_function("aggregate", create),
                                       user_function("aggregate", add),
                                       user_function("aggregate", merge), finish)
        return self._aggregate("aggregate", name or "window aggregate", parallelism,
                               aggregate=functions)
