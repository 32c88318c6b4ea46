"""TaskManagers on other "machines" of a bridged network, cut off silently and healed
(issue 41).

The JobManager's machine is this one: its broker binds the bridge's address, with TLS
as beyond loopback it must. Each TaskManager runs in a network and a mount namespace of
its own (tests/integration/netns.py, namespaces.py) and joins with a file from
``clusterdeck credentials export --host <bridge address>``, as on another machine. A cut
drops every frame of a machine's link, with no answer of any kind. Real broker, real
processes, real Spark. The tests share one cluster and run in file order.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import AttemptSnapshot
from clusterdeck.core.protocol.states import ExecutionState
from tests.integration.clusters import FAST_HEARTBEATS, ClusterWatcher, running_cluster
from tests.integration.namespaces import (
    NamespacedTaskManager,
    namespaced_taskmanagers,
    wait_registered,
)
from tests.integration.netns import Machine, Network, bridged_machines

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
TASKMANAGER_CONFIG = {**FAST_HEARTBEATS, "taskmanager.slots": 2}
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 10,
            "restart-strategy.fixed-delay.delay": 0.2}

# Producers count; each consumer subtask waits for the gate file before it ends, so the
# test can cut a TaskManager while its consumers run and open the gate during the cut.
GATED_COUNT = '''
import os, time

def build(env):
    source, gate = env.args
    env.set_parallelism(4)
    env.set_job_name("gated count")

    def wait_for_gate(pair):
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        return pair

    (env.read_text(source).flat_map(lambda line: line.split())
        .map(lambda word: (word, 1)).key_by(0).sum(1)
        .map(wait_for_gate).collect())
'''


@dataclass
class Cluster:
    local: LocalCluster
    watcher: ClusterWatcher
    network: Network
    taskmanagers: list[NamespacedTaskManager]

    def machine_of(self, taskmanager: NamespacedTaskManager) -> Machine:
        return self.network.machines[self.taskmanagers.index(taskmanager)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two machines on a bridge, a TaskManager on each; the JobManager has none."""
    folder = tmp_path_factory.mktemp("bridged")
    with bridged_machines(2) as network, \
            running_cluster("auto", **{"taskmanager.count": 0,
                                       "broker.bind": network.gateway}) as (local, watcher), \
            namespaced_taskmanagers(
                local, 2, folder, TASKMANAGER_CONFIG, broker_host=network.gateway,
                networks=[m.enter for m in network.machines]) as taskmanagers:
        wait_registered(watcher, taskmanagers)
        yield Cluster(local, watcher, network, taskmanagers)


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[JobClient]:
    with JobClient(cluster.local.config, connect_timeout=30) as job_client:
        yield job_client


def words_file(folder: Path, lines: int = 2000) -> tuple[str, collections.Counter[str]]:
    """A file:// URL of a text of WORDS (any machine reads it: a shared mount), and its
    word counts."""
    path = folder / "words.txt"
    rows = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 9 + 1))
            for i in range(lines)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path.as_uri(), collections.Counter(word for row in rows for word in row.split())


def test_each_taskmanager_is_on_a_machine_of_its_own_and_a_cut_is_silent(
        cluster: Cluster) -> None:
    first, second = cluster.network.machines
    for machine, taskmanager in zip(cluster.network.machines, cluster.taskmanagers,
                                    strict=True):
        assert Path(f"/proc/{taskmanager.pid}/ns/net").readlink() != \
            Path("/proc/self/ns/net").readlink()
        assert f"data service at https://{machine.address}:" in taskmanager.log.read_text()
    probe = ["python3", "-c", "import socket, sys; "
             "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)",
             cluster.network.gateway, str(cluster.local.broker_address().port)]
    assert first.run(probe).returncode == 0
    first.cut()
    try:
        cut = first.run(probe)
        assert "timed out" in cut.stderr, cut.stderr  # no answer: neither RST nor ICMP
        assert second.run(probe).returncode == 0
    finally:
        first.heal()
    assert first.run(probe).returncode == 0


def _host(attempt: AttemptSnapshot) -> str:
    return attempt.slot.taskmanager_id if attempt.slot else ""


def _why(result: p.JobResult) -> str:
    cause = result.root_cause or {}
    return f"{cause.get('exception_type')}: {cause.get('message')}"


def _lost(watcher: ClusterWatcher, taskmanager_id: str) -> bool:
    info = watcher.taskmanager(taskmanager_id)
    return info is not None and info.state is p.TaskManagerState.LOST


def _consumers_at_the_gate(client: JobClient, job_id: str) -> dict[str, str] | None:
    """Once every producer finished and every consumer runs: consumer attempt -> its
    TaskManager; else None."""
    snapshot = client.snapshot(job_id, timeout=1.0)
    if snapshot is None:
        return None
    producer, consumer = snapshot.graph.vertices
    if any(s.state is not ExecutionState.FINISHED for s in producer.subtasks) or \
            any(s.state is not ExecutionState.RUNNING for s in consumer.subtasks):
        return None
    return {s.attempts[-1].attempt_id: _host(s.attempts[-1]) for s in consumer.subtasks}
