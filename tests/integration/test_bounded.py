"""Bounded by design, on a real cluster: a job store of thousands of ended jobs and a
thousand TaskManager registrations leave the JobManager answering, with every message
inside rpc.framesize.

The store is filled before the JobManager starts with small synthetic records written as
the store writes them; the registrations are raw RegisterTaskManager asks from this test,
under the TaskManager login, of TaskManagers that never heartbeat.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from clusterdeck.broker.client import connect_and_wait, make_client
from clusterdeck.core.client.jobclient import ClusterClient
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager.jobstore import RECORD, JobRecord
from clusterdeck.core.node.service import broker_address
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, JobVertex, OperatorSpec
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import Envelope, decode, encode, to_data
from tests.integration.clusters import running_cluster
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
STORED, KEPT, PROBES, MAX_TASKMANAGERS, MAX_LOST = 3000, 2000, 1000, 300, 64
FRAME = 256 * 1024
GRAPH = JobGraph("synthetic", JobKind.DATAFLOW, (JobVertex("v", "v", 1, (
    OperatorSpec("op-1", "source.range", "range"),)),))


def prefill(cluster_id: str, count: int) -> None:
    """Ended jobs of the last hour, oldest first, each with a work dir and an attempt log."""
    store = paths.cluster_dir(cluster_id) / "jobs"
    work = paths.cluster_dir(cluster_id) / "work"
    logs = paths.cluster_log_dir(cluster_id) / "attempts"
    logs.mkdir(parents=True)
    started = time.time() - 3600.0
    for i in range(count):
        job_id = f"{i:016x}"
        record = JobRecord(job_id, GRAPH, "sha", submitted_at=started + i,
                           status=JobStatus.FINISHED,
                           result=p.JobResult(job_id, "synthetic", JobStatus.FINISHED,
                                              duration=0.5, finished=1, total=1))
        (store / job_id).mkdir(parents=True)
        (store / job_id / RECORD).write_text(json.dumps(to_data(record)))
        (work / job_id / "collect").mkdir(parents=True)
        (logs / f"{job_id}_v-0_a0.log").write_text("a line\n")


class JobListWatcher:
    """Follows the retained state/joblist as the desktop app does."""

    def __init__(self, client: ClusterClient) -> None:
        self.latest: p.JobList | None = None
        self._lock = threading.Lock()
        client.service.subscribe(topics.JOB_LIST, self._on_list)

    def _on_list(self, _topic: str, message: object) -> None:
        if isinstance(message, p.JobList):
            with self._lock:
                self.latest = message


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple]:
    cluster_id = f"test-bounded-{uuid.uuid4().hex[:6]}"
    prefill(cluster_id, STORED)
    with running_cluster("auto", **{
            "cluster.id": cluster_id, "jobstore.retention.max-jobs": KEPT,
            "resourcemanager.max-taskmanagers": MAX_TASKMANAGERS,
            "resourcemanager.max-lost-taskmanagers": MAX_LOST}) as running:
        yield running


def test_retention_trims_the_store_to_its_limit_with_each_jobs_files(cluster) -> None:
    local_cluster, _ = cluster
    cluster_dir = paths.cluster_dir(local_cluster.cluster_id)
    logs = paths.cluster_log_dir(local_cluster.cluster_id) / "attempts"
    kept = {f"{i:016x}" for i in range(STORED - KEPT, STORED)}
    wait_for(lambda: {d.name for d in (cluster_dir / "jobs").iterdir()} == kept, 60,
             f"the job store trimmed to the newest {KEPT} jobs")
    wait_for(lambda: {d.name for d in (cluster_dir / "work").iterdir()} == kept, 30,
             "the deleted jobs' work dirs gone")
    wait_for(lambda: {f.name.split("_")[0] for f in logs.iterdir()} == kept, 30,
             "the deleted jobs' attempt logs gone")


def test_list_pages_through_every_kept_job_and_the_retained_list_fits(cluster, client) -> None:
    watcher = JobListWatcher(client)
    wait_for(lambda: watcher.latest and watcher.latest.total == KEPT, 60,
             f"a retained job list of {KEPT} jobs")
    assert watcher.latest is not None
    assert 0 < len(watcher.latest.jobs) <= 100  # jobmanager.job-list.retained
    listing = client.all_jobs()
    assert listing.total == KEPT
    assert [s.job_id for s in listing.jobs] == [f"{i:016x}" for i in reversed(
        range(STORED - KEPT, STORED))]
    first = client.jobs()
    assert 100 < len(first.jobs) < KEPT  # one message holds only a part of them


def test_the_list_command_prints_all_jobs_or_the_newest(cluster) -> None:
    local_cluster, _ = cluster

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "clusterdeck.core.cli", "list",
                               "--cluster", local_cluster.cluster_id, *args],
                              capture_output=True, text=True, timeout=120)
    every = run("--json")
    assert every.returncode == 0, every.stderr
    assert len(json.loads(every.stdout)) == KEPT
    newest = run("--limit", "5")
    assert newest.returncode == 0, newest.stderr
    assert f"the newest 5 of {KEPT} jobs" in newest.stderr
    assert newest.stdout.splitlines()[-1].startswith(f"{STORED - 1:016x}")


def registration(cluster_id: str, resource_id: str) -> p.RegisterTaskManager:
    return p.RegisterTaskManager(
        cluster_id=cluster_id, protocol_version=p.PROTOCOL_VERSION, resource_id=resource_id,
        instance_id=uuid.uuid4().hex, endpoint_id=f"taskexecutor.{resource_id}",
        host=socket.gethostname(), pid=os.getpid(),
        slot_report=p.SlotReport((p.SlotStatus(0), p.SlotStatus(1))))


def register_probes(config: Config, count: int) -> list[object]:
    """``count`` RegisterTaskManager asks at once, each from a TaskManager of its own,
    each answered or refused. A TaskManager login registers only itself (test_acl.py), so
    they are sent with the jobmanager login, the only one that may publish under any
    identity: what an external broker without ACLs would let anyone send."""
    cluster_id = config["cluster.id"]
    layout = topics.layout(cluster_id)
    framesize = config["rpc.framesize"]
    address = broker_address(config, "jobmanager")
    answers: dict[str, object] = {}
    asked = {uuid.uuid4().hex for _ in range(count)}
    everything = threading.Event()

    def on_message(_client, _userdata, message) -> None:  # every reply of the cluster
        envelope = decode(message.payload, framesize)
        if envelope.correlation_id in asked:
            answers[envelope.correlation_id] = envelope.message or envelope.error
        if len(answers) >= count:
            everything.set()

    prober = make_client(address, f"prober-{uuid.uuid4().hex}")
    prober.on_message = on_message
    connect_and_wait(prober, address, 30)
    try:
        subscribed = threading.Event()
        prober.on_subscribe = lambda *_: subscribed.set()
        prober.subscribe(layout.absolute("reply/+/+"), qos=1)
        assert subscribed.wait(30), "no SUBACK"
        for i, correlation_id in enumerate(asked):
            probe = f"probe-{i:04d}-{uuid.uuid4().hex[:8]}"
            envelope = Envelope("ask", probe, registration(cluster_id, probe),
                                correlation_id=correlation_id, reply_to=probe)
            prober.publish(layout.rpc("resourcemanager", probe), encode(envelope, framesize),
                           qos=1)
        assert everything.wait(120), f"{len(answers)} of {count} registrations answered"
    finally:
        prober.disconnect()
        prober.loop_stop()
    return list(answers.values())


def test_a_thousand_registrations_are_bounded_and_the_overview_keeps_coming(cluster) -> None:
    local_cluster, watcher = cluster
    answers = register_probes(local_cluster.config, PROBES)
    accepted = [a for a in answers if isinstance(a, p.AcknowledgeRegistration)]
    refused = [a for a in answers if isinstance(a, p.RefuseRegistration)]
    assert len(accepted) + len(refused) == PROBES
    assert 0 < len(accepted) <= MAX_TASKMANAGERS - 2  # the two real ones hold their places
    assert all("resourcemanager.max-taskmanagers" in r.reason for r in refused)
    # The probes never heartbeat: they are lost, then all but the latest few forgotten.
    wait_for(lambda: (o := watcher.latest) is not None and not any(
        t.id.startswith("probe-") and t.state is p.TaskManagerState.REGISTERED
        for t in o.taskmanagers), 60, "every probe lost")
    overview = watcher.latest
    assert overview is not None
    assert sum(t.state is p.TaskManagerState.LOST for t in overview.taskmanagers) <= MAX_LOST
    assert watcher.registered() == ["taskmanager-1", "taskmanager-2"]
    # The heartbeat round goes on: overviews keep coming, and the real TaskManagers live.
    seen = overview.taken_at
    wait_for(lambda: watcher.latest is not None and watcher.latest.taken_at > seen + 1.0, 10,
             "the overview published again")
    assert watcher.registered() == ["taskmanager-1", "taskmanager-2"]
    assert watcher.latest.slots_total == 4
