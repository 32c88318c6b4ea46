"""The TaskExecutor's registration and heartbeats (core/taskmanager/registration.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.fencing import fencing_token
from clusterdeck.core.rpc import AskTimeoutError
from clusterdeck.core.taskmanager.registration import Registration
from tests.unit.core.taskmanager.helpers import FakeEndpoint

LEADER = p.LeaderInfo("resourcemanager", "dispatcher", "token-1", p.PROTOCOL_VERSION, 1, "h",
                      0.0)
ACK = p.AcknowledgeRegistration("reg-1", "resourcemanager", "rm-token", 1.0,
                                {"spark.sql.ansi.enabled": "true"})
CONFIG = Config({"registration.initial-backoff": 0.1, "registration.max-backoff": 0.4})


class Recorded:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.registered: list[Any] = []
        self.refused: list[str] = []


def registration(refusals: bool = False) -> tuple[Registration, FakeEndpoint, Recorded]:
    endpoint, seen = FakeEndpoint(), Recorded()
    return Registration(endpoint, CONFIG, "tm-1", "instance", None,
                        lambda: p.SlotReport(()), seen.failed.append, seen.registered.append,
                        seen.refused.append if refusals else None), endpoint, seen


def asks(endpoint: FakeEndpoint, name: str) -> list[tuple[str, Any, Any]]:
    return [call for call in endpoint.rpc_service.calls() if call[0] == name]


def test_it_registers_at_the_leader_and_hands_on_the_acknowledgement() -> None:
    registered, endpoint, seen = registration()
    registered.on_leader(LEADER)
    (_name, request, answer), = asks(endpoint, "register_task_manager")
    assert request.resource_id == "tm-1" and request.endpoint_id == endpoint.endpoint_id

    answer.set_result(ACK)
    endpoint.drain()

    assert registered.is_registered and seen.registered == [ACK] and seen.failed == []
    registered.heartbeat_round()
    (_name, heartbeat, _answer), = asks(endpoint, "heartbeat_from_task_manager")
    assert heartbeat.registration_id == "reg-1"


def test_an_unanswered_registration_is_tried_again_with_a_doubling_backoff() -> None:
    registered, endpoint, _ = registration()
    registered.on_leader(LEADER)
    delays = []
    for _ in range(4):
        asks(endpoint, "register_task_manager")[-1][2].set_exception(AskTimeoutError("x"))
        endpoint.drain()
        delays += endpoint.fire_timers()
    assert delays == [0.1, 0.2, 0.4, 0.4]
    assert len(asks(endpoint, "register_task_manager")) == 5


def test_a_refusal_is_handed_on_and_not_retried() -> None:
    registered, endpoint, seen = registration(refusals=True)
    registered.on_leader(LEADER)
    asks(endpoint, "register_task_manager")[0][2].set_result(p.RefuseRegistration("old"))
    endpoint.drain()
    assert seen.refused == ["old"] and endpoint.timers == []
    assert not registered.is_registered


def test_a_new_leader_fails_the_tasks_and_registers_there() -> None:
    registered, endpoint, seen = registration()
    registered.on_leader(LEADER)
    asks(endpoint, "register_task_manager")[0][2].set_result(ACK)
    endpoint.drain()
    registered.on_leader(LEADER)  # the same leader again: nothing happens
    assert seen.failed == []

    registered.on_leader(p.LeaderInfo("resourcemanager", "dispatcher", "token-2",
                                      p.PROTOCOL_VERSION, 2, "h", 1.0))

    assert seen.failed == ["their JobManager was replaced"]
    assert not registered.is_registered
    assert len(asks(endpoint, "register_task_manager")) == 2


def test_a_disconnect_fails_the_tasks_and_registers_again() -> None:
    registered, endpoint, seen = registration()
    registered.on_leader(LEADER)
    asks(endpoint, "register_task_manager")[0][2].set_result(ACK)
    endpoint.drain()

    registered.disconnected("declared lost")

    assert seen.failed == ["this TaskManager was declared lost"]
    assert len(asks(endpoint, "register_task_manager")) == 2


def test_the_disconnects_of_heartbeats_queued_during_a_cut_start_one_registration() -> None:
    registered, endpoint, seen = registration()
    registered.on_leader(LEADER)
    asks(endpoint, "register_task_manager")[0][2].set_result(ACK)
    endpoint.drain()

    for _ in range(20):
        registered.disconnected("not registered at this ResourceManager")

    assert seen.failed == ["this TaskManager was declared lost"]
    assert len(asks(endpoint, "register_task_manager")) == 2
    asks(endpoint, "register_task_manager")[1][2].set_result(ACK)
    endpoint.drain()
    assert registered.is_registered


def test_a_leader_record_of_an_older_epoch_is_refused_and_the_newer_leader_kept() -> None:
    registered, endpoint, seen = registration()
    newer = replace(LEADER, fencing_token=fencing_token(3), epoch=3, pid=3)
    registered.on_leader(newer)
    asks(endpoint, "register_task_manager")[0][2].set_result(ACK)
    endpoint.drain()
    registered.on_leader(replace(LEADER, fencing_token=fencing_token(2), epoch=2, pid=2))
    assert registered.leader is newer and registered.is_registered and seen.failed == []
    assert len(asks(endpoint, "register_task_manager")) == 1
    assert "refused" in str(registered.fence.admit(fencing_token(1), "a deployment"))
