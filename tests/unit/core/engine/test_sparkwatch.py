"""Following an attempt's Spark jobs asks Spark's REST API only for what may have changed
beyond the status tracker's counts."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from clusterdeck.core.engine import sparkwatch
from clusterdeck.core.engine.sparkstatus import StageEdges
from clusterdeck.core.engine.sparkwatch import DETAIL_INTERVAL, SparkWatch
from tests.waiting import wait_for


class FakeSpark:
    """A SparkContext as the watch uses it, with one running Spark job of one stage of 200
    tasks; ``done`` moves on between polls."""

    uiWebUrl = "http://ui"
    applicationId = "app-1"

    def __init__(self) -> None:
        self.done = 10

    def statusTracker(self) -> Any:
        return self

    def getJobIdsForGroup(self, group: str) -> list[int]:
        return [0]

    def getJobInfo(self, job_id: int) -> Any:
        return SimpleNamespace(status="RUNNING" if self.done < 200 else "SUCCEEDED")

    def getStageInfo(self, stage_id: int) -> Any:
        return SimpleNamespace(currentAttemptId=0, numTasks=200, numActiveTasks=4,
                               numCompletedTasks=self.done, numFailedTasks=0)

    def rest(self, url: str) -> Any:
        status = "ACTIVE" if self.done < 200 else "COMPLETE"
        if "/jobs/" in url:
            return {"jobId": 0, "name": "count at job.py:3", "stageIds": [1],
                    "status": "RUNNING" if self.done < 200 else "SUCCEEDED"}
        return [{"stageId": 1, "attemptId": 0, "status": status, "numTasks": 200,
                 "numActiveTasks": 4 if self.done < 200 else 0,
                 "numCompleteTasks": self.done, "inputBytes": 5}]


@pytest.fixture
def spark(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeSpark, list[str]]:
    fake, asked = FakeSpark(), []
    monkeypatch.setattr(sparkwatch, "_get", lambda url: asked.append(url) or fake.rest(url))
    return fake, asked


def test_between_detailed_polls_a_running_stage_costs_no_rest_call(spark) -> None:
    fake, asked = spark
    now = [100.0]
    watch = SparkWatch(lambda: fake, "job/v#0/a0", clock=lambda: now[0])
    watch.poll()
    assert len(asked) == 2  # the job and its stage
    for step in range(1, 10):
        now[0] += DETAIL_INTERVAL / 10
        fake.done = 10 + step
        work = watch.poll()
        assert work.stages[0].done == fake.done
    assert len(asked) == 2
    now[0] += DETAIL_INTERVAL / 10
    watch.poll()
    assert len(asked) == 4  # bytes and records, now and then


def test_a_stage_that_ended_is_asked_at_once_and_then_never_again(spark) -> None:
    fake, asked = spark
    watch = SparkWatch(lambda: fake, "job/v#0/a0")
    watch.poll()
    fake.done = 200
    work = watch.poll()
    assert (work.jobs[0].status, work.stages[0].status, work.stages[0].done) == (
        "SUCCEEDED", "COMPLETE", 200)
    count = len(asked)
    watch.poll()
    assert len(asked) == count


def test_each_jobs_stage_parents_are_asked_once_from_its_operation_graph(
        spark, monkeypatch) -> None:
    fake, _ = spark
    graphs: list[int] = []

    def operation_graph(context: Any, job_id: int) -> dict[int, StageEdges]:
        graphs.append(job_id)
        return {1: StageEdges(frozenset(), frozenset())}
    monkeypatch.setattr(sparkwatch, "stage_edges", operation_graph)
    watch = SparkWatch(lambda: fake, "job/v#0/a0")
    watch.poll()
    work = watch.poll()
    assert graphs == [0] and work.stages[0].parent_ids == ()


def test_a_spark_without_the_operation_graph_gives_stages_without_parents(spark) -> None:
    fake, _ = spark  # FakeSpark has no JVM behind it to ask
    watch = SparkWatch(lambda: fake, "job/v#0/a0")
    watch.poll()
    fake.done = 200
    work = watch.poll()
    assert work.stages[0].done == 200 and work.stages[0].parent_ids == ()


def test_the_rest_api_is_started_as_spark_starts_not_by_the_first_script(spark) -> None:
    fake, asked = spark
    sparkwatch.start_rest_api(fake)
    wait_for(lambda: asked, 10.0, "the REST API asked once")
    assert asked == ["http://ui/api/v1/version"]


def test_without_a_ui_nothing_is_asked(spark) -> None:
    fake, asked = spark
    fake.uiWebUrl = None
    sparkwatch.start_rest_api(fake)
    assert not [t for t in threading.enumerate() if t.name == "spark-rest-start"]
    assert not asked
