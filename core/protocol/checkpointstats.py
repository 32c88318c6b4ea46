"""A streaming job's checkpoints as observers see them: what ``JobGraphSnapshot.checkpoints``
carries to the window (Flink's ``CheckpointStatsSnapshot``).

The JobMaster's checkpoint coordinator remembers the last 100 checkpoints; a snapshot is
retained and must fit ``rpc.framesize``, so it carries a bounded summary instead: the
counts, the latest completed checkpoint, the one the job was restored from, and the
newest checkpoints (at most ``HISTORY_IN_SNAPSHOT``, newest first, each failure reason
cut to ``FAILURE_KEPT`` characters). It is built by
``clusterdeck.core.checkpointing.stats`` on the JobMaster's main thread, and when a
snapshot does not fit, its history is the first thing the reductions drop
(``clusterdeck.core.jobmanager.reductions``). A batch job carries none. Plain frozen
data: the codec checks every field on receipt like any other message's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

HISTORY_IN_SNAPSHOT = 20
"""Checkpoints of the history a snapshot carries, the newest."""
FAILURE_KEPT = 300
"""Characters of a failed checkpoint's reason a snapshot carries (its start: a decline
names the subtask first)."""


class CheckpointStatus(StrEnum):
    """FAILED: a task declined, it expired, or a savepoint was not written (a failure of
    checkpointing); ABORTED: it could not complete for a reason of the job's (a failover,
    the job ending or cancelled, a task finishing before it took part), as Flink counts
    them apart from failures in its own history."""

    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"


@dataclass(frozen=True)
class CheckpointStats:
    """One checkpoint: ``triggered`` is when it started (seconds since the epoch),
    ``duration`` how long it took to complete or fail (None while in progress), ``size``
    the bytes of its tasks' snapshots, ``alignment`` the longest any task's barriers
    waited (seconds), ``failure`` why it failed or was aborted (cut to ``FAILURE_KEPT``).
    ``savepoint``: it was a savepoint (asked for, or of a stop), ``path`` its folder once
    written; ``stop``: the job's sources stopped at it."""

    checkpoint_id: int
    status: CheckpointStatus
    triggered: float
    duration: float | None = None
    size: int = 0
    acknowledged: int = 0
    expected: int = 0
    alignment: float = 0.0
    failure: str = ""
    savepoint: bool = False
    stop: bool = False
    path: str = ""

    @property
    def ended(self) -> float | None:
        """When it completed or failed; None while in progress."""
        return None if self.duration is None else self.triggered + self.duration


@dataclass(frozen=True)
class RestoredCheckpointStats:
    """The checkpoint the job's tasks were last restored from (after a failover, or by a
    new JobManager), and when that restore happened."""

    checkpoint_id: int
    restored: float


@dataclass(frozen=True)
class CheckpointStatsSnapshot:
    """A streaming job's checkpoints: how many completed, failed and were aborted (since its
    JobManager started) and are in progress, the latest completed, the restore, and the newest
    checkpoints, newest first (empty when a reduced snapshot left them out: its
    ``truncated`` says so)."""

    completed: int = 0
    failed: int = 0
    in_progress: int = 0
    latest: CheckpointStats | None = None
    restored: RestoredCheckpointStats | None = None
    history: tuple[CheckpointStats, ...] = ()
    aborted: int = 0
