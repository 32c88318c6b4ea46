"""A cancel always ends, on a real cluster: even when the TaskManager running the attempt
never answers (stopped with SIGSTOP, and not yet declared lost), the job ends CANCELED
within jobmanager.cancel-timeout."""

from __future__ import annotations

import os
import signal

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from tests.integration.clusters import running_cluster, wait_result
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
CANCEL_TIMEOUT = 3.0


def test_a_cancel_the_taskmanager_never_answers_ends_canceled(tmp_path) -> None:
    # Heartbeats patient enough that the stopped TaskManager is not declared lost first:
    # that path ends a cancel too, and is tested in test_failover.
    with running_cluster("auto", **{"heartbeat.timeout": 120.0,
                                    "jobmanager.cancel-timeout": CANCEL_TIMEOUT}) as (
            local_cluster, _watcher), JobClient(local_cluster.config) as client:
        job = tmp_path / "sleepy.py"
        job.write_text("import time\n"
                       "def build(env):\n"
                       "    env.from_range(0, 2).map(lambda x: time.sleep(600) or x)"
                       ".collect()\n")
        job_id = client.submit(job, [])
        running = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and next(
            (a.slot.taskmanager_id for v in s.graph.vertices for t in v.subtasks
             for a in t.attempts[-1:] if a.state is ExecutionState.RUNNING and a.slot),
            None), 120, "an attempt running")
        pid = wait_for(lambda: local_cluster.supervisor.info(running).pid, 30, running)
        os.kill(pid, signal.SIGSTOP)
        try:
            client.cancel(job_id)
            result = wait_result(client, job_id, timeout=60)  # before: CANCELLING for ever
        finally:
            os.kill(pid, signal.SIGCONT)
        assert result.status is JobStatus.CANCELED
