"""Event time: watermarks and the windows records fall into (Flink's
``BoundedOutOfOrdernessWatermarks``, ``TumblingEventTimeWindows``,
``SlidingEventTimeWindows``, and the minimum over a task's inputs).

Times are seconds (floats), as records carry them. A window is ``[start, end)``; it
fires once the watermark reaches ``end``: the watermark is the promise that no record
older than it will come any more (a later one is *late*).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Window = tuple[float, float]  # [start, end)


@dataclass(frozen=True)
class TumblingWindows:
    """Windows of ``size`` seconds, one after the other, from ``offset``."""

    size: float
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not self.size > 0:
            raise ValueError("a window's size must be positive")

    def assign(self, timestamp: float) -> list[Window]:
        start = math.floor((timestamp - self.offset) / self.size) * self.size + self.offset
        return [(start, start + self.size)]


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of ``size`` seconds starting every ``slide`` seconds: a record falls into
    ``size / slide`` of them (rounded up)."""

    size: float
    slide: float
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not (self.size > 0 and self.slide > 0):
            raise ValueError("a window's size and slide must be positive")

    def assign(self, timestamp: float) -> list[Window]:
        last = math.floor((timestamp - self.offset) / self.slide) * self.slide + self.offset
        windows = []
        start = last
        while start > timestamp - self.size:
            windows.append((start, start + self.size))
            start -= self.slide
        return windows[::-1]


WindowAssigner = TumblingWindows | SlidingWindows


class BoundedOutOfOrderness:
    """The watermark of a source whose records come at most ``max_delay`` seconds out of
    order: the largest timestamp seen minus that delay (minus a millisecond, as Flink: a
    record exactly ``max_delay`` late is still on time)."""

    def __init__(self, max_delay: float) -> None:
        if max_delay < 0:
            raise ValueError("the out-of-orderness bound must not be negative")
        self.max_delay = max_delay
        self._largest = -math.inf

    def on_record(self, timestamp: float) -> None:
        self._largest = max(self._largest, timestamp)

    def watermark(self) -> float:
        return self._largest - self.max_delay - 0.001

    def snapshot(self) -> float:
        return self._largest

    def restore(self, largest: float) -> None:
        self._largest = largest


class InputWatermarks:
    """A task's watermark is the smallest of its open inputs' (Flink's ``StatusWatermarkValve``,
    without idleness): it advances when the slowest input's does, never goes back, and
    an input that ended no longer holds it back."""

    def __init__(self, channels: int) -> None:
        self._marks = dict.fromkeys(range(channels), -math.inf)
        self._current = -math.inf

    @property
    def current(self) -> float:
        return self._current

    def on_watermark(self, channel: int, watermark: float) -> float | None:
        """The task's new watermark, if this one moved it forward."""
        if channel not in self._marks:
            raise ValueError(f"channel {channel} is not an open input")
        self._marks[channel] = max(self._marks[channel], watermark)
        return self._advance()

    def on_end_of_input(self, channel: int) -> float | None:
        self._marks.pop(channel, None)
        return self._advance()

    def _advance(self) -> float | None:
        lowest = min(self._marks.values(), default=math.inf)
        if lowest <= self._current:
            return None
        self._current = lowest
        return lowest
