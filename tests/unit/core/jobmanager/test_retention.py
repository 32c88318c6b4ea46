"""Retention chooses which ended jobs leave the cluster, and deletes what they left."""

from __future__ import annotations

from pathlib import Path

from clusterdeck.core.jobmanager.jobstore import JobRecord
from clusterdeck.core.jobmanager.retention import (
    JobFiles,
    RetentionPolicy,
    delete_jobs,
    ended_at,
    expired,
    is_attempt_log_of,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, JobVertex, OperatorSpec
from clusterdeck.core.protocol.states import JobStatus

GRAPH = JobGraph("job", JobKind.DATAFLOW, (JobVertex("v", "v", 1, (
    OperatorSpec("op-1", "source.range", "range"),)),))
DAY = 86400.0


def record(job_id: str, submitted: float, status: JobStatus = JobStatus.FINISHED,
           duration: float | None = 1.0) -> JobRecord:
    result = p.JobResult(job_id, "job", status, duration=duration) \
        if status.is_terminal else None
    return JobRecord(job_id, GRAPH, "sha", submitted_at=submitted, status=status,
                     result=result)


def test_nothing_is_deleted_within_both_limits() -> None:
    records = [record(f"j{i}", 100.0 + i) for i in range(5)]
    assert expired(records, 200.0, RetentionPolicy(5, DAY)) == []


def test_the_oldest_ended_jobs_beyond_max_jobs_are_deleted_oldest_first() -> None:
    records = [record(f"j{i}", 100.0 + i) for i in range(10)]
    assert expired(records, 200.0, RetentionPolicy(7, DAY)) == ["j0", "j1", "j2"]


def test_jobs_are_ordered_by_when_they_ended_not_when_they_were_submitted() -> None:
    long_one = record("long", 100.0, duration=50.0)  # ended at 150
    short_one = record("short", 110.0, duration=1.0)  # ended at 111
    assert ended_at(long_one) == 150.0
    assert expired([long_one, short_one], 200.0, RetentionPolicy(1, DAY)) == ["short"]


def test_ended_jobs_older_than_max_age_are_deleted_however_few() -> None:
    records = [record("old", 0.0), record("young", 5 * DAY)]
    assert expired(records, 8 * DAY, RetentionPolicy(100, 7 * DAY)) == ["old"]


def test_a_running_job_is_never_deleted_however_old_or_many() -> None:
    records = [record("running", 0.0, JobStatus.RUNNING),
               record("restarting", 1.0, JobStatus.RESTARTING),
               record("ended", 2.0, JobStatus.FAILED, duration=None)]
    assert expired(records, 100 * DAY, RetentionPolicy(1, DAY)) == ["ended"]


def test_an_attempt_log_belongs_to_its_job_but_not_to_a_longer_id_sharing_its_start() -> None:
    assert is_attempt_log_of("ab_v-0_a0.log", "ab")
    assert is_attempt_log_of("ab_v-0_a0.log.end.1", "ab")
    assert not is_attempt_log_of("abc_v-0_a0.log", "ab")
    assert not is_attempt_log_of("ab_x_v-0_a0.log", "ab", ["ab_x"])
    assert is_attempt_log_of("ab_x_v-0_a0.log", "ab_x", [])


def test_deletion_removes_store_folder_work_dir_and_attempt_logs_and_nothing_else(
        tmp_path: Path) -> None:
    store, work, logs = tmp_path / "jobs", tmp_path / "work", tmp_path / "attempts"
    for job_id in ("ab", "ab_x", "keep"):
        (store / job_id).mkdir(parents=True)
        (store / job_id / "job.json").write_text("{}")
        (work / job_id / "partitions").mkdir(parents=True)
        logs.mkdir(exist_ok=True)
        (logs / f"{job_id}_v-0_a0.log").write_text("line\n")
    (logs / "ab_v-0_a0.log.end").write_text("line\n")
    delete_jobs([JobFiles("ab", store / "ab", work / "ab", ("ab_x",))], logs)
    assert sorted(path.name for path in store.iterdir()) == ["ab_x", "keep"]
    assert sorted(path.name for path in work.iterdir()) == ["ab_x", "keep"]
    assert sorted(path.name for path in logs.iterdir()) == ["ab_x_v-0_a0.log",
                                                            "keep_v-0_a0.log"]


def test_deletion_of_a_job_never_stored_or_already_gone_is_quiet(tmp_path: Path) -> None:
    delete_jobs([JobFiles("gone", tmp_path / "jobs" / "gone", tmp_path / "work" / "gone")],
                tmp_path / "no-logs")
