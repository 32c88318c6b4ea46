"""A streaming attempt's long-lived Spark task on a real local[2] Spark: batches answered
without a Spark job each, the user's exception read as a Spark PythonException is, a
killed worker and a cancelled attempt ending the wait at once, and no Spark job left
behind after ``close``."""

from __future__ import annotations

import os
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from clusterdeck.core.engine.cancellation import attempt_scope, cancel_subtask
from clusterdeck.core.engine.continuous import (
    ContinuousWorker,
    SparkJobs,
    WorkerLost,
    batch_runner,
)
from clusterdeck.core.engine.runtime import failure_of
from clusterdeck.core.engine.streamfunctions import Chained, MapElement
from clusterdeck.core.jobapi.errors import SubtaskCancelled
from tests.waiting import wait_for

pytestmark = pytest.mark.integration  # a SparkSession: a JVM


def no_job_running(spark) -> bool:
    return not spark.sparkContext.statusTracker().getActiveJobsIds()


def doubled():
    return Chained([MapElement(lambda record: record * 2)])


def test_batches_run_in_one_spark_job_for_the_whole_attempt(spark):
    worker = ContinuousWorker(spark.sparkContext)
    try:
        tracker = spark.sparkContext.statusTracker()
        assert worker.run(doubled(), [(None, 1)]).results == [(None, 2)]
        jobs = tracker.getActiveJobsIds()
        assert len(jobs) == 1
        for index in range(50):
            assert worker.run(doubled(), [(1.0, index)]).results == [(1.0, 2 * index)]
        assert tracker.getActiveJobsIds() == jobs
    finally:
        worker.close()
    wait_for(lambda: no_job_running(spark), timeout=15, what="the Spark job to end")


def test_a_users_exception_fails_the_task_with_the_users_line(spark):
    def broken(record):
        return record["missing"]   # the user's line

    worker = ContinuousWorker(spark.sparkContext)
    try:
        with pytest.raises(Exception) as raised:
            worker.run(Chained([MapElement(broken)]), [(None, {"there": 1})])
    finally:
        worker.close()
    failure = failure_of(raised.value, "v", 0, "a1")
    assert failure.message == "KeyError: 'missing'"
    assert 'return record["missing"]   # the user\'s line' in failure.traceback_text
    assert "in broken" in failure.traceback_text


def test_a_worker_killed_mid_stream_fails_the_batch_naming_it_never_a_hang(spark):
    def slow(record):
        time.sleep(30)
        return record

    worker = ContinuousWorker(spark.sparkContext)
    try:
        worker.run(doubled(), [(None, 1)])
        pid = worker.pid
        assert pid is not None
        threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
        started = time.monotonic()
        with pytest.raises(WorkerLost, match=f"pid {pid}.*died or was killed"):
            worker.run(Chained([MapElement(slow)]), [(None, 1)])
        assert time.monotonic() - started < 15
    finally:
        worker.close()
    wait_for(lambda: no_job_running(spark), timeout=15, what="the Spark job to end")


def test_cancelling_the_attempt_ends_its_wait_and_its_spark_job(spark):
    def slow(record):
        time.sleep(60)
        return record

    context = spark.sparkContext
    with attempt_scope(context, "e0a7", "cancel test"):
        worker = ContinuousWorker(context)
        try:
            worker.run(doubled(), [(None, 1)])
            threading.Timer(1.0, cancel_subtask, (spark, "e0a7")).start()
            started = time.monotonic()
            with pytest.raises(SubtaskCancelled):
                worker.run(Chained([MapElement(slow)]), [(None, 1)])
            assert time.monotonic() - started < 15
        finally:
            worker.close()
    wait_for(lambda: no_job_running(spark), timeout=15, what="the Spark job to end")


def test_a_master_that_is_not_local_runs_a_spark_job_per_batch(spark):
    remote = SimpleNamespace(sparkContext=SimpleNamespace(master="spark://elsewhere:7077"))
    assert isinstance(batch_runner(remote), SparkJobs)
    assert isinstance(batch_runner(spark), ContinuousWorker)
    jobs = SparkJobs(spark.sparkContext)
    assert jobs.run(doubled(), [(None, 1), (None, 2)]).results == [(None, 2), (None, 4)]


def test_a_worker_started_ahead_connects_at_the_first_batch_and_closes_unconnected(spark):
    early = ContinuousWorker(spark.sparkContext)
    try:
        early.start()
        early.start()
        assert early.run(doubled(), [(None, 2)]).results == [(None, 4)]
    finally:
        early.close()
    unused = ContinuousWorker(spark.sparkContext)
    unused.start()
    unused.close()
    wait_for(lambda: no_job_running(spark), timeout=15, what="the Spark jobs to end")
