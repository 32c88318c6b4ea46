"""A real local cluster: broker, JobManager and TaskManagers as OS processes, on each broker.

One cluster per broker kind serves the whole module; a test that disturbs it waits until
the cluster is whole again before it ends.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.node.service import broker_address, connect_service
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.gateways import ResourceManagerGateway
from tests.integration.clusters import broker_kinds, running_cluster
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
BOTH = ["taskmanager-1", "taskmanager-2"]


@pytest.fixture(scope="module", params=broker_kinds())
def cluster(request):
    with running_cluster(request.param) as (local_cluster, watcher):
        yield local_cluster, watcher


def registration(cluster_id: str, resource_id: str, instance_id: str) -> p.RegisterTaskManager:
    return p.RegisterTaskManager(
        cluster_id=cluster_id, protocol_version=p.PROTOCOL_VERSION, resource_id=resource_id,
        instance_id=instance_id, endpoint_id=f"taskexecutor.{resource_id}",
        host=socket.gethostname(), pid=os.getpid(),
        slot_report=p.SlotReport((p.SlotStatus(0),)))


PROBE = "taskmanager-60"  # a TaskManager login of the pool that no process of the cluster uses


@pytest.fixture(scope="module")
def as_taskmanager(cluster):
    """A service with a TaskManager's own login: only TaskManagers (and the JobManager)
    may ask the ResourceManager, each for itself."""
    local_cluster, watcher = cluster
    config = local_cluster.config
    service = connect_service(config, "taskmanager", PROBE,
                              broker_address(config, "taskmanager", None, PROBE),
                              with_presence=False)
    try:
        yield service, watcher.client.leader(10)
    finally:
        service.close()


def resource_manager(as_taskmanager) -> ResourceManagerGateway:
    service, leader = as_taskmanager
    return service.gateway(ResourceManagerGateway, leader.resource_manager)


def pid_of(local_cluster, name: str) -> int:
    pid = local_cluster.supervisor.info(name).pid
    assert pid is not None, f"{name} is not running"
    return pid


def test_up_with_two_taskmanagers_of_two_slots_reaches_four_free_slots(cluster) -> None:
    _, watcher = cluster
    overview = watcher.wait_registered(BOTH)
    wait_for(lambda: watcher.latest.slots_free == 4, 10, "4 free slots")
    assert watcher.latest.slots_total == 4
    assert {t.slots_total for t in overview.taskmanagers if t.id in BOTH} == {2}


def test_the_same_taskmanager_registering_twice_gets_already_registered(
        cluster, as_taskmanager) -> None:
    local_cluster, watcher = cluster
    probe = PROBE
    request = registration(local_cluster.cluster_id, probe, uuid.uuid4().hex)
    gateway = resource_manager(as_taskmanager)
    first = gateway.register_task_manager(request).result(10)
    second = gateway.register_task_manager(request).result(10)
    assert isinstance(first, p.AcknowledgeRegistration)
    assert isinstance(second, p.AlreadyRegistered)
    assert second.registration_id == first.registration_id
    # The probe never heartbeats: it must be lost, and leave the pool as it came.
    wait_for(lambda: (t := watcher.taskmanager(probe)) and t.state is p.TaskManagerState.LOST,
             1.5 + 0.2 + 3, "the silent probe lost")


def test_a_wrong_cluster_id_is_refused(as_taskmanager) -> None:
    answer = resource_manager(as_taskmanager).register_task_manager(
        registration("some-other-cluster", PROBE, "x")).result(10)
    assert isinstance(answer, p.RefuseRegistration)
    assert "wrong cluster id" in answer.reason


def test_an_incompatible_protocol_version_is_refused(cluster, as_taskmanager) -> None:
    local_cluster, _ = cluster
    request = registration(local_cluster.cluster_id, PROBE, "x")
    request = p.RegisterTaskManager(**{**request.__dict__, "protocol_version": 99})
    answer = resource_manager(as_taskmanager).register_task_manager(request).result(10)
    assert isinstance(answer, p.RefuseRegistration)
    assert "protocol version 99" in answer.reason


def test_a_killed_taskmanager_is_noticed_and_its_slots_leave_the_pool(cluster) -> None:
    local_cluster, watcher = cluster
    watcher.wait_registered(BOTH)
    killed_at = time.monotonic()
    os.kill(pid_of(local_cluster, "taskmanager-1"), signal.SIGKILL)
    lost = wait_for(lambda: (t := watcher.taskmanager("taskmanager-1"))
                    and t.state is p.TaskManagerState.LOST and t, 5, "taskmanager-1 lost")
    assert time.monotonic() - killed_at < 2.0
    assert "taskmanager-1" in lost.lost_cause
    assert any(isinstance(e, p.TaskManagerLost) and e.detected_by == "last will"
               for e in watcher.events)
    assert watcher.latest.slots_total == 2
    watcher.wait_registered(BOTH)  # the supervisor restarts it and it registers again


def test_a_hung_taskmanager_is_lost_after_the_heartbeat_timeout_and_returns(cluster) -> None:
    local_cluster, watcher = cluster
    watcher.wait_registered(BOTH)
    pid = pid_of(local_cluster, "taskmanager-2")
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: (t := watcher.taskmanager("taskmanager-2"))
                 and t.state is p.TaskManagerState.LOST, 1.5 + 0.2 + 3, "taskmanager-2 lost")
        assert "no heartbeat" in watcher.taskmanager("taskmanager-2").lost_cause
    finally:
        os.kill(pid, signal.SIGCONT)
    watcher.wait_registered(BOTH)
    assert watcher.taskmanager("taskmanager-2").pid == pid  # the same process came back


def test_a_killed_jobmanager_is_restarted_and_both_taskmanagers_register_again(cluster) -> None:
    local_cluster, watcher = cluster
    watcher.wait_registered(BOTH)
    old_pid = pid_of(local_cluster, "jobmanager")
    old_token = watcher.client.leader(5).fencing_token
    os.kill(old_pid, signal.SIGKILL)
    wait_for(lambda: watcher.latest.jobmanager_pid != old_pid
             and set(BOTH) <= set(watcher.registered()), 30,
             "a new JobManager with both TaskManagers registered")
    assert watcher.latest.fencing_token != old_token


def test_a_killed_broker_is_restarted_and_everyone_reconnects(cluster) -> None:
    local_cluster, watcher = cluster
    watcher.wait_registered(BOTH)
    old_pid = pid_of(local_cluster, "broker")
    os.kill(old_pid, signal.SIGKILL)
    wait_for(lambda: local_cluster.supervisor.info("broker").pid not in (None, old_pid), 15,
             "the broker restarted")
    killed_at = time.time()
    wait_for(lambda: watcher.latest.taken_at > killed_at
             and set(BOTH) <= set(watcher.registered()), 30,
             "a fresh snapshot with both TaskManagers registered")
    # Asks reach the JobManager again. Under load a TaskManager may miss heartbeats while
    # everyone reconnects and be lost and registered again: wait for the ask's view too.
    wait_for(lambda: {t.id for t in watcher.client.cluster_overview(timeout=10).taskmanagers
                      if t.state is p.TaskManagerState.REGISTERED} >= set(BOTH), 30,
             "both TaskManagers registered in the JobManager's answer")


def test_a_tap_sees_the_control_plane_and_answers_nothing(cluster) -> None:
    """With the observer login, as the desktop app's messages view: it reads the whole
    control plane and writes nothing; a client login beside it still asks."""
    local_cluster, watcher = cluster
    seen = []
    with JobClient(local_cluster.config, connect_timeout=30) as tapping:
        tapping.tap(seen.append)
        wait_for(lambda: any(t.type_name == "TaskManagerHeartbeat" for t in seen), 10,
                 "a heartbeat seen by the tap")
        heartbeat = next(t for t in seen if t.type_name == "TaskManagerHeartbeat")
        assert heartbeat.receiver == "resourcemanager" and heartbeat.size > 0
        overview = tapping.cluster_overview(timeout=10)  # asks still reach their endpoint
        assert overview.cluster_id == watcher.latest.cluster_id
        wait_for(lambda: any(t.type_name == "RequestClusterOverview" for t in seen), 5,
                 "the ask seen by the tap")
        asks = [t for t in seen if t.type_name == "RequestClusterOverview"]
        assert asks[0].receiver == "dispatcher"
        wait_for(lambda: any(t.channel == "reply" and t.receiver == tapping.service.service_id
                             for t in seen), 5, "the answer seen by the tap")
        executor = "taskexecutor.taskmanager-1"
        wait_for(lambda: any(t.receiver == executor and t.channel == "heartbeat"
                             for t in seen), 10, f"a heartbeat to {executor}")
