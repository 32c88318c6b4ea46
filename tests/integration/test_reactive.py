"""Reactive mode on a real cluster (docs/elastic.md, "Reactive mode"): a keyed streaming
job takes the slots there are, rescales when a TaskManager is added and again when one is
killed, each time from its latest checkpoint, and its committed output is exactly once
(every index once, every key's state where its key group went)."""

from __future__ import annotations

import os
import signal

import pytest

from clusterdeck.core.protocol.causes import CauseKind
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.integration.test_failover import described, pid_of
from tests.integration.test_rescaling import NUMBERED_JOB, check_exactly_once
from tests.integration.test_streaming import committed
from tests.waiting import wait_for

# One TaskManager of two slots: the job's two vertices (rate source, keyed process and
# file sink) at parallelism 1; with a second TaskManager, 2. The killed one is not
# restarted within the test (a long supervisor back-off), so the job must rescale down.
pytestmark = [pytest.mark.integration,
              pytest.mark.cluster({**SPARK_UP_AND_RESTARTS, "taskmanager.count": 1,
                                   "scheduler.mode": "reactive",
                                   "scheduler.reactive.stabilization": 1.0,
                                   "supervisor.restart-backoff": 600.0,
                                   "heartbeat.interval": 1.0, "heartbeat.timeout": 10.0,
                                   "rpc.ask-timeout": 30.0})]


def rescales(client, job_id: str) -> list[str]:
    """The job's rescales so far, as its chain of causes tells them."""
    snapshot = client.snapshot(job_id, 1.0)
    causes = snapshot.graph.causes if snapshot is not None else None
    return [event.summary for event in (causes.events if causes else ())
            if event.kind is CauseKind.JOB_RESCALED]


def widths(client, job_id: str) -> tuple[int, ...]:
    snapshot = client.snapshot(job_id, 1.0)
    return tuple(v.parallelism for v in snapshot.graph.vertices) if snapshot else ()


@pytest.mark.timeout(420)
def test_a_keyed_job_rescales_when_a_taskmanager_joins_and_when_one_is_killed(
        cluster, client, tmp_path) -> None:
    local, watcher = cluster
    job, out = tmp_path / "numbered.py", tmp_path / "out"
    job.write_text(NUMBERED_JOB)
    job_id = client.submit(job, (str(out), "1000000", "250"), parallelism=3)
    assert wait_for(lambda: widths(client, job_id) == (1, 1), 30, "the job on 2 slots")
    wait_for(lambda: len(committed(out)) >= 200, 180, "output at parallelism 1")

    local.add_taskmanager(2)
    watcher.wait_registered(["taskmanager-1", "taskmanager-2"], timeout=60)
    wait_for(lambda: any("from 1 to 2: taskmanager-2 registered" in s
                         for s in rescales(client, job_id)), 90, "rescaled to 2")
    before = len(committed(out))
    wait_for(lambda: len(committed(out)) >= before + 200 and list(out.glob("part-1-*")),
             120, "output of both subtasks at parallelism 2")

    os.kill(pid_of(local, "taskmanager-2"), signal.SIGKILL)
    wait_for(lambda: any("from 2 to 1: taskmanager-2 lost" in s
                         for s in rescales(client, job_id)), 90, "rescaled to 1")
    before = len(committed(out))
    wait_for(lambda: len(committed(out)) >= before + 200, 120, "output at parallelism 1 again")
    assert widths(client, job_id) == (1, 1)
    assert sum("taskmanager-2" in s for s in rescales(client, job_id)) == 2, \
        rescales(client, job_id)

    client.cancel(job_id)
    result = wait_result(client, job_id, 60)
    assert result.status == JobStatus.CANCELED, described(result)
    check_exactly_once(committed(out), None)
