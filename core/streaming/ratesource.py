"""A deterministic rate generator: the replayable source of streaming tests and demos.

Subtask *s* of *p* emits the record indices *s*, *s + p*, *s + 2p*, ... at ``rate``
records a second in all (``rate / p`` for each subtask), up to ``count`` if given. A
record is a pure function of its index, so the position (the next index) is all a
checkpoint keeps: restored, the source emits exactly what followed it, as a Kafka
partition rewound to an offset would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RatePosition:
    """The next record index this subtask emits (a checkpoint's state of the source)."""

    next_index: int


class RateSource:
    def __init__(self, rate: float, subtask: int, parallelism: int, count: int | None = None,
                 position: RatePosition | None = None) -> None:
        if rate <= 0 or math.isinf(rate) or math.isnan(rate):
            raise ValueError("a rate source needs a positive, finite rate")
        if not 0 <= subtask < parallelism:
            raise ValueError(f"subtask {subtask} of {parallelism}")
        if count is not None and count < 0:
            raise ValueError("a rate source's count must not be negative")
        self.subtask, self.parallelism, self.count = subtask, parallelism, count
        self._interval = parallelism / rate  # seconds between two of this subtask's records
        self._next = position.next_index if position is not None else subtask
        if self._next % parallelism != subtask:
            raise ValueError(f"position {self._next} is not one of subtask {subtask}'s")
        self._clock_start: float | None = None
        self._emitted_since_start = 0

    def position(self) -> RatePosition:
        return RatePosition(self._next)

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self._next >= self.count

    def poll(self, now: float, limit: int) -> list[int]:
        """The indices due by ``now`` (at most ``limit``), paced from the first poll: a
        restored source resumes at its rate, it does not catch up on the time it was down."""
        return list(self.poll_range(now, limit))

    def poll_range(self, now: float, limit: int) -> range:
        """``poll``'s indices as a range (``start, start + p, ...``), for a source that
        makes its records as columns without a Python object per index."""
        if self._clock_start is None:
            self._clock_start = now
        due = int((now - self._clock_start) / self._interval) + 1 - self._emitted_since_start
        taken = max(0, min(due, limit))
        if self.count is not None:
            left = max(0, -(-(self.count - self._next) // self.parallelism))
            taken = min(taken, left)
        indices = range(self._next, self._next + taken * self.parallelism, self.parallelism)
        self._next += taken * self.parallelism
        self._emitted_since_start += taken
        return indices

    def seconds_to_next(self, now: float) -> float:
        """How long until the next record is due (0: one is due now)."""
        if self._clock_start is None:
            return 0.0
        due_at = self._clock_start + self._emitted_since_start * self._interval
        return max(0.0, due_at - now)


def rate_record(index: int) -> tuple[int, str]:
    """Record ``index`` of every rate source: the index and a key of ten values, so keyed
    operators have something to group (the same on every run)."""
    return index, f"key-{index % 10}"
