"""The adversary suite: raw paho clients, one per login, against a real broker of each kind.

Every case checks delivery, never acks: a denied publish is still PUBACKed and a
forbidden subscribe still granted (or refused quietly). A case that amqtt 0.12.1 cannot
enforce is marked expected-to-leak on amqtt (strict: should amqtt start to enforce it,
the mark must go), so the list of those marks is the table of what does not hold there;
docs/security.md gives the same table. The last tests run a whole cluster.
"""

from __future__ import annotations

import contextlib
import queue
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from clusterdeck.broker.client import connect_and_wait, make_client
from clusterdeck.broker.credentials import ROLES, load
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import topics
from tests.integration.clusters import broker_kinds, running_cluster
from tests.integration.test_broker import CLUSTER, KINDS, RunningBroker, start_broker, stop

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LAYOUT = topics.layout(CLUSTER)
DELIVERY_TIMEOUT = 5.0
TASKMANAGER = "taskmanager-1"
CLIENT = "client-0123456789ab"


def rel(topic: str) -> str:
    return LAYOUT.absolute(topic)


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory) -> Iterator[RunningBroker]:
    running = start_broker(request.param, tmp_path_factory.mktemp(f"acl-{request.param}"))
    try:
        yield running
    finally:
        stop(running)


class Probe:
    """One raw paho client with a role's login and a chosen client id, recording what it
    is delivered (including what it never subscribed to: amqtt sends some of that)."""

    def __init__(self, broker: RunningBroker, role: str, service_id: str,
                 subscriptions: list[str] = (), will: tuple | None = None) -> None:
        self.messages: queue.Queue[tuple[str, bytes, bool]] = queue.Queue()
        self.seen: list[tuple[str, bytes, bool]] = []
        address = broker.address(role)
        self.client = make_client(address, LAYOUT.client_id(service_id), will=will)
        self.client.on_message = lambda c, u, m: self.messages.put((m.topic, m.payload, m.retain))
        connect_and_wait(self.client, address, DELIVERY_TIMEOUT)
        if subscriptions:
            acked = threading.Event()
            self.client.on_subscribe = lambda *_: acked.set()
            self.client.subscribe([(topic, 1) for topic in subscriptions])
            assert acked.wait(DELIVERY_TIMEOUT), "no SUBACK"

    def publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(
            DELIVERY_TIMEOUT)

    def wait_for(self, topic: str, payload: bytes | None = None,
                 timeout: float = DELIVERY_TIMEOUT) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            for seen_topic, seen_payload, _ in self.seen:
                if seen_topic == topic and payload in (None, seen_payload):
                    return seen_payload
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{topic} {payload!r} not delivered; got {self.seen}")
            with contextlib.suppress(queue.Empty):
                self.seen.append(self.messages.get(timeout=remaining))

    def got(self, payload: bytes) -> list[str]:
        return [topic for topic, seen, _ in self.seen if seen == payload]

    def drop(self) -> None:
        """Vanish without DISCONNECT, so the broker sends the will."""
        self.client.loop_stop()
        self.client.socket().close()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@contextlib.contextmanager
def probe(broker: RunningBroker, role: str, service_id: str,
          subscriptions: list[str] = (), will: tuple | None = None) -> Iterator[Probe]:
    client = Probe(broker, role, service_id, subscriptions, will)
    try:
        yield client
    finally:
        client.close()


def control_topic(role: str, service_id: str) -> str:
    """A topic ``role`` may read: how a test knows that what came before has arrived."""
    if role in ("taskmanager", "client"):
        return LAYOUT.reply(service_id)
    return rel(f"events/acl-control/{service_id}")


def settle(jobmanager: Probe, reader: Probe, control: str) -> None:
    """Two control messages in turn: whatever was published before them has been
    delivered to ``reader`` by the time the second arrives."""
    for _ in range(2):
        marker = uuid.uuid4().hex.encode()
        jobmanager.publish(control, marker)
        reader.wait_for(control, marker)


# -- the cases, from broker/acl.py's table ------------------------------------------------

AMQTT_HAS_NO_PATTERNS = ("amqtt has no %c patterns: the rule holds for the whole role "
                         "(reply/+, rpc/taskexecutor/+, heartbeat/taskexecutor/+)")
TAKEOVER = ("any login may connect with another process's client id; Mosquitto's %c "
            "patterns then match for it (no per-process binding of client ids)")


@dataclass(frozen=True)
class Case:
    role: str
    service_id: str
    topic: str            # concrete topic published
    subscription: str = ""  # filter subscribed (read cases); the topic itself when empty
    amqtt_leaks: str = ""
    mosquitto_leaks: str = ""

    def id(self) -> str:
        return f"{self.role}@{self.service_id}:{LAYOUT.relative(self.topic)}" + (
            f"<-{LAYOUT.relative(self.subscription)}" if self.subscription else "")


def params(cases: list[Case]) -> list:
    found = []
    for kind in KINDS:
        name = kind if isinstance(kind, str) else kind.values[0]
        kind_marks = () if isinstance(kind, str) else kind.marks
        for case in cases:
            leak = case.amqtt_leaks if name == "amqtt" else case.mosquitto_leaks
            marks = list(kind_marks)
            if leak:
                marks.append(pytest.mark.xfail(reason=leak, strict=True))
            found.append(pytest.param(name, case, marks=marks, id=f"{name}-{case.id()}"))
    return found


FORBIDDEN_PUBLISHES = [
    *[Case("taskmanager", TASKMANAGER, rel(topic)) for topic in (
        topics.LEADER, topics.CLUSTER_STATE, topics.job_state("j"), topics.job_result("j"),
        topics.CLUSTER_EVENTS, topics.job_events("j"))],
    Case("taskmanager", TASKMANAGER, LAYOUT.rpc("taskexecutor.taskmanager-2")),
    Case("taskmanager", TASKMANAGER, LAYOUT.heartbeat("taskexecutor.taskmanager-2")),
    Case("taskmanager", TASKMANAGER, LAYOUT.reply(CLIENT)),
    Case("taskmanager", TASKMANAGER, rel("elsewhere")),
    *[Case("client", CLIENT, topic) for topic in (
        LAYOUT.rpc("resourcemanager"), LAYOUT.heartbeat("resourcemanager"),
        LAYOUT.rpc("jobmaster.j"), LAYOUT.rpc("taskexecutor.taskmanager-1"),
        LAYOUT.reply("jobmanager"), LAYOUT.presence(CLIENT), rel(topics.LEADER),
        rel(topics.CLUSTER_EVENTS))],
    *[Case("observer", "observer-1", topic) for topic in (
        LAYOUT.rpc("dispatcher"), LAYOUT.rpc("resourcemanager"), LAYOUT.reply("jobmanager"),
        LAYOUT.presence("observer-1"), rel(topics.LEADER), rel(topics.CLUSTER_EVENTS))],
    # With a TaskManager's client id, the observer may still write nothing.
    Case("observer", TASKMANAGER, LAYOUT.presence(TASKMANAGER)),
]

FORBIDDEN_READS = [
    *[Case("taskmanager", TASKMANAGER, topic) for topic in (
        LAYOUT.rpc("dispatcher"), LAYOUT.rpc("resourcemanager"), LAYOUT.rpc("jobmaster.j"),
        LAYOUT.heartbeat("resourcemanager"), rel(topics.CLUSTER_EVENTS),
        rel(topics.job_events("j")), rel(topics.CLUSTER_STATE))],
    Case("taskmanager", TASKMANAGER, rel(topics.CLUSTER_STATE), rel("#")),
    Case("taskmanager", TASKMANAGER, LAYOUT.rpc("dispatcher"), rel("rpc/#")),
    *[Case("taskmanager", TASKMANAGER, topic, amqtt_leaks=AMQTT_HAS_NO_PATTERNS)
      for topic in (LAYOUT.reply("jobmanager"), LAYOUT.reply(CLIENT),
                    LAYOUT.rpc("taskexecutor.taskmanager-2"),
                    LAYOUT.heartbeat("taskexecutor.taskmanager-2"))],
    *[Case("client", CLIENT, topic) for topic in (
        LAYOUT.rpc("dispatcher"), LAYOUT.heartbeat("resourcemanager"),
        LAYOUT.rpc("taskexecutor.taskmanager-1"))],
    Case("client", CLIENT, LAYOUT.reply("jobmanager"), amqtt_leaks=AMQTT_HAS_NO_PATTERNS),
    Case("client", CLIENT, LAYOUT.rpc("dispatcher"), rel("#")),
    *[Case("observer", "observer-1", topic) for topic in (
        LAYOUT.rpc("dispatcher"), LAYOUT.reply("jobmanager"), LAYOUT.heartbeat("resourcemanager"),
        LAYOUT.rpc("taskexecutor.taskmanager-1"))],
    Case("observer", "observer-1", LAYOUT.rpc("dispatcher"), rel("#")),
    # A taken-over client id: the denials keep the observer and client out of a
    # TaskManager's topics; the TaskManager login itself cannot be kept out of others'.
    Case("observer", TASKMANAGER, LAYOUT.rpc("taskexecutor.taskmanager-1")),
    Case("observer", TASKMANAGER, LAYOUT.reply(TASKMANAGER)),
    Case("client", TASKMANAGER, LAYOUT.heartbeat("taskexecutor.taskmanager-1")),
    Case("taskmanager", "jobmanager", LAYOUT.reply("jobmanager"),
         amqtt_leaks=AMQTT_HAS_NO_PATTERNS, mosquitto_leaks=TAKEOVER),
]

ALLOWED_PUBLISHES = [
    *[Case("taskmanager", TASKMANAGER, topic) for topic in (
        LAYOUT.rpc("resourcemanager"), LAYOUT.heartbeat("resourcemanager"),
        LAYOUT.rpc("dispatcher"), LAYOUT.rpc("jobmaster.j"), LAYOUT.reply("jobmanager"),
        LAYOUT.presence(TASKMANAGER))],
    Case("client", CLIENT, LAYOUT.rpc("dispatcher")),
    *[Case("jobmanager", "jobmanager", topic) for topic in (
        rel(topics.LEADER), LAYOUT.rpc("taskexecutor.taskmanager-1"), LAYOUT.reply(CLIENT))],
]

ALLOWED_READS = [
    *[Case("taskmanager", TASKMANAGER, topic) for topic in (
        rel(topics.LEADER), rel(topics.presence("jobmanager")), LAYOUT.reply(TASKMANAGER),
        LAYOUT.rpc(f"taskexecutor.{TASKMANAGER}"),
        LAYOUT.heartbeat(f"taskexecutor.{TASKMANAGER}"))],
    *[Case(role, service_id, topic, subscription)
      for role, service_id in (("client", CLIENT), ("observer", "observer-1"))
      for topic, subscription in (
          (rel(topics.LEADER), rel(topics.LEADER)),
          (rel(topics.job_state("j")), rel(topics.JOB_STATES_ALL)),
          (rel(topics.job_events("j")), rel(topics.JOB_EVENTS_ALL)),
          (rel(topics.CLUSTER_EVENTS), rel("events/#")),
          (LAYOUT.presence(TASKMANAGER), rel(topics.PRESENCE_ALL)))],
    Case("client", CLIENT, LAYOUT.reply(CLIENT)),
    Case("jobmanager", "jobmanager", LAYOUT.rpc("dispatcher"), rel("#")),
]


# -- the tests ---------------------------------------------------------------------------

def check_publish(broker: RunningBroker, case: Case) -> bool:
    """Whether ``case.role`` publishing on ``case.topic`` reaches a subscriber."""
    payload = uuid.uuid4().hex.encode()
    control = rel("events/acl-control/watcher")
    with probe(broker, "jobmanager", "watcher", [case.topic, control]) as watcher, \
            probe(broker, "jobmanager", "jobmanager-control") as jobmanager, \
            probe(broker, case.role, case.service_id) as sender:
        sender.publish(case.topic, payload)
        settle(jobmanager, watcher, control)
        return bool(watcher.got(payload))


def check_read(broker: RunningBroker, case: Case) -> bool:
    """Whether ``case.role``, subscribed to ``case.subscription``, is delivered a message
    the jobmanager login publishes on ``case.topic``."""
    payload = uuid.uuid4().hex.encode()
    control = control_topic(case.role, case.service_id)
    with probe(broker, case.role, case.service_id,
               [case.subscription or case.topic, control]) as reader, \
            probe(broker, "jobmanager", "jobmanager-control") as jobmanager:
        jobmanager.publish(case.topic, payload)
        settle(jobmanager, reader, control)
        return bool(reader.got(payload))


@pytest.mark.parametrize(("broker", "case"), params(FORBIDDEN_PUBLISHES), indirect=["broker"])
def test_a_forbidden_publish_reaches_no_subscriber(broker, case):
    assert not check_publish(broker, case)


@pytest.mark.parametrize(("broker", "case"), params(FORBIDDEN_READS), indirect=["broker"])
def test_a_forbidden_subscription_delivers_nothing(broker, case):
    assert not check_read(broker, case)


@pytest.mark.parametrize(("broker", "case"), params(ALLOWED_PUBLISHES), indirect=["broker"])
def test_an_allowed_publish_is_delivered(broker, case):
    assert check_publish(broker, case)


@pytest.mark.parametrize(("broker", "case"), params(ALLOWED_READS), indirect=["broker"])
def test_an_allowed_subscription_is_delivered(broker, case):
    assert check_read(broker, case)


FORGERS = [Case(role, f"{role}-forger", rel(topics.LEADER))
           for role in ("taskmanager", "client", "observer")]


def current_leader(broker: RunningBroker) -> bytes:
    with probe(broker, "jobmanager", f"reader-{uuid.uuid4().hex[:6]}",
               [rel(topics.LEADER)]) as reader:
        return reader.wait_for(rel(topics.LEADER))


@pytest.mark.parametrize(("broker", "case"), params(FORGERS), indirect=["broker"])
def test_a_forged_retained_leader_is_not_kept(broker, case):
    original = f"leader-{uuid.uuid4().hex}".encode()
    with probe(broker, "jobmanager", "jobmanager") as jobmanager:
        jobmanager.publish(rel(topics.LEADER), original, retain=True)
        with probe(broker, case.role, case.service_id) as forger:
            forger.publish(rel(topics.LEADER), b"forged", retain=True)
        assert current_leader(broker) == original


AMQTT_WILLS = "amqtt 0.12.1 sends a last will without checking publish_acl"


@pytest.mark.parametrize(("broker", "case"), params(
    [Case(c.role, c.service_id, c.topic, amqtt_leaks=AMQTT_WILLS) for c in FORGERS]),
    indirect=["broker"])
def test_a_forged_leader_as_a_last_will_is_not_kept(broker, case):
    original = f"leader-{uuid.uuid4().hex}".encode()
    control = rel("events/acl-control/will")
    with probe(broker, "jobmanager", "jobmanager") as jobmanager, \
            probe(broker, "jobmanager", "will-watcher", [control, rel(topics.LEADER)]) as watcher:
        jobmanager.publish(rel(topics.LEADER), original, retain=True)
        watcher.wait_for(rel(topics.LEADER), original)
        forger = Probe(broker, case.role, case.service_id,
                       will=(rel(topics.LEADER), b"forged", 1, True))
        forger.drop()
        # A will follows the closed socket within milliseconds, in no order with other
        # clients' messages: give a will that should never come a second to show up.
        with contextlib.suppress(AssertionError):
            watcher.wait_for(rel(topics.LEADER), b"forged", timeout=1.0)
        settle(jobmanager, watcher, control)
        assert current_leader(broker) == original


AMQTT_RETAINED = ("amqtt 0.12.1 sends every new client the retained messages matching "
                  "anyone's subscription, without an ACL check")


@pytest.mark.parametrize(("broker", "case"), params(
    [Case("taskmanager", TASKMANAGER, rel(topics.job_state("j")), amqtt_leaks=AMQTT_RETAINED),
     Case("observer", "observer-1", LAYOUT.presence("x"))]), indirect=["broker"])
def test_retained_messages_reach_no_login_that_may_not_read_them(broker, case):
    """The observer may read presence: its case shows the test sees retained messages."""
    payload = uuid.uuid4().hex.encode()
    filters = [rel(topics.JOB_STATES_ALL), rel(topics.PRESENCE_ALL)]
    with probe(broker, "jobmanager", "jobmanager", filters) as jobmanager:
        jobmanager.publish(case.topic, payload, retain=True)
        jobmanager.wait_for(case.topic, payload)
        control = control_topic(case.role, case.service_id)
        subscriptions = [control] if case.role == "taskmanager" else [control, *filters]
        try:
            with probe(broker, case.role, case.service_id, subscriptions) as newcomer:
                settle(jobmanager, newcomer, control)
                delivered = bool(newcomer.got(payload))
        finally:
            jobmanager.publish(case.topic, b"", retain=True)
    assert delivered is (case.role == "observer")


@pytest.mark.parametrize("broker", KINDS, indirect=True)
def test_every_role_logs_in_with_the_password_file_clusterdeck_wrote(broker):
    """For Mosquitto the $7$ hashes are written in Python: a real login proves them."""
    for role in ROLES:
        with probe(broker, role, f"login-{role}"):
            pass


# -- a whole cluster ---------------------------------------------------------------------

@pytest.fixture(scope="module", params=broker_kinds())
def cluster(request):
    with running_cluster(request.param) as (local_cluster, watcher):
        yield local_cluster, watcher


def command_lines(pid: int) -> dict[int, str]:
    """``/proc/<pid>/cmdline`` of a process and all of its descendants."""
    found = {}
    with contextlib.suppress(psutil.NoSuchProcess):
        family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        for process in family:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                found[process.pid] = Path(f"/proc/{process.pid}/cmdline").read_bytes().decode(
                    errors="replace").replace("\0", " ")
    return found


def test_no_process_of_a_cluster_has_a_password_in_its_command_line(cluster):
    local_cluster, _ = cluster
    credentials = load(local_cluster.cluster_dir, local_cluster.cluster_id)
    pids = [info.pid for info in local_cluster.supervisor.processes() if info.pid]
    assert {info.name for info in local_cluster.supervisor.processes()} >= {
        "broker", "jobmanager", TASKMANAGER}
    lines = {pid: line for supervised in pids for pid, line in command_lines(supervised).items()}
    assert lines
    for _, password in credentials.items():
        assert not [line for line in lines.values() if password in line]


def test_the_cluster_keeps_its_logs_and_credentials_private(cluster):
    local_cluster, _ = cluster
    log_dir = paths.cluster_log_dir(local_cluster.cluster_id)
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    assert any(log_dir.glob("*.log"))
    assert stat.S_IMODE(local_cluster.cluster_dir.stat().st_mode) == 0o700
    for path in (local_cluster.cluster_dir / "broker").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path

