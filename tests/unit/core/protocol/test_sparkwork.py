"""A SparkWorkReport is checked on receipt: types by the codec, bounds by check_spark_work."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.sparkwork import (
    ERROR_KEPT,
    FAILED_TASKS_KEPT,
    JOBS_KEPT,
    NAME_KEPT,
    PARENTS_KEPT,
    SparkJob,
    SparkJobStatus,
    SparkStage,
    SparkStageStatus,
    SparkTaskFailure,
    SparkTotals,
    SparkWork,
    check_spark_work,
)
from clusterdeck.core.rpc import CodecError, from_data, to_data

STAGE = SparkStage(1, 0, 0, "count at job.py:3", SparkStageStatus.ACTIVE, 4, running=1, done=2)
JOB = SparkJob(0, "count at job.py:3", "", SparkJobStatus.RUNNING, (1,))
TASK = SparkTaskFailure(1, 0, 7, 3, 0, "driver", "ValueError: bad", "trace")
WORK = SparkWork("job/v#0/a0", (JOB,), (STAGE,), (TASK,), SparkTotals(jobs=2), reports=3)


def test_a_report_travels_and_comes_back_equal() -> None:
    report = p.SparkWorkReport("job", WORK)
    assert from_data(to_data(report), p.SparkWorkReport) == report
    check_spark_work(WORK)


def test_a_status_spark_does_not_have_is_refused_by_the_codec() -> None:
    data = to_data(p.SparkWorkReport("job", WORK))
    data["work"]["stages"][0]["status"] = "HALF-DONE"
    with pytest.raises(CodecError):
        from_data(data, p.SparkWorkReport)


@pytest.mark.parametrize("hostile", [
    replace(WORK, jobs=(JOB,) * (JOBS_KEPT + 1)),
    replace(WORK, failed_tasks=(TASK,) * (FAILED_TASKS_KEPT + 1)),
    replace(WORK, stages=(replace(STAGE, done=4),)),  # more running and done than tasks
    replace(WORK, stages=(replace(STAGE, tasks=-1, running=0, done=0),)),
    replace(WORK, jobs=(replace(JOB, name="x" * (NAME_KEPT + 1)),)),
    replace(WORK, failed_tasks=(replace(TASK, error="x" * (ERROR_KEPT + 1)),)),
    replace(WORK, earlier=SparkTotals(tasks=2**63)),
    replace(WORK, reports=-1),
    replace(WORK, stages=(replace(STAGE, parent_ids=tuple(range(PARENTS_KEPT + 1))),)),
    replace(WORK, stages=(replace(STAGE, parent_ids=(-1,)),)),
], ids=["jobs", "failed tasks", "counts", "negative", "name", "error", "huge", "reports",
        "parents", "negative parent"])
def test_a_report_no_honest_taskmanager_sends_is_refused(hostile: SparkWork) -> None:
    with pytest.raises(ValueError):
        check_spark_work(hostile)


def test_progress_counts_stages_done_and_skipped_of_those_known() -> None:
    done = replace(STAGE, stage_id=2, status=SparkStageStatus.SKIPPED, running=0)
    work = replace(WORK, stages=(STAGE, done), earlier=SparkTotals(stages=3, stages_done=3))
    assert work.stage_progress() == (4, 5)
