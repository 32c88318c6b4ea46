"""User counters (Flink's accumulators), backed by Spark accumulators per subtask attempt.

``env.counter("bad_lines")`` gives a Counter that user functions call ``.add(n)`` on. The
functions run in Spark's Python workers, which get a pickled copy of them. When a copy is
pickled on a slot thread inside ``CounterScope`` (entered by ``run_subtask``), it is bound
to a Spark accumulator created for that attempt; the worker's ``add`` goes to that
accumulator and Spark brings the sums back to the driver. The Counter object held by the
loaded job itself is never bound, so two attempts running the same job on two slot
threads at once never share an accumulator.
"""

from __future__ import annotations

import threading
from typing import Any

_scope = threading.local()


class Counter:
    """A named sum that user functions may ``add`` to; read the totals from the result."""

    def __init__(self, name: str, accumulator: Any = None) -> None:
        self.name = name
        self._accumulator = accumulator
        self._local: int | float = 0

    def add(self, amount: int | float = 1) -> None:
        if self._accumulator is not None:
            self._accumulator.add(amount)
        else:
            self._local += amount

    @property
    def value(self) -> int | float:
        """The local sum (outside Spark, e.g. when a function is called in a unit test)."""
        return self._local

    def __reduce__(self) -> tuple[Any, tuple[str, Any]]:
        scope: CounterScope | None = getattr(_scope, "current", None)
        accumulator = scope.accumulator(self.name) if scope is not None else self._accumulator
        return _restore_counter, (self.name, accumulator)

    def __repr__(self) -> str:
        return f"Counter({self.name!r})"


def _restore_counter(name: str, accumulator: Any) -> Counter:
    return Counter(name, accumulator)


class CounterScope:
    """Binds the counters pickled on this thread to accumulators of one attempt.

    Entered and left on the slot thread that runs the attempt; ``values`` is read there
    after the attempt's Spark jobs have finished.
    """

    def __init__(self, spark_context: Any, names: tuple[str, ...] = ()) -> None:
        self._spark_context = spark_context
        self._accumulators: dict[str, Any] = {}
        self._previous: CounterScope | None = None
        for name in names:
            self.accumulator(name)

    def accumulator(self, name: str) -> Any:
        if name not in self._accumulators:
            self._accumulators[name] = self._spark_context.accumulator(0)
        return self._accumulators[name]

    def values(self) -> dict[str, int | float]:
        return {name: acc.value for name, acc in sorted(self._accumulators.items())}

    def __enter__(self) -> CounterScope:
        self._previous = getattr(_scope, "current", None)
        _scope.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        _scope.current = self._previous
