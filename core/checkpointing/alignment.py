"""Checkpoint barriers at a task with several input channels: when its snapshot is due
(Flink's ``SingleCheckpointBarrierHandler`` for exactly-once, ``CheckpointBarrierTracker``
for at-least-once).

A barrier never overtakes a record, so barrier *n* on a channel splits that channel's
records into those before checkpoint *n* and those after.

- **Exactly-once** (aligned): a channel that delivered barrier *n* is *blocked*, its
  records after the barrier wait, until barrier *n* came on every open channel; then the
  task takes its snapshot (it has seen exactly the records before *n* of every input)
  and every channel is unblocked. A newer barrier arriving first aborts the alignment
  of *n* (its checkpoint cannot complete here) and starts that of the newer one.
- **At-least-once** (unaligned): nothing is blocked; the snapshot is taken when barrier
  *n* came on every open channel, and records after it on the first channels are in the
  snapshot's state already (after a restore they are processed again). A fast channel
  may bring barrier *n+1* before a slow one brings *n*: several checkpoints are tracked
  at once, and one that completes subsumes the older ones still open.

In both, a channel that ended counts as having delivered every later barrier; a cancel
marker (the checkpoint was aborted upstream) aborts it here; barriers of checkpoints
older than the newest seen are ignored. Pure, on the task's own thread: it says what to
do and the task does it.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.protocol.checkpoints import CheckpointingMode


@dataclass(frozen=True)
class TakeSnapshot:
    """Every open channel delivered barrier ``checkpoint_id``: snapshot the state now, then
    send the barrier on to every output. ``alignment``: seconds from the first barrier."""

    checkpoint_id: int
    alignment: float


@dataclass(frozen=True)
class AbortCheckpoint:
    """Checkpoint ``checkpoint_id`` cannot complete at this task: decline it, and send a
    cancel marker on to every output."""

    checkpoint_id: int
    reason: str


AlignmentAction = TakeSnapshot | AbortCheckpoint
TRACKED = 50  # at-least-once: checkpoints open at once at a task, at most (Flink's number)


def barrier_handler(channels: int, mode: CheckpointingMode) -> BarrierAligner | BarrierTracker:
    """What a task with ``channels`` inputs uses for ``mode``."""
    if mode is CheckpointingMode.EXACTLY_ONCE:
        return BarrierAligner(channels)
    return BarrierTracker(channels)


class BarrierAligner:
    """Exactly-once: aligns one checkpoint at a time, blocking the channels that are
    ahead."""

    mode = CheckpointingMode.EXACTLY_ONCE

    def __init__(self, channels: int) -> None:
        if channels < 1:
            raise ValueError("a task with inputs has at least one channel")
        self._open = set(range(channels))
        self._current = 0        # the newest checkpoint seen here (0: none yet)
        self._arrived: set[int] = set()  # channels that delivered the current barrier
        self._started = 0.0      # when its first barrier arrived
        self._pending = False    # the current checkpoint waits for barriers

    def blocked(self, channel: int) -> bool:
        """Whether the records of ``channel`` must wait (exactly-once, aligning)."""
        return self._pending and channel in self._arrived

    @property
    def aligning(self) -> int | None:
        """The checkpoint whose barriers are awaited, if any."""
        return self._current if self._pending else None

    def on_barrier(self, channel: int, checkpoint_id: int, now: float) -> list[AlignmentAction]:
        self._check(channel)
        if checkpoint_id < self._current or (checkpoint_id == self._current
                                             and not self._pending):
            return []  # of a checkpoint already done, aborted or subsumed here
        actions: list[AlignmentAction] = []
        if checkpoint_id > self._current:
            if self._pending:
                actions.append(AbortCheckpoint(self._current, (
                    f"barrier {checkpoint_id} arrived before checkpoint {self._current} "
                    "was aligned")))
            self._current, self._arrived, self._started = checkpoint_id, set(), now
            self._pending = True
        self._arrived.add(channel)
        return actions + self._complete_if_aligned(now)

    def on_cancel(self, channel: int, checkpoint_id: int) -> list[AlignmentAction]:
        """A cancel marker: checkpoint ``checkpoint_id`` was aborted upstream."""
        self._check(channel)
        if checkpoint_id < self._current or (checkpoint_id == self._current
                                             and not self._pending):
            return []
        actions: list[AlignmentAction] = []
        if self._pending and checkpoint_id > self._current:
            actions.append(AbortCheckpoint(self._current, (
                f"checkpoint {checkpoint_id} was cancelled before checkpoint "
                f"{self._current} was aligned")))
        self._current, self._arrived, self._pending = checkpoint_id, set(), False
        return [*actions, AbortCheckpoint(checkpoint_id, "cancelled upstream")]

    def on_end_of_input(self, channel: int, now: float) -> list[AlignmentAction]:
        """``channel`` ended: it delivers no more barriers and blocks nothing."""
        self._check(channel)
        self._open.discard(channel)
        self._arrived.discard(channel)
        return self._complete_if_aligned(now) if self._pending else []

    def _complete_if_aligned(self, now: float) -> list[AlignmentAction]:
        if not self._open <= self._arrived:
            return []
        self._pending, self._arrived = False, set()
        return [TakeSnapshot(self._current, now - self._started)]

    def _check(self, channel: int) -> None:
        if channel not in self._open:
            raise ValueError(f"channel {channel} is not an open input of this task")


class BarrierTracker:
    """At-least-once: counts each checkpoint's barriers without blocking anything."""

    mode = CheckpointingMode.AT_LEAST_ONCE

    def __init__(self, channels: int) -> None:
        if channels < 1:
            raise ValueError("a task with inputs has at least one channel")
        self._open = set(range(channels))
        self._done = 0  # the newest checkpoint completed or aborted here
        self._tracked: dict[int, tuple[set[int], float]] = {}  # id -> channels, first barrier

    def blocked(self, channel: int) -> bool:
        return False

    @property
    def aligning(self) -> int | None:
        return min(self._tracked, default=None)

    def on_barrier(self, channel: int, checkpoint_id: int, now: float) -> list[AlignmentAction]:
        self._check(channel)
        if checkpoint_id <= self._done:
            return []
        actions: list[AlignmentAction] = []
        if checkpoint_id not in self._tracked:
            self._tracked[checkpoint_id] = (set(), now)
            while len(self._tracked) > TRACKED:
                oldest = min(self._tracked)
                del self._tracked[oldest]
                actions.append(AbortCheckpoint(oldest, f"more than {TRACKED} checkpoints "
                                                       "open at this task"))
        self._tracked[checkpoint_id][0].add(channel)
        return actions + self._complete(now)

    def on_cancel(self, channel: int, checkpoint_id: int) -> list[AlignmentAction]:
        self._check(channel)
        if checkpoint_id <= self._done:
            return []
        self._tracked.pop(checkpoint_id, None)
        return [AbortCheckpoint(checkpoint_id, "cancelled upstream")]

    def on_end_of_input(self, channel: int, now: float) -> list[AlignmentAction]:
        self._check(channel)
        self._open.discard(channel)
        return self._complete(now)

    def _complete(self, now: float) -> list[AlignmentAction]:
        """The newest checkpoint whose barriers all came, and the older ones it subsumes."""
        complete = [checkpoint_id for checkpoint_id, (arrived, _) in self._tracked.items()
                    if self._open <= arrived]
        if not complete:
            return []
        newest = max(complete)
        started = self._tracked[newest][1]
        actions: list[AlignmentAction] = [
            AbortCheckpoint(older, f"subsumed by checkpoint {newest}")
            for older in sorted(self._tracked) if older < newest]
        self._tracked = {k: v for k, v in self._tracked.items() if k > newest}
        self._done = newest
        return [*actions, TakeSnapshot(newest, now - started)]

    def _check(self, channel: int) -> None:
        if channel not in self._open:
            raise ValueError(f"channel {channel} is not an open input of this task")
