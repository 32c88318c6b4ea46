"""A deterministic rate generator: the replayable source of streaming tests and demos.

Subtask *s* of *p* emits the record indices *s*, *s + p*, *s + 2p*, ... at ``rate``
records a second in all (``rate / p`` for each subtask), up to ``count`` if given. A
record is a pure function of its index, so the position (the next index) is all a
checkpoint keeps: restored, the source emits exactly what followed it, as a Kafka
partition rewound to an offset would.

Rescaled (restored at another parallelism, ``rescaled_positions``): the old subtasks
stopped at different indices, so below the furthest of them some indices were emitted
and some not. Each new subtask takes its share (its indices modulo the new parallelism)
of those not emitted as a *backlog*, emitted first, then goes on from the furthest: every
index exactly once. The backlog is as long as the old subtasks were apart (a few batches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RatePosition:
    """The next record index this subtask emits (a checkpoint's state of the source), and
    after a rescale the indices below it still to emit first, in order."""

    next_index: int
    backlog: tuple[int, ...] = ()

    def emitted(self, index: int) -> bool:
        """Whether this subtask (whose indices ``index`` is one of) emitted ``index``."""
        return index < self.next_index and index not in self.backlog


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
        self._backlog = list(position.backlog) if position is not None else []
        if any(index % parallelism != subtask for index in [self._next, *self._backlog]):
            raise ValueError(f"position {self._next} is not one of subtask {subtask}'s")
        self._clock_start: float | None = None
        self._emitted_since_start = 0

    def position(self) -> RatePosition:
        return RatePosition(self._next, tuple(self._backlog))

    @property
    def exhausted(self) -> bool:
        return not self._backlog and self.count is not None and self._next >= self.count

    def poll(self, now: float, limit: int) -> list[int]:
        """The indices due by ``now`` (at most ``limit``), paced from the first poll: a
        restored source resumes at its rate, it does not catch up on the time it was down."""
        return list(self.poll_range(now, limit))

    def poll_range(self, now: float, limit: int) -> range | list[int]:
        """``poll``'s indices as a range (``start, start + p, ...``), for a source that
        makes its records as columns without a Python object per index (a list while a
        rescaled subtask's backlog lasts)."""
        if self._clock_start is None:
            self._clock_start = now
        due = int((now - self._clock_start) / self._interval) + 1 - self._emitted_since_start
        taken = max(0, min(due, limit))
        if self._backlog:
            backlog, self._backlog = self._backlog[:taken], self._backlog[taken:]
            self._emitted_since_start += len(backlog)
            return backlog
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


def rescaled_positions(old: list[RatePosition], parallelism: int,
                       count: int | None) -> list[RatePosition]:
    """The positions of ``parallelism`` new subtasks from those of every old subtask
    (``old[s]`` subtask *s*'s, of ``len(old)``), such that every index is emitted once
    in all, before and after: the module docstring."""
    stride = len(old)
    furthest = max(position.next_index for position in old)
    end = furthest if count is None else min(furthest, count)
    positions = []
    for subtask in range(parallelism):
        backlog = tuple(index for index in range(subtask, end, parallelism)
                        if not old[index % stride].emitted(index))
        first = furthest + (subtask - furthest) % parallelism
        positions.append(RatePosition(first, backlog))
    return positions
