"""The JobMaster keeps the newest Spark work of a script's last attempts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterdeck.core.jobmanager.sparkwork import ATTEMPTS_KEPT, ScriptSparkWork
from clusterdeck.core.protocol.sparkwork import (
    JOBS_KEPT,
    SparkJob,
    SparkJobStatus,
    SparkStage,
    SparkStageStatus,
    SparkWork,
)
from clusterdeck.core.rpc import RefusedMessageError

JOB = SparkJob(0, "count at job.py:3", "", SparkJobStatus.RUNNING, (1,))
STAGE = SparkStage(1, 0, 0, "count at job.py:3", SparkStageStatus.COMPLETE, 4, done=4)


def work(attempt: int, reports: int, stages: int = 1) -> SparkWork:
    return SparkWork(f"job/v#0/a{attempt}", (JOB,),
                     tuple(replace(STAGE, stage_id=n) for n in range(stages)), reports=reports)


def test_a_report_older_than_the_one_kept_is_dropped() -> None:
    book = ScriptSparkWork()
    assert book.reported(work(0, 2, stages=2))
    assert not book.reported(work(0, 1))
    assert book.snapshot() == (work(0, 2, stages=2),)


def test_only_the_last_attempts_are_kept() -> None:
    book = ScriptSparkWork()
    for attempt in range(ATTEMPTS_KEPT + 2):
        book.reported(work(attempt, 1))
    assert [w.attempt_id for w in book.snapshot()] == [
        f"job/v#0/a{n}" for n in range(2, ATTEMPTS_KEPT + 2)]


def test_a_hostile_report_is_refused_and_changes_nothing() -> None:
    book = ScriptSparkWork()
    with pytest.raises(RefusedMessageError, match="more Spark jobs"):
        book.reported(replace(work(0, 1), jobs=(JOB,) * (JOBS_KEPT + 1)))
    assert book.snapshot() == ()


def test_progress_is_the_newest_attempts_stages_or_the_subtasks_without_any() -> None:
    book = ScriptSparkWork()
    assert book.progress((0, 1)) == (0, 1)
    book.reported(work(0, 1, stages=3))
    book.reported(SparkWork("job/v#0/a1", reports=1))  # no Spark job yet
    assert book.progress((0, 1)) == (3, 3)
