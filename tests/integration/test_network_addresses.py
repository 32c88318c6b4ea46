"""What a TaskManager tells other machines about itself (issue 41): the address of its
data service, and its host, which decides who reads the JobManager's local files.

The broker listens on every interface of this machine, as docs/distributed.md says to
set it; a TaskManager of this machine (under the cluster's supervisor) reaches it on
loopback, and one on another machine of the bridge (tests/integration/netns.py) at the
bridge's address. The broker speaks plain MQTT here: its certificate for a wildcard bind
names the addresses this machine's host name resolves to, which are not the bridge's.
The namespaced TaskManager has the same host name as this machine.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.config import paths
from clusterdeck.core.protocol.snapshots import AttemptSnapshot
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import FAST_HEARTBEATS, running_cluster, wait_result
from tests.integration.namespaces import (
    NamespacedTaskManager,
    namespaced_taskmanagers,
    wait_registered,
)
from tests.integration.netns import Machine, bridged_machines
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(360)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
SETTINGS = {"taskmanager.count": 1, "broker.bind": "0.0.0.0", "broker.tls": "off",
            "spark.start": "eager"}


@dataclass
class Cluster:
    local: LocalCluster
    machine: Machine
    elsewhere: NamespacedTaskManager

    def log_of_local_taskmanager(self) -> str:
        log = paths.cluster_log_dir(self.local.cluster_id) / "taskmanager-1.log"
        return log.read_text(errors="replace")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("addresses")
    with bridged_machines(1) as network, \
            running_cluster("auto", **SETTINGS) as (local, watcher), \
            namespaced_taskmanagers(
                local, 1, folder, {**FAST_HEARTBEATS, "taskmanager.slots": 2,
                                   "spark.start": "eager"},
                broker_host=network.gateway,
                networks=[network.machines[0].enter]) as (elsewhere,):
        wait_registered(watcher, [elsewhere])
        cluster = Cluster(local, network.machines[0], elsewhere)
        wait_for(lambda: "SparkSession started" in elsewhere.log.read_text()
                 and "SparkSession started" in cluster.log_of_local_taskmanager(), 180,
                 "Spark up on both TaskManagers")
        yield cluster


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[JobClient]:
    with JobClient(cluster.local.config, connect_timeout=30) as job_client:
        yield job_client


def test_a_taskmanager_beside_a_broker_on_every_interface_announces_a_reachable_address(
        cluster: Cluster) -> None:
    announced = re.search(r"data service at (\w+)://([^:/]+):(\d+)",
                          cluster.log_of_local_taskmanager())
    assert announced is not None
    scheme, host, port = announced.groups()
    assert (scheme, host) != ("http", "127.0.0.1")
    assert not host.startswith("127.")
    probe = cluster.machine.run([
        "python3", "-c", "import socket, sys; "
        "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)", host, port])
    assert probe.returncode == 0, probe.stderr


def test_local_files_are_read_only_where_the_jobmanagers_files_are(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """The namespaced TaskManager has this machine's host name, and even sees the input
    (pytest's folder is not hidden from it), but not this machine's mounts: the input's
    splits go to the TaskManager beside the JobManager only. Its consumers fetch their
    partitions from that TaskManager's data service, and the count is exact."""
    path = tmp_path / "words.txt"
    rows = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 9 + 1))
            for i in range(2000)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    job_id = client.submit(EXAMPLES / "wordcount.py", [str(path), "4"])
    result = wait_result(client, job_id, 180)
    assert result.status is JobStatus.FINISHED, result.root_cause
    expected = collections.Counter(word for row in rows for word in row.split())
    assert {word: count for word, count in collected_rows(result)} == dict(expected)
    assert client.failure_history(job_id) == []
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    source = next(v for v in snapshot.graph.vertices if v.is_source)
    took = {_host(a): a.input_splits for s in source.subtasks for a in s.attempts}
    assert took.get(cluster.elsewhere.id, ()) == (), took
    ran_elsewhere = [s for v in snapshot.graph.vertices if not v.is_source
                     for s in v.subtasks if _host(s.attempts[-1]) == cluster.elsewhere.id]
    assert ran_elsewhere, "no consumer ran on the other machine"


def _host(attempt: AttemptSnapshot) -> str:
    return attempt.slot.taskmanager_id if attempt.slot else ""
