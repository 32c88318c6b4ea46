"""The active ResourceManager on a real cluster: TaskManagers started for a wide job and
stopped once idle, a job that could never get its slots refused at once, and a
TaskManager command that fails, started again only after its back-off."""

from __future__ import annotations

import threading
import time

import pytest

from clusterdeck.core.client.jobclient import collected_rows
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import RemoteError
from clusterdeck.core.supervisor import ProcessStatus
from tests.integration.clusters import ClusterWatcher, running_cluster, wait_result
from tests.waiting import wait_for

ELASTIC = {"elastic.provider": "local", "elastic.min-taskmanagers": 1,
           "elastic.max-taskmanagers": 3, "elastic.idle-timeout": 2.0,
           "taskmanager.count": 1, "taskmanager.slots": 2}
pytestmark = [pytest.mark.integration, pytest.mark.cluster(ELASTIC)]
# Six subtasks of about 3 s each once their TaskManager's Spark is up: two fit the first
# TaskManager, the others wait for the TaskManagers started for them.
WIDE_JOB = ("import time\n"
            "def slow(x):\n"
            "    time.sleep(0.02)\n"
            "    return x * 2\n"
            "def build(env):\n"
            "    env.set_parallelism(6)\n"
            "    env.from_range(0, 900).map(slow).collect()\n")


class BusyTaskManagers:
    """Every TaskManager seen with a slot taken, from the retained overview."""

    def __init__(self, watcher: ClusterWatcher) -> None:
        self.seen: set[str] = set()
        self._lock = threading.Lock()
        watcher.client.service.subscribe(topics.CLUSTER_STATE, self._on_state)

    def _on_state(self, _topic: str, overview: object) -> None:
        if isinstance(overview, p.ClusterOverview):
            with self._lock:
                self.seen |= {t.id for t in overview.taskmanagers
                              if t.state is p.TaskManagerState.REGISTERED
                              and t.slots_free < t.slots_total}


def test_a_wide_job_gets_taskmanagers_started_that_go_once_idle(cluster, client, tmp_path
                                                                ) -> None:
    local, watcher = cluster
    assert watcher.registered() == ["taskmanager-1"]  # the minimum, started on demand
    busy = BusyTaskManagers(watcher)
    job = tmp_path / "wide.py"
    job.write_text(WIDE_JOB)
    job_id = client.submit(job, [])
    watcher.wait_registered(["taskmanager-1", "taskmanager-2", "taskmanager-3"], timeout=60)
    result = wait_result(client, job_id, timeout=300)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert sorted(collected_rows(result)) == [x * 2 for x in range(900)]
    assert len(busy.seen) >= 2, f"only {busy.seen} ran the job's subtasks"
    wait_for(lambda: len(watcher.registered()) == 1, 30,
             f"the extra TaskManagers stopped (registered: {watcher.registered()})")
    overview = watcher.latest
    stopped = [t for t in overview.taskmanagers if t.state is p.TaskManagerState.LOST]
    assert len(stopped) == 2
    assert all("stopped by the ResourceManager: idle for" in t.lost_cause for t in stopped)
    for info in stopped:
        wait_for(lambda name=info.id: local.supervisor.info(name).status
                 is ProcessStatus.STOPPED, 10, f"{info.id}'s process down")
    assert overview.elastic is not None and overview.elastic.failed_starts == 0


def test_a_streaming_job_wider_than_the_maximum_is_refused_at_once(client, tmp_path) -> None:
    job = tmp_path / "too_wide.py"
    job.write_text("def build(env):\n"
                   "    env.set_parallelism(7)\n"
                   "    env.enable_checkpointing(0.5)\n"
                   "    env.rate_source(100.0, 100).write_text('out')\n")
    asked = time.monotonic()
    with pytest.raises(RemoteError, match=r"needs 7 slots at once .* at most 6"):
        client.submit(job, [])
    assert time.monotonic() - asked < 10


def test_a_failing_taskmanager_command_is_retried_only_after_its_back_off() -> None:
    settings = {**ELASTIC, "taskmanager.count": 0, "elastic.provider": "command",
                "elastic.command": "echo 'ssh: connect to host {name}: Connection refused' "
                                   ">&2; exit 1",
                "elastic.start-backoff": 0.5, "elastic.max-start-backoff": 2.0}
    with running_cluster("auto", **settings) as (local, watcher):
        demands: list[tuple[float, p.TaskManagerDemand]] = []
        watcher.client.service.subscribe(
            topics.TASKMANAGER_DEMAND, lambda _t, d: demands.append((time.monotonic(), d)))
        wait_for(lambda: watcher.latest and watcher.latest.elastic
                 and watcher.latest.elastic.failed_starts >= 4, 30, "four failed starts")
        elastic = watcher.latest.elastic
        assert "Connection refused" in elastic.last_failure
        assert "exited with code 1 before it registered" in elastic.last_failure
        assert watcher.registered() == []
        failures = {}  # failed_starts -> when it was first seen
        for seen, demand in demands:
            failures.setdefault(demand.failed_starts, seen)
        gaps = [failures[n + 1] - failures[n] for n in range(1, 4) if n + 1 in failures]
        assert gaps and min(gaps) >= 0.4, f"no back-off between failed starts: {gaps}"
        spawned = sum(log.read_text().count("[supervisor] started pid")
                      for log in local.supervisor.info("taskmanager-1").log_path.parent
                      .glob("taskmanager-*.log"))
        assert spawned <= watcher.latest.elastic.failed_starts + 1
