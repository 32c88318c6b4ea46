"""Keyed window state: the running aggregate of each (key, window) until the watermark
fires it (Flink's ``WindowOperator`` with an incremental ``AggregateFunction``).

``add`` folds a record's value into every window its timestamp falls into; a record for
a window that fired already is late: dropped and counted (Flink's default allowed
lateness of 0); ``merge`` folds in the aggregate of several records of one window made
elsewhere (a streaming task pre-aggregates each batch on Spark). ``fire(watermark)``
hands out, in order of window end then key, every window the watermark passed, and
forgets it. ``snapshot``/``restore`` carry the open windows, the late count and the
fired bound through a checkpoint; keys and values are the user's Python values (the
task encodes them as records).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from clusterdeck.core.streaming.eventtime import Window, WindowAssigner

Combine = Callable[[Any, Any], Any]


class KeyedWindows:
    def __init__(self, assigner: WindowAssigner, combine: Combine,
                 initial: Callable[[Any], Any] = lambda value: value) -> None:
        """``initial(value)`` starts a window's aggregate from its first value,
        ``combine(aggregate, value)`` folds in each next one (a count: ``lambda v: 1``
        and ``lambda a, v: a + 1``)."""
        self.assigner = assigner
        self.combine = combine
        self.initial = initial
        self._open: dict[tuple[Any, Window], Any] = {}
        self._fired_to = -math.inf  # windows ending at or before this have fired
        self.late = 0

    def add(self, key: Any, timestamp: float, value: Any) -> bool:
        """False when the record is late for every window it falls into (dropped)."""
        taken = False
        for window in self.assigner.assign(timestamp):
            if window[1] <= self._fired_to:
                continue
            slot = (key, window)
            self._open[slot] = self.combine(self._open[slot], value) if slot in self._open \
                else self.initial(value)
            taken = True
        if not taken:
            self.late += 1
        return taken

    def merge(self, key: Any, window: Window, partial: Any) -> bool:
        """Fold ``partial`` (several records of one key and window, aggregated elsewhere
        with ``combine``, e.g. by Spark over a batch) into the window; False (dropped, not
        counted: the caller counts the records) when the window fired already."""
        if window[1] <= self._fired_to:
            return False
        slot = (key, window)
        self._open[slot] = self.combine(self._open[slot], partial) if slot in self._open \
            else partial
        return True

    def merge_many(self, batch: list[tuple[tuple[Any, Window], Any]],
                   check: Callable[[int], None]) -> None:
        """``merge`` each ``((key, window), partial)``, once ``check(open windows
        after)`` did not raise (it refuses a batch that would grow the state too far)."""
        check(self.open_windows + len({slot for slot, _ in batch if slot not in self._open
                                       and slot[1][1] > self._fired_to}))
        for (key, window), partial in batch:
            self.merge(key, window, partial)

    def count_late(self, records: int) -> None:
        """Records found late elsewhere (against ``fired_to``) and dropped there."""
        self.late += records

    @property
    def fired_to(self) -> float:
        """Windows ending at or before this have fired: a record only for them is late."""
        return self._fired_to

    def fire(self, watermark: float) -> list[tuple[Any, Window, Any]]:
        """``(key, window, aggregate)`` of every window that ends at or before
        ``watermark``, by end then key (as text, so mixed keys sort)."""
        if watermark <= self._fired_to:
            return []
        due = [slot for slot in self._open if slot[1][1] <= watermark]
        due.sort(key=lambda slot: (slot[1][1], slot[1][0], repr(slot[0])))
        self._fired_to = watermark
        return [(key, window, self._open.pop((key, window))) for key, window in due]

    @property
    def open_windows(self) -> int:
        return len(self._open)

    def snapshot(self) -> dict[str, Any]:
        fired_to = None if math.isinf(self._fired_to) else self._fired_to  # JSON has no inf
        return {"fired_to": fired_to, "late": self.late,
                "open": [[key, list(window), aggregate]
                         for (key, window), aggregate in self._open.items()]}

    def restore(self, state: dict[str, Any]) -> None:
        fired_to = state["fired_to"]
        self._fired_to = -math.inf if fired_to is None else float(fired_to)
        self.late = int(state["late"])
        self._open = {(_hashable(key), (float(window[0]), float(window[1]))): aggregate
                      for key, window, aggregate in state["open"]}


def _hashable(key: Any) -> Any:
    """A key read back from JSON-like data: lists become tuples again."""
    return tuple(_hashable(item) for item in key) if isinstance(key, list) else key
