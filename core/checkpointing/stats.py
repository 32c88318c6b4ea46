"""A job's checkpoints summed up for its snapshot: from the coordinator's history (the last
100 ``CheckpointRecord``s, oldest first) to the bounded ``CheckpointStatsSnapshot``
observers read (``clusterdeck.core.protocol.checkpointstats``).

Pure; the JobMaster calls ``stats_of`` on its main thread each time it publishes the
job's snapshot (at most ten times a second), so this only copies a few dozen records.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterdeck.core.checkpointing.checkpoints import CheckpointRecord, CompletedCheckpoint
from clusterdeck.core.checkpointing.coordinator import CheckpointCoordinator
from clusterdeck.core.protocol.checkpointstats import (
    FAILURE_KEPT,
    HISTORY_IN_SNAPSHOT,
    CheckpointStats,
    CheckpointStatsSnapshot,
    CheckpointStatus,
    RestoredCheckpointStats,
)


def checkpoint_stats_of(record: CheckpointRecord) -> CheckpointStats:
    """One line of the history as it travels: the failure cut to ``FAILURE_KEPT``."""
    failure = record.failure
    if len(failure) > FAILURE_KEPT:
        failure = failure[:FAILURE_KEPT - 1] + "\u2026"
    return CheckpointStats(record.checkpoint_id, record.status, record.triggered,
                           record.duration, record.size, record.acknowledged, record.expected,
                           record.alignment, failure, record.savepoint, record.stop,
                           record.path)


def checkpoint_stats(history: Sequence[CheckpointRecord], completed: int, failed: int,
                     latest: CompletedCheckpoint | None = None,
                     restored: RestoredCheckpointStats | None = None,
                     kept: int = HISTORY_IN_SNAPSHOT, aborted: int = 0
                     ) -> CheckpointStatsSnapshot:
    """The summary of ``history`` (oldest first, as the coordinator keeps it) with the
    coordinator's counts: the newest ``kept`` checkpoints, newest first.

    ``latest`` is the store's latest completed checkpoint: its line in the history when
    there is one, else (it fell out of the history, or a new JobManager recovered it
    from disk) what the checkpoint itself says.
    """
    in_progress = sum(1 for r in history if r.status is CheckpointStatus.IN_PROGRESS)
    newest = tuple(checkpoint_stats_of(r) for r in reversed(history[-kept:] if kept else ()))
    return CheckpointStatsSnapshot(completed=completed, failed=failed,
                                   in_progress=in_progress,
                                   latest=_latest(history, latest), restored=restored,
                                   history=newest, aborted=aborted)


def stats_of(coordinator: CheckpointCoordinator,
             restored: RestoredCheckpointStats | None = None) -> CheckpointStatsSnapshot:
    """What the JobMaster puts into its job's snapshot (main thread)."""
    return checkpoint_stats(coordinator.history(), coordinator.completed_count,
                            coordinator.failed_count, coordinator.latest(), restored,
                            aborted=coordinator.aborted_count)


def _latest(history: Sequence[CheckpointRecord],
            latest: CompletedCheckpoint | None) -> CheckpointStats | None:
    if latest is None:
        return None
    record = next((r for r in reversed(history) if r.checkpoint_id == latest.checkpoint_id
                   and r.status is CheckpointStatus.COMPLETED), None)
    if record is not None:
        return checkpoint_stats_of(record)
    return CheckpointStats(latest.checkpoint_id, CheckpointStatus.COMPLETED, latest.triggered,
                           latest.completed - latest.triggered, latest.size)
