"""Issue 37 on a real cluster: a PySpark script's Spark jobs, stages and failed tasks reach
its job's snapshot while it runs, bounded, and name what failed when a Spark task fails."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.sparkwork import (
    FAILED_TASKS_KEPT,
    JOBS_KEPT,
    REPORT_INTERVAL,
    STAGES_KEPT,
    SparkJobStatus,
    SparkStageStatus,
)
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import encoded_size
from tests.integration.clusters import running_cluster

pytestmark = pytest.mark.integration

THREE_ACTIONS = """
    import os
    import time
    from pyspark import SparkContext

    sc = SparkContext(appName="three actions")
    numbers = sc.parallelize(range(1000), 4)
    print("count", numbers.count())
    deadline = time.monotonic() + 120
    while not os.path.exists("go") and time.monotonic() < deadline:  # the test saw job 1
        time.sleep(0.05)
    print("sum", numbers.map(lambda x: x * 2).sum())
    pairs = numbers.map(lambda x: (x % 3, 1)).reduceByKey(lambda a, b: a + b, 3)
    print("keys", sorted(pairs.collect()))
    tracker = sc.statusTracker()
    for job in tracker.getJobIdsForGroup():
        for stage in tracker.getJobInfo(job).stageIds:
            info = tracker.getStageInfo(stage)
            if info is not None:
                print("spark stage", stage, info.numTasks, info.numCompletedTasks)
"""

FAILING = """
    from pyspark import SparkContext

    def check(record):
        if record == 7:
            raise ValueError(f"bad record {record}")
        return record

    sc = SparkContext(appName="failing")
    sc.parallelize(range(10), 2).map(check).count()
"""

RETRIED = """
    from pyspark import SparkContext, TaskContext

    def flaky(record):
        if record == 7 and TaskContext.get().attemptNumber() == 0:
            raise ValueError("first try of record 7")
        return record

    sc = SparkContext(appName="retried")
    print("sum", sc.parallelize(range(10), 2).map(flaky).sum())
"""

# 20,000 tiny tasks the cheap way: a task costs Spark itself the time (plain pyspark in
# local[1], no clusterdeck, 2 cores at load average 27-36: 1,000 Python tasks 128-159 s,
# the 20,000 tasks of a JVM stage, spark.range, 152 s), while following them costs the
# same per report whatever the tasks (docs/jobs.md, "A script's Spark work"). The 24
# small Python jobs go past JOBS_KEPT.
TINY_TASKS = """
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("tiny tasks").getOrCreate()
    sc = spark.sparkContext
    for _ in range(24):
        sc.parallelize(range(24), 4).count()
    print("rows", spark.range(0, 20000, 1, 20000).count())
    tracker = sc.statusTracker()
    jobs = tracker.getJobIdsForGroup()
    stages = {s for job in jobs for s in tracker.getJobInfo(job).stageIds}
    print("spark", len(jobs), len(stages), sum(tracker.getStageInfo(s).numTasks for s in stages))
"""


@pytest.fixture(scope="module")
def one_slot() -> Iterator[JobClient]:
    """One TaskManager of one slot, Spark up; a task that fails is tried twice by Spark
    (local mode's maxFailures is in its master URL)."""
    settings = {"taskmanager.count": 1, "taskmanager.slots": 1, "spark.start": "eager",
                "spark.master": "local[1,2]"}
    with running_cluster("auto", **settings) as (cluster, _), \
            JobClient(cluster.config, connect_timeout=30) as client:
        yield client


def run(client: JobClient, folder: Path, name: str, text: str,
        seen: list[p.JobSnapshot] | None = None,
        on_snapshot: Callable[[p.JobSnapshot], None] | None = None, within: float = 300.0
        ) -> tuple[p.JobResult, p.JobSnapshot]:
    (folder / name).write_text(textwrap.dedent(text))
    job_id = client.submit(folder / name, cwd=str(folder))
    result: list[p.JobResult] = []

    def progress(snapshot: p.JobSnapshot) -> None:
        if seen is not None:
            seen.append(snapshot)
        if on_snapshot is not None:
            on_snapshot(snapshot)
    waiter = threading.Thread(target=lambda: result.append(client.wait(job_id, progress)),
                              daemon=True)
    waiter.start()
    waiter.join(within)
    assert result, f"job {job_id} did not end within {within:g} s"
    deadline = time.monotonic() + 30
    while True:  # the retained snapshot after the end: published before the result
        final = client.snapshot(job_id)
        if (final is not None and final.graph.status.is_terminal) or \
                time.monotonic() > deadline:
            break
    assert final is not None and final.graph.status.is_terminal
    return result[0], final


def test_three_actions_show_three_spark_jobs_and_their_stages_with_sparks_own_counts(
        tmp_path, one_slot) -> None:
    seen: list[p.JobSnapshot] = []

    def go_once_job_one_is_seen(snapshot: p.JobSnapshot) -> None:
        graph = snapshot.graph
        if graph.status is JobStatus.RUNNING and graph.spark and graph.spark[-1].jobs:
            (tmp_path / "go").touch()
    result, final = run(one_slot, tmp_path, "three.py", THREE_ACTIONS, seen,
                        go_once_job_one_is_seen)
    assert result.status is JobStatus.FINISHED, result
    running = [s for s in seen if s.graph.status is JobStatus.RUNNING and s.graph.spark]
    assert running, "no snapshot showed the Spark work while the script ran"
    assert running[0].graph.progress.total >= 1  # stages, not the one subtask
    (work,) = final.graph.spark
    # Spark's call sites: the action and the script's line
    script = tmp_path / "three.py"
    assert [(job.name, job.status) for job in work.jobs] == [
        (f"count at {script}:8", SparkJobStatus.SUCCEEDED),
        (f"sum at {script}:12", SparkJobStatus.SUCCEEDED),
        (f"collect at {script}:14", SparkJobStatus.SUCCEEDED)]
    assert [len(job.stage_ids) for job in work.jobs] == [1, 1, 2]
    spark_own = {int(stage): (int(tasks), int(done)) for _, _, stage, tasks, done in
                 (line.split() for line in result.stdout.splitlines()
                  if line.startswith("spark stage"))}
    ours = {stage.stage_id: (stage.tasks, stage.done) for stage in work.stages}
    assert ours == spark_own and len(ours) == 4
    assert all(stage.status is SparkStageStatus.COMPLETE for stage in work.stages)
    shuffled = [stage for stage in work.stages if stage.shuffle_write_records]
    assert shuffled and shuffled[0].shuffle_write_bytes > 0
    # Spark's edge: the collect's stage reads the shuffle the reduceByKey's stage wrote.
    assert [stage.parent_ids for stage in work.stages] == [(), (), (), (shuffled[0].stage_id,)]
    assert final.graph.progress.finished == final.graph.progress.total
    shown = subprocess.run(
        [sys.executable, "-m", "clusterdeck.core.cli", "result", "--cluster",
         one_slot.config["cluster.id"], "--json", result.job_id],
        capture_output=True, text=True, timeout=120, check=True)
    (listed,) = json.loads(shown.stdout)["spark"]
    assert [job["name"] for job in listed["jobs"]] == [job.name for job in work.jobs]
    assert {s["stage_id"]: (s["tasks"], s["done"]) for s in listed["stages"]} == spark_own


def test_a_task_that_fails_for_good_names_its_stage_task_error_and_script_line(
        tmp_path, one_slot) -> None:
    result, final = run(one_slot, tmp_path, "failing.py", FAILING)
    assert result.status is JobStatus.FAILED
    work = final.graph.spark[-1]  # the job's restarts failed the same way
    assert [stage.status for stage in work.stages] == [SparkStageStatus.FAILED]
    assert work.failed_tasks and work.failed_tasks[-1].summary == "ValueError: bad record 7"
    assert [t.attempt for t in work.failed_tasks if t.index == 1] == [0, 1]  # Spark's retry
    cause = final.graph.root_cause.message  # the first attempt's, like the others'
    script = re.escape(str(tmp_path / "failing.py"))
    assert re.fullmatch(rf"Spark stage \d+\.0 \(count at {script}:10\)"
                        r" failed: task 1\.1 \(TID \d+\) on executor driver, after 2 failed "
                        r"task attempt\(s\): ValueError: bad record 7", cause), cause


def test_a_task_spark_retried_shows_its_failed_try_in_a_stage_that_completed(
        tmp_path, one_slot) -> None:
    result, final = run(one_slot, tmp_path, "retried.py", RETRIED)
    assert result.status is JobStatus.FINISHED and "sum 45" in result.stdout
    (work,) = final.graph.spark
    ((stage),) = work.stages
    assert (stage.status, stage.tasks, stage.done, stage.failed) == (
        SparkStageStatus.COMPLETE, 2, 2, 1)
    assert [(t.index, t.attempt, t.summary) for t in work.failed_tasks] == [
        (1, 0, "ValueError: first try of record 7")]
    assert work.jobs[0].status is SparkJobStatus.SUCCEEDED


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_20000_tiny_tasks_and_many_jobs_stay_within_the_reports_bounds(
        tmp_path, one_slot) -> None:
    """Slow: Spark's own cost per task (the same 20,000 tasks took plain pyspark 152 s on
    2 cores at load average 30); the time it took here is in the failure message."""
    seen: list[p.JobSnapshot] = []
    started = time.monotonic()
    result, final = run(one_slot, tmp_path, "tiny.py", TINY_TASKS, seen, within=800)
    took = time.monotonic() - started
    assert result.status is JobStatus.FINISHED, (took, result)
    assert "rows 20000" in result.stdout
    (work,) = final.graph.spark
    jobs, stages, tasks = (int(n) for n in result.stdout.split("spark ")[1].split())
    assert jobs >= 25 and tasks >= 24 * 4 + 20000  # Spark's own numbers
    assert len(work.jobs) == JOBS_KEPT and work.earlier.jobs == jobs - JOBS_KEPT
    assert len(work.stages) <= STAGES_KEPT and len(work.failed_tasks) <= FAILED_TASKS_KEPT
    assert len(work.stages) + work.earlier.stages == stages
    assert sum(stage.tasks for stage in work.stages) + work.earlier.tasks == tasks
    assert work.stage_progress() == (stages, stages)
    # Messages: at most one report per REPORT_INTERVAL while it ran, and the last one;
    # snapshots within their bound.
    assert work.reports <= took / REPORT_INTERVAL + 2
    assert max(encoded_size(s) for s in [*seen, final]) < 64 * 1024
