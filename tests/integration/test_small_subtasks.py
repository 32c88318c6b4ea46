"""Many small subtasks on a real cluster (issue 34): a thousand one-row subtasks finish with
every row once, one failing subtask of two hundred runs again alone, and a cancelled job
of a thousand leaves no Spark job running on any TaskManager.

Each job chains its source, map and text sink into one vertex, so every subtask is its
own failover region. One-row subtasks run without Spark (local execution); the cancelled
job's subtasks read more rows than that allows, so each runs Spark jobs. The Spark jobs
still running are read from each TaskManager's Spark UI (its REST API), whose address
the TaskManager publishes with its live numbers, as the window's Open Spark UI learns
it: the only view from outside a TaskManager of what its Spark is doing, rather than what
the TaskManager says it did.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from clusterdeck.core.client.jobclient import ClusterClient, JobClient
from clusterdeck.core.jobapi.loader import load_job
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.ids import new_job_id
from clusterdeck.core.protocol.jobevents import job_events_in
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from tests.integration.clusters import QUICK_RESTARTS, RunningCluster, wait_result
from tests.integration.test_failover import BOTH, described
from tests.waiting import wait_for

# The Spark UI is asked for, not left to the TaskManager's default: the cancel test reads it.
pytestmark = [pytest.mark.integration, pytest.mark.cluster(
    {"spark.start": "eager", "spark.ui.enabled": "true", **QUICK_RESTARTS})]

ROWS = '''
def build(env):
    env.set_parallelism({count})
    env.from_range(0, {count} * {each}).map(lambda x: f"row {{x}}").write_text(env.args[0])
'''
# Rows per subtask of the cancelled job: past taskmanager.local-execution.max-records
# (1,000), so that each subtask runs Spark jobs for the cancel to stop.
SPARK_ROWS = 2000

# The subtask that reads row FAILING raises the first time only: the marker file, made
# before the raise, outlives the attempt (its Python worker runs on this machine).
FAILS_ONCE = '''
import os

def row(x):
    if x == {failing} and not os.path.exists({marker!r}):
        open({marker!r}, "x").close()
        raise RuntimeError("planned failure at row {failing}")
    return f"row {{x}}"

def build(env):
    env.set_parallelism({count})
    env.from_range(0, {count}).map(row).write_text(env.args[0])
'''
FAILING = 137
# Room for more than the one failure planned, so that another shows in the assertions.
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": 0.2}
# How long Spark's UI may lag behind Spark: its listener bus tells the UI's status store
# of a job's end asynchronously (milliseconds), and a busy JVM answers slowly.
UI_LAG = 30.0
# Spark writes times in milliseconds; the JobMaster's clock is this machine's, as Spark's.
CLOCK_SLACK = 0.002


def rows_job(tmp_path: Path, count: int, each: int = 1) -> Path:
    """``count`` subtasks of ``each`` rows."""
    job = tmp_path / "rows.py"
    job.write_text(ROWS.format(count=count, each=each))
    return job


def expected_rows(count: int) -> Counter[str]:
    return Counter(f"row {x}" for x in range(count))


def written_rows(folder: Path) -> Counter[str]:
    """Every line of the sink's published files (readers skip ``_`` and ``.`` names)."""
    return Counter(line for part in sorted(folder.glob("part-*"))
                   for line in part.read_text().splitlines())


class JobEvents:
    """Every execution event of one job, from ``events/jobs/<job-id>`` (collected on the
    transport thread): they carry every change in full, where a large job's retained
    snapshot is reduced to counts. Subscribed before the job is submitted under its id."""

    def __init__(self, client: JobClient) -> None:
        self.client = client
        self.job_id = new_job_id()
        self.events: list[p.ExecutionStateEvent] = []
        self._lock = threading.Lock()
        client.service.subscribe(topics.job_events(self.job_id), self._on_events)

    def _on_events(self, _topic: str, message: object) -> None:
        moves = [e for e in job_events_in(message) if isinstance(e, p.ExecutionStateEvent)]
        with self._lock:
            self.events.extend(moves)

    def attempts(self) -> dict[int, int]:
        """How many attempts each subtask of the job's one vertex made so far."""
        with self._lock:
            return dict(Counter(s for s, _ in {(e.subtask, e.attempt) for e in self.events}))

    def finished(self) -> Counter[int]:
        """How many times each subtask reached FINISHED."""
        with self._lock:
            return Counter(e.subtask for e in self.events if e.new is ExecutionState.FINISHED)

    def wait_all_finished(self, subtasks: int, timeout: float = 30.0) -> None:
        """Until every subtask's FINISHED arrived: the result may come before its events."""
        wait_for(lambda: len(self.finished()) == subtasks, timeout,
                 f"the FINISHED events of {subtasks} subtasks ({len(self.finished())} came)")

    def close(self) -> None:
        self.client.service.unsubscribe(topics.job_events(self.job_id), self._on_events)


@contextmanager
def job_events(client: JobClient) -> Iterator[JobEvents]:
    events = JobEvents(client)
    try:
        yield events
    finally:
        events.close()


def assert_one_chained_vertex(graph: JobGraph | JobGraphSnapshot, parallelism: int) -> None:
    """Source, map and sink chained into one vertex: one subtask is all of a row's work."""
    (vertex,) = graph.vertices
    assert vertex.parallelism == parallelism
    assert [op.kind for op in vertex.operators] == ["source.range", "map", "sink.text"]


class SparkUis:
    """Each TaskManager's Spark UI address, from its live numbers on ``metrics/+``
    (collected on the transport thread), and the Spark jobs its REST API lists."""

    def __init__(self, watcher_client: ClusterClient) -> None:
        self.service = watcher_client.service
        self.addresses: dict[str, str] = {}
        self.applications: dict[str, str] = {}  # TaskManager -> its Spark application id
        self._lock = threading.Lock()
        self.service.subscribe(topics.METRICS_ALL, self._on_metrics)

    def _on_metrics(self, _topic: str, message: object) -> None:
        if isinstance(message, p.TaskManagerMetrics) and message.spark_ui:
            with self._lock:
                self.addresses[message.taskmanager_id] = message.spark_ui

    def wait_ready(self, taskmanagers: list[str], timeout: float = 120.0) -> None:
        """Until each TaskManager's UI is known and its REST API answers: the API's first
        request starts its servlet, which takes seconds on a busy machine."""
        def ready() -> bool:
            with self._lock:
                addresses = {t: self.addresses.get(t) for t in taskmanagers}
            for taskmanager, ui in addresses.items():
                if ui and taskmanager not in self.applications:
                    applications = _get(f"{ui}/api/v1/applications")
                    if applications:
                        self.applications[taskmanager] = applications[0]["id"]
            return set(taskmanagers) <= set(self.applications)
        wait_for(ready, timeout, f"the Spark UIs of {taskmanagers} answering")

    def spark_jobs(self, job_id: str, status: str = "") -> dict[str, list[dict]] | None:
        """Per TaskManager, its Spark jobs (``status``: running, succeeded, failed...; all
        when empty) whose group, description, name or tags name the clusterdeck job; None
        when a UI did not answer, so that silence is never read as "no job"."""
        query = f"?status={status}" if status else ""
        found = {}
        for taskmanager, application in self.applications.items():
            jobs = _get(f"{self.addresses[taskmanager]}/api/v1/applications/{application}"
                        f"/jobs{query}")
            if jobs is None:
                return None
            found[taskmanager] = [job for job in jobs if job_id in _labels(job)]
        return found

    def close(self) -> None:
        self.service.unsubscribe(topics.METRICS_ALL, self._on_metrics)


def _get(url: str) -> Any:
    """The REST answer, or None when the UI does not answer in time (a busy JVM)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)
    except (TimeoutError, urllib.error.URLError):
        return None


def _labels(spark_job: dict) -> str:
    return " ".join([spark_job.get("jobGroup") or "", spark_job.get("description") or "",
                     spark_job.get("name") or "", *spark_job.get("jobTags", ())])


def _ended_after(spark_job: dict, moment: float) -> bool:
    """Whether the Spark job began after ``moment`` (epoch seconds) or had not ended by it."""
    ended = spark_job.get("completionTime")
    return (_epoch(spark_job["submissionTime"]) > moment
            or ended is None or _epoch(ended) > moment)


def _epoch(spark_time: str) -> float:
    """A time of Spark's REST API (``2026-11-27T06:20:01.234GMT``) as epoch seconds."""
    return datetime.strptime(spark_time.replace("GMT", "+0000"),
                             "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


@pytest.fixture(scope="module")
def spark_uis(cluster: RunningCluster) -> Iterator[SparkUis]:
    uis = SparkUis(cluster[1].client)
    try:
        yield uis
    finally:
        uis.close()


@pytest.mark.timeout(600)
def test_a_thousand_one_row_subtasks_write_every_row_once(
        client: JobClient, cluster: RunningCluster, tmp_path: Path) -> None:
    cluster[1].wait_registered(BOTH, timeout=120)
    out = tmp_path / "out"
    job = rows_job(tmp_path, 1000)
    assert_one_chained_vertex(load_job(job, [str(out)]).graph, 1000)
    with job_events(client) as events:
        began = time.monotonic()
        client.submit(job, [str(out)], job_id=events.job_id)
        # ~200 s on Spark before local execution; ~15 s with it on a loaded machine
        result = wait_result(client, events.job_id, timeout=300)
        took = time.monotonic() - began
        assert result.status is JobStatus.FINISHED, described(result)
        print(f"1,000 one-row subtasks: {took:.1f} s, {1000 / took:.1f} subtasks/s")
        assert written_rows(out) == expected_rows(1000)
        assert (result.finished, result.total, result.failures) == (1000, 1000, 0)
        assert_one_chained_vertex(client.snapshot(events.job_id).graph, 1000)
        events.wait_all_finished(1000)
        assert events.attempts() == dict.fromkeys(range(1000), 1)
        assert events.finished() == Counter(range(1000))


@pytest.mark.timeout(600)
def test_one_failing_subtask_of_two_hundred_runs_again_alone_and_the_output_is_exact(
        client: JobClient, cluster: RunningCluster, tmp_path: Path) -> None:
    cluster[1].wait_registered(BOTH, timeout=120)
    out, marker = tmp_path / "out", tmp_path / "failed-once"
    job = tmp_path / "fails_once.py"
    job.write_text(FAILS_ONCE.format(count=200, failing=FAILING, marker=str(marker)))
    with job_events(client) as events:
        client.submit(job, [str(out)], restart_strategy=RESTARTS, job_id=events.job_id)
        result = wait_result(client, events.job_id, timeout=300)
        assert result.status is JobStatus.FINISHED, described(result)
        assert marker.exists()
        assert written_rows(out) == expected_rows(200)
        (failure,) = result.failure_history
        assert failure["exception_type"] == "RuntimeError", described(result)
        assert f"planned failure at row {FAILING}" in failure["message"]
        assert (failure["attempt"], result.failures) == (0, 1)
        assert (result.finished, result.total) == (200, 200)
        assert_one_chained_vertex(client.snapshot(events.job_id).graph, 200)
        events.wait_all_finished(200)
        failed = failure["subtask"]  # its region is itself: no exchange in the job
        assert events.attempts() == {s: 2 if s == failed else 1 for s in range(200)}
        assert events.finished() == Counter(range(200))


@pytest.mark.timeout(600)
def test_a_cancelled_job_of_a_thousand_subtasks_leaves_no_spark_job_running(
        client: JobClient, cluster: RunningCluster, spark_uis: SparkUis,
        tmp_path: Path) -> None:
    cluster[1].wait_registered(BOTH, timeout=120)
    spark_uis.wait_ready(BOTH)
    out = tmp_path / "out"
    job_id = client.submit(rows_job(tmp_path, 1000, SPARK_ROWS), [str(out)])
    wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and s.graph.progress.finished >= 4,
             180, "a few subtasks finished, so the cancel meets a job under way")
    # Seen from outside first, so that "none left" below is not true for want of looking.
    wait_for(lambda: (running := spark_uis.spark_jobs(job_id, "running"))
             and any(running.values()), 180,
             "a Spark job of the job running on a TaskManager's Spark UI")
    client.cancel(job_id)
    result = wait_result(client, job_id, timeout=120)
    assert result.status is JobStatus.CANCELED, described(result)
    assert 4 <= result.finished < result.total == 1000, "cancelled too late to tell anything"
    canceled_at = client.snapshot(job_id).graph.status_timestamps[JobStatus.CANCELED]
    wait_for(lambda: (running := spark_uis.spark_jobs(job_id, "running")) is not None
             and not any(running.values()), UI_LAG,
             "no Spark job of the cancelled job running on any TaskManager")
    # The UI may lag; Spark's own times of each job's start and end do not.
    every = wait_for(lambda: spark_uis.spark_jobs(job_id), 60, "the Spark UIs answering")
    late = {taskmanager: [(j["jobId"], j["status"], j["submissionTime"], j.get("completionTime"))
                          for j in jobs if _ended_after(j, canceled_at + CLOCK_SLACK)]
            for taskmanager, jobs in every.items()}
    assert not any(late.values()), f"Spark jobs running after CANCELED at {canceled_at}: {late}"
