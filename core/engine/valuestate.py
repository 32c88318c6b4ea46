"""``key_by(...).process(fn)``: the user's function over each key's records with that key's
value state (Flink's ``KeyedProcessFunction`` with one ``ValueState``).

``KeyedProcess`` runs inside Spark's Python workers, in batch and streaming jobs alike:
given a key, its value before and its records in order of arrival, it calls
``fn(record, state)`` for each and returns the value after and what was emitted. The
state itself is kept by the caller: a streaming subtask's ``ProcessState``
(keyedstate.py), checkpointed; a batch subtask's groups, which start from None.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from clusterdeck.core.engine.streamfunctions import Element, state_key


class ValueState:
    """One key's value, as a process function reads and writes it."""

    __slots__ = ("_value", "key")

    def __init__(self, key: Any, value: Any = None) -> None:
        self.key = key
        self._value = value

    def value(self) -> Any:
        """The value last updated for this key, or None."""
        return self._value

    def update(self, value: Any) -> None:
        """Keep ``value`` for this key (None clears it, as in Flink)."""
        self._value = value

    def clear(self) -> None:
        """Forget this key's value: it no longer takes a place in the state."""
        self._value = None

    def __repr__(self) -> str:
        return f"ValueState(key={self.key!r}, value={self._value!r})"


class KeyedProcess:
    """``(key, value, elements)`` -> ``(key, value after, emitted elements)``; each
    emitted record carries the timestamp of the record it came from."""

    def __init__(self, fn: Callable[[Any, ValueState], Iterable[Any] | None]) -> None:
        self.fn = fn

    def __call__(self, group: tuple[Any, Any, Sequence[Element]]) -> tuple[Any, Any, list[Element]]:
        key, value, elements = group
        state = ValueState(key, value)
        emitted: list[Element] = []
        for timestamp, record in elements:
            emitted.extend((timestamp, out) for out in _emitted(self.fn(record, state)))
        return key, state.value(), emitted


class KeyedRecord:
    """``(key, record)``, the key made hashable as keyed state holds it."""

    def __init__(self, key: Callable[[Any], Any]) -> None:
        self.key = key

    def __call__(self, record: Any) -> tuple[Any, Any]:
        return state_key(self.key(record)), record


class KeyedElement(KeyedRecord):
    """``(key, element)`` of a streaming element ``(timestamp, record)``."""

    def __call__(self, element: Element) -> tuple[Any, Any]:  # type: ignore[override]
        return state_key(self.key(element[1])), element


class BatchProcess:
    """A batch job's ``process``: one key's records (Spark's ``groupByKey``), from no
    value, to what the function emitted."""

    def __init__(self, fn: Callable[[Any, ValueState], Iterable[Any] | None]) -> None:
        self.process = KeyedProcess(fn)

    def __call__(self, group: tuple[Any, Iterable[Any]]) -> list[Any]:
        key, records = group
        _, _, emitted = self.process((key, None, [(None, record) for record in records]))
        return [record for _, record in emitted]


def _emitted(result: Any) -> Iterable[Any]:
    """What one call returned, as records: None is none; a string, bytes or a dict is
    refused, since iterating it would emit its characters or keys."""
    if result is None:
        return ()
    if isinstance(result, str | bytes | dict):
        raise TypeError(f"process(): the function returned a {type(result).__name__}; "
                        "return or yield the records to emit (a list of them, or None)")
    try:
        return iter(result)
    except TypeError:
        raise TypeError(f"process(): the function returned {result!r}; return or yield "
                        "the records to emit (a list of them, or None)") from None
