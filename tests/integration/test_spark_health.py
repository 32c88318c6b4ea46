"""A TaskManager whose Spark JVM dies under a running attempt, on a real cluster.

The JVM is the TaskManager's ``java`` child; killing it with SIGKILL must fail the attempt
with a cause naming the JVM, not only a Py4J connection error, and the TaskManager must
start Spark again in the same process so that the restarted attempt finishes there.
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from pathlib import Path

import psutil
import pytest

from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.taskmanager.sparkhealth import SPARK_DIED
from tests.integration.clusters import running_cluster, wait_result
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
NUMBERS = 2500

SLOW_SQUARES = f'''
import time

def slow_square(x):
    time.sleep(0.004)
    return x * x

def build(env):
    env.set_parallelism(1)
    env.from_range(0, {NUMBERS}, name="numbers").map(slow_square, name="slow square").collect()
'''


def running_on(snapshot: JobGraphSnapshot) -> str | None:
    """The TaskManager running the job's one subtask, from its retained snapshot."""
    for vertex in snapshot.vertices:
        for subtask in vertex.subtasks:
            current = subtask.attempts[-1]
            if current.state is ExecutionState.RUNNING and current.slot:
                return current.slot.taskmanager_id
    return None


def alive_children(process: psutil.Process) -> list[psutil.Process]:
    """``process``'s children, without zombies (Spark's launch script leaves one)."""
    children = []
    for child in process.children():
        with suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE:
                children.append(child)
    return children


def spark_jvm(taskmanager: psutil.Process) -> psutil.Process | None:
    """The TaskManager's Spark JVM, once ``spark-submit`` has exec'd into it."""
    for child in alive_children(taskmanager):
        with suppress(psutil.Error):
            if "org.apache.spark.deploy.SparkSubmit" in child.cmdline():
                return child
    return None


def python_workers(jvm: psutil.Process) -> list[psutil.Process]:
    """Spark's Python workers (``pyspark.daemon`` and its forks) are the JVM's children:
    they exist only once a Spark job runs Python code."""
    workers = []
    for child in alive_children(jvm):
        with suppress(psutil.Error):
            if "pyspark.daemon" in " ".join(child.cmdline()):
                workers.append(child)
    return workers


def test_a_killed_spark_jvm_fails_its_attempt_with_that_cause_and_the_job_finishes(
        tmp_path: Path) -> None:
    with running_cluster("auto", **{"spark.start": "eager"}) as (cluster, watcher), \
            JobClient(cluster.config, connect_timeout=30) as client:
        job = tmp_path / "slow_squares.py"
        job.write_text(SLOW_SQUARES)
        job_id = client.submit(job, [], restart_strategy={
            "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 2,
            "restart-strategy.fixed-delay.delay": 0.2})
        victim = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and running_on(s.graph),
                          120, "the job's subtask running")
        # Only the victim is left, so the restarted attempt must run on the Spark it
        # starts again in the same process.
        other = next(t for t in ("taskmanager-1", "taskmanager-2") if t != victim)
        cluster.supervisor.stop_process(other)
        taskmanager_pid = cluster.supervisor.info(victim).pid
        assert taskmanager_pid is not None
        taskmanager = psutil.Process(taskmanager_pid)
        jvm = wait_for(lambda: spark_jvm(taskmanager), 120, f"the Spark JVM of {victim}")
        wait_for(lambda: python_workers(jvm), 120, "the slow map running in a Python worker")
        os.kill(jvm.pid, signal.SIGKILL)

        result = wait_result(client, job_id)

        causes = "\n".join(f"{f['exception_type']}: {f['message']}"
                           for f in result.failure_history)
        assert result.status is JobStatus.FINISHED, causes
        assert sorted(collected_rows(result)) == [x * x for x in range(NUMBERS)]
        [failure] = result.failure_history
        assert failure["exception_type"] == SPARK_DIED, causes
        assert failure["message"] == (f"the TaskManager's Spark JVM (pid {jvm.pid}) died: "
                                      "killed by signal 9 (SIGKILL)")
        assert failure["taskmanager_id"] == victim
        # The TaskManager lived on with a new JVM: Spark started again in the process.
        assert cluster.supervisor.info(victim).pid == taskmanager_pid
        new_jvm = spark_jvm(taskmanager)
        assert new_jvm is not None and new_jvm.pid != jvm.pid
        assert watcher.taskmanager(victim) is not None
