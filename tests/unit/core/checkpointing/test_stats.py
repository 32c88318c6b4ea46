"""A job's checkpoints summed up for its snapshot: counts kept beyond the coordinator's
history, the newest checkpoints first and only so many, failures cut short, the latest
completed checkpoint and the restore carried along."""

from __future__ import annotations

from clusterdeck.core.checkpointing import (
    CheckpointCoordinator,
    CheckpointOptions,
    CheckpointRecord,
    CheckpointStatus,
    CheckpointTask,
    CompletedCheckpoint,
    StateHandle,
    SubtaskAck,
)
from clusterdeck.core.checkpointing.stats import checkpoint_stats, stats_of
from clusterdeck.core.protocol.checkpointstats import (
    FAILURE_KEPT,
    HISTORY_IN_SNAPSHOT,
    CheckpointStats,
    RestoredCheckpointStats,
)

TASKS = (CheckpointTask("source#0", "a-s0", source=True), CheckpointTask("sink#0", "a-k0"))


def coordinator() -> CheckpointCoordinator:
    return CheckpointCoordinator("job-1", CheckpointOptions(interval=1.0,
                                                            tolerable_failures=1000), now=0.0)


def complete(c: CheckpointCoordinator, now: float, size: int = 100) -> int:
    c.trigger(now, TASKS)
    checkpoint_id = c.in_progress
    assert checkpoint_id is not None
    for task in TASKS:
        c.acknowledge(checkpoint_id, task.subtask_id, task.attempt_id, SubtaskAck(
            StateHandle(f"chk-{checkpoint_id}/{task.subtask_id}.state", size, "0" * 64),
            alignment=0.25), now + 0.5)
    return checkpoint_id


def decline(c: CheckpointCoordinator, now: float, reason: str = "disk full") -> None:
    c.trigger(now, TASKS)
    assert c.in_progress is not None
    c.decline(c.in_progress, "sink#0", "a-k0", reason, now + 0.25)


def test_a_summary_counts_each_status_and_lists_the_newest_first() -> None:
    c = coordinator()
    complete(c, 1.0)
    decline(c, 2.0)
    c.trigger(3.0, TASKS)

    stats = stats_of(c)

    assert (stats.completed, stats.failed, stats.in_progress) == (1, 1, 1)
    assert [(s.checkpoint_id, s.status) for s in stats.history] == [
        (3, CheckpointStatus.IN_PROGRESS), (2, CheckpointStatus.FAILED),
        (1, CheckpointStatus.COMPLETED)]
    in_progress, failed, completed = stats.history
    assert in_progress.duration is None and in_progress.ended is None
    assert (in_progress.acknowledged, in_progress.expected) == (0, 2)
    assert failed.failure == "sink#0 declined: disk full" and failed.duration == 0.25
    assert completed == CheckpointStats(1, CheckpointStatus.COMPLETED, 1.0, 0.5, 200, 2, 2,
                                        0.25)
    assert stats.latest == completed and stats.restored is None


def test_counts_go_on_past_the_history_the_coordinator_keeps() -> None:
    c = coordinator()
    for n in range(105):
        complete(c, 1.0 + n)
    decline(c, 200.0)

    stats = stats_of(c)

    assert (stats.completed, stats.failed, stats.in_progress) == (105, 1, 0)
    assert len(c.history()) == 100
    assert stats.latest is not None and stats.latest.checkpoint_id == 105


def test_a_snapshot_carries_the_newest_checkpoints_only() -> None:
    history = [CheckpointRecord(n, CheckpointStatus.COMPLETED, float(n), n + 0.5)
               for n in range(1, 31)]

    stats = checkpoint_stats(history, completed=30, failed=0)

    assert len(stats.history) == HISTORY_IN_SNAPSHOT == 20
    assert [s.checkpoint_id for s in stats.history] == list(range(30, 10, -1))
    assert checkpoint_stats(history, 30, 0, kept=0).history == ()


def test_a_long_failure_reason_is_cut_to_its_start() -> None:
    reason = "sink#0 declined: " + "x" * 5000
    history = [CheckpointRecord(1, CheckpointStatus.FAILED, 1.0, 2.0, failure=reason)]

    (failed,) = checkpoint_stats(history, completed=0, failed=1).history

    assert len(failed.failure) == FAILURE_KEPT
    assert failed.failure.startswith("sink#0 declined: xxx") and failed.failure.endswith("\u2026")


def test_the_latest_completed_checkpoint_comes_from_the_store_when_the_history_lacks_it(
        ) -> None:
    """A new JobManager recovered checkpoint 7 from disk: no line of it in its history."""
    recovered = CompletedCheckpoint("job-1", 7, 10.0, 12.5, {"source#0": StateHandle(
        "chk-7/source#0.state", 4096, "0" * 64)})

    stats = checkpoint_stats([], completed=0, failed=0, latest=recovered,
                             restored=RestoredCheckpointStats(7, 30.0))

    assert stats.latest == CheckpointStats(7, CheckpointStatus.COMPLETED, 10.0, 2.5, 4096)
    assert stats.latest.ended == 12.5
    assert stats.restored == RestoredCheckpointStats(7, 30.0)
    assert stats.history == () and (stats.completed, stats.in_progress) == (0, 0)


def test_a_job_without_checkpoints_yet_has_no_latest() -> None:
    c = coordinator()
    c.trigger(1.0, TASKS)
    c.abort_in_progress(1.5, "source#0/a0 is FAILED")

    stats = stats_of(c)

    assert stats.latest is None
    assert (stats.completed, stats.failed, stats.aborted) == (0, 0, 1)
    assert stats.history[0].failure == "source#0/a0 is FAILED"
