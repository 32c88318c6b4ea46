"""A cancel always ends, on a real cluster: even when the TaskManager running the attempt
never answers (stopped with SIGSTOP, and not yet declared lost), the job ends CANCELED
within jobmanager.cancel-timeout; and a JobManager killed while the cancel waits ends
the job CANCELED when it starts again, instead of running it on."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from tests.integration.clusters import running_cluster, wait_result
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
CANCEL_TIMEOUT = 3.0
SLEEPY = ("import time\n"
          "def build(env):\n"
          "    env.from_range(0, 2).map(lambda x: time.sleep(600) or x).collect()\n")


@contextmanager
def frozen_job(tmp_path: Path, cancel_timeout: float) -> Iterator[tuple]:
    """A cluster, a client, and a job whose running attempt's TaskManager is stopped with
    SIGSTOP (and continued when done). Heartbeats are patient enough that it is not
    declared lost first: that path ends a cancel too, and is tested in test_failover."""
    with running_cluster("auto", **{"heartbeat.timeout": 120.0,
                                    "jobmanager.cancel-timeout": cancel_timeout}) as (
            local_cluster, _watcher), JobClient(local_cluster.config) as client:
        job = tmp_path / "sleepy.py"
        job.write_text(SLEEPY)
        job_id = client.submit(job, [])
        running = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and next(
            (a.slot.taskmanager_id for v in s.graph.vertices for t in v.subtasks
             for a in t.attempts[-1:] if a.state is ExecutionState.RUNNING and a.slot),
            None), 120, "an attempt running")
        pid = wait_for(lambda: local_cluster.supervisor.info(running).pid, 30, running)
        os.kill(pid, signal.SIGSTOP)
        try:
            yield local_cluster, client, job_id
        finally:
            os.kill(pid, signal.SIGCONT)


def test_a_cancel_the_taskmanager_never_answers_ends_canceled(tmp_path) -> None:
    with frozen_job(tmp_path, CANCEL_TIMEOUT) as (_cluster, client, job_id):
        client.cancel(job_id)
        result = wait_result(client, job_id, timeout=60)  # before: CANCELLING for ever
    assert result.status is JobStatus.CANCELED


def test_a_jobmanager_killed_while_cancelling_ends_the_job_canceled_on_restart(
        tmp_path) -> None:
    with frozen_job(tmp_path, 600.0) as (local_cluster, client, job_id):
        client.cancel(job_id)
        stored = local_cluster.cluster_dir / "jobs" / job_id / "job.json"
        wait_for(lambda: json.loads(stored.read_text())["status"] == "CANCELLING", 30,
                 "the cancel stored")
        old_pid = local_cluster.supervisor.info("jobmanager").pid
        os.kill(old_pid, signal.SIGKILL)
        wait_for(lambda: local_cluster.supervisor.info("jobmanager").pid not in (None, old_pid),
                 60, "the JobManager restarted")
        result = wait_result(client, job_id, timeout=120)  # before: RUNNING again
    assert result.status is JobStatus.CANCELED
    assert result.root_cause is None
