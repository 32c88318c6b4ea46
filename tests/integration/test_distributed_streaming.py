"""A streaming job on TaskManagers that share nothing with the JobManager but the broker
(each in a mount namespace of its own: tests/integration/namespaces.py).

Every snapshot is written on the disk of the TaskManager that took it; the JobMaster
fetches it from that TaskManager's data service before counting its acknowledgement, and
a subtask restored elsewhere asks the JobMaster for it. So a TaskManager killed with
kill -9 loses nothing: the job resumes on the other one from the last completed
checkpoint, and the committed output (in a folder every machine sees, as a shared
mount) is the undisturbed run's. Real broker, processes and Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import FAST_HEARTBEATS, running_cluster, wait_result
from tests.integration.namespaces import (
    NamespacedTaskManager,
    namespaced_taskmanagers,
    skip_unless_namespaces,
    wait_registered,
)
from tests.integration.test_failover import described, running_on
from tests.integration.test_streaming import WINDOWS, committed, windows_expected
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 5,
            "restart-strategy.fixed-delay.delay": 0.2}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, list[NamespacedTaskManager]]]:
    """A JobManager with no TaskManager of its own, and two of 2 slots in namespaces, with
    the rocksdb state backend: its snapshots travel as the heap backend's do (a ``.state``
    file a subtask, fetched from the TaskManager that wrote it) and its shared files with
    them. The heap backend's windows resuming after a killed TaskManager are
    test_streaming.py's (the default backend)."""
    skip_unless_namespaces()
    with running_cluster("auto", **{"taskmanager.count": 0}) as (local, watcher), \
            namespaced_taskmanagers(local, 2, tmp_path / "machines",
                                    {**FAST_HEARTBEATS, "taskmanager.slots": 2,
                                     "state.backend": "rocksdb"}) as started:
        wait_registered(watcher, started)
        yield local, started


def test_a_window_count_resumes_on_another_machine_from_snapshots_taken_on_the_lost_one(
        cluster, tmp_path: Path) -> None:
    local, taskmanagers = cluster
    job = tmp_path / "windows.py"  # one subtask a vertex: two slots, so one machine holds it
    job.write_text(WINDOWS.read_text().replace("set_parallelism(2)", "set_parallelism(1)"))
    out = tmp_path / "out"
    with JobClient(local.config, connect_timeout=30) as client:
        job_id = client.submit(job, (str(out), "8000", "500", "1"), restart_strategy=RESTARTS)
        wait_for(lambda: len(committed(out)) >= 100, 120, "some windows committed")
        host = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and running_on(
            "count per second", s.graph), 30, "the window subtask running")
        victim = next(t for t in taskmanagers if t.id == host)
        seen = victim.sees(local.cluster_dir / "work" / job_id / "checkpoints" / job_id)
        assert any(seen.glob("chk-*/*.state")), "no snapshot on the victim's own disk"
        victim.kill()
        result = wait_result(client, job_id, 240)
    assert result.status is JobStatus.FINISHED, described(result)
    assert committed(out) == windows_expected(8000)
    causes = [f["exception_type"] for f in result.failure_history]
    assert causes, "the kill failed no attempt"
    assert "CheckpointStorageError" not in causes, described(result)
