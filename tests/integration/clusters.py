"""A real local cluster for integration tests, and a watcher of its retained snapshot.

tests/integration/conftest.py starts one for each module that asks for the ``cluster``
fixture, with the settings of the module's ``cluster`` marker (the names below).
"""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from clusterdeck.core.client.jobclient import ClusterClient, JobClient
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from tests.waiting import wait_for

FAST_HEARTBEATS = {"heartbeat.interval": 0.2, "heartbeat.timeout": 1.5,
                   "registration.max-backoff": 0.5, "rpc.ask-timeout": 5.0,
                   "supervisor.restart-backoff": 0.1, "supervisor.shutdown-grace": 3.0,
                   "spark.start": "lazy"}
QUICK_RESTARTS = {"restart-strategy.fixed-delay.delay": 0.2}
# Spark up before the first job, and five quick restarts for the TaskManagers a test kills.
SPARK_UP_AND_RESTARTS = {"spark.start": "eager", **QUICK_RESTARTS,
                         "restart-strategy.fixed-delay.attempts": 5}


def broker_kinds() -> list:
    """Mosquitto where it is installed (the project's setup installs it), amqtt always."""
    mosquitto = pytest.param("mosquitto", marks=pytest.mark.skipif(
        not (shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin")),
        reason="mosquitto is not installed"))
    return [mosquitto, "amqtt"]


class ClusterWatcher:
    """Follows ``state/cluster`` as an observer would; tests wait on what it saw."""

    def __init__(self, config: Config) -> None:
        self.client = ClusterClient(config, connect_timeout=30)
        self.latest: p.ClusterOverview | None = None
        self.events: list[object] = []
        self._lock = threading.Lock()
        self.client.service.subscribe(topics.CLUSTER_STATE, self._on_state)
        self.client.service.subscribe(topics.CLUSTER_EVENTS, self._on_event)

    def _on_state(self, _topic: str, overview: object) -> None:
        if isinstance(overview, p.ClusterOverview):
            with self._lock:
                self.latest = overview

    def _on_event(self, _topic: str, event: object) -> None:
        with self._lock:
            self.events.append(event)

    def taskmanager(self, resource_id: str) -> p.TaskManagerInfo | None:
        overview = self.latest
        if overview is None:
            return None
        return next((t for t in overview.taskmanagers if t.id == resource_id), None)

    def registered(self) -> list[str]:
        overview = self.latest
        if overview is None:
            return []
        return sorted(t.id for t in overview.taskmanagers
                      if t.state is p.TaskManagerState.REGISTERED)

    def wait_registered(self, ids: list[str], timeout: float = 30.0) -> p.ClusterOverview:
        wait_for(lambda: self.latest is not None and set(ids) <= set(self.registered()),
                 timeout, f"{ids} registered (now: {self.registered()})")
        assert self.latest is not None
        return self.latest

    def close(self) -> None:
        self.client.close()


RunningCluster = tuple[LocalCluster, ClusterWatcher]


@contextmanager
def running_cluster(kind: str, **overrides: object) -> Iterator[RunningCluster]:
    """A cluster of two TaskManagers of two slots each, all of them registered; stopped
    (every process) when the block ends, also on a failure."""
    config = Config({"cluster.id": f"test-{kind}-{uuid.uuid4().hex[:6]}", "broker.kind": kind,
                     "taskmanager.count": 2, "taskmanager.slots": 2, **FAST_HEARTBEATS,
                     **overrides})
    cluster = LocalCluster(config)
    watcher = None
    try:
        cluster.start()
        watcher = ClusterWatcher(cluster.config)
        count = int(cluster.config["taskmanager.count"])
        watcher.wait_registered([f"taskmanager-{n}" for n in range(1, count + 1)],
                                timeout=60)
        yield cluster, watcher
    finally:
        if watcher is not None:
            watcher.close()
        cluster.stop()


def wait_result(client: JobClient, job_id: str, timeout: float = 300) -> p.JobResult:
    """The job's result; fails the test if the job has not ended within ``timeout``."""
    outcome: list[p.JobResult] = []
    waiter = threading.Thread(target=lambda: outcome.append(client.wait(job_id)), daemon=True)
    waiter.start()
    waiter.join(timeout)
    assert outcome, f"job {job_id} did not end within {timeout} s"
    return outcome[0]
