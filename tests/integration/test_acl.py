"""The adversary suite: raw paho clients, one per login, against a real broker of each kind.

Every case checks delivery, never acks: a denied publish is still PUBACKed and a
forbidden subscribe still granted (or refused quietly). Both brokers enforce the same
table (Mosquitto its acl_file, amqtt our plugin): a case that holds on neither is marked
expected-to-leak (strict: should it start to hold, the mark must go); docs/security.md
lists the same. The last tests run a whole cluster.
"""

from __future__ import annotations

import contextlib
import queue
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

from clusterdeck.broker.client import BrokerConnectError, connect_and_wait, make_client
from clusterdeck.broker.credentials import load
from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.sparkwork import SparkWork
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.rpc import Envelope, encode
from tests.integration.clusters import broker_kinds, running_cluster, wait_result
from tests.integration.impostor import DELIVERY_TIMEOUT, Impostor
from tests.integration.test_broker import CLUSTER, KINDS, RunningBroker, start_broker, stop
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
T = TypeVar("T")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

LAYOUT = topics.layout(CLUSTER)
TASKMANAGER, OTHER_TASKMANAGER = "taskmanager-1", "taskmanager-2"
CLIENT = "client-0123456789abcdef0123456789abcdef"
OTHER_CLIENT = "client-" + "f" * 32


def rel(topic: str) -> str:
    return LAYOUT.absolute(topic)


def role_of(identity: str) -> str:
    return identity if identity in ("jobmanager", "client", "observer") else "taskmanager"


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory) -> Iterator[RunningBroker]:
    running = start_broker(request.param, tmp_path_factory.mktemp(f"acl-{request.param}"))
    try:
        yield running
    finally:
        stop(running)


class Probe:
    """One raw paho client with the login of ``identity`` (a role, or a TaskManager's
    own) under a chosen client id, recording what it is delivered (including what it never
    subscribed to)."""

    def __init__(self, broker: RunningBroker, identity: str, client: str,
                 subscriptions: list[str] = (), will: tuple | None = None) -> None:
        self.messages: queue.Queue[tuple[str, bytes, bool]] = queue.Queue()
        self.seen: list[tuple[str, bytes, bool]] = []
        role = role_of(identity)
        address = broker.address(role, identity if role == "taskmanager" else None)
        self.client = make_client(address, LAYOUT.client_id(client), will=will)
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
def probe(broker: RunningBroker, identity: str, client: str,
          subscriptions: list[str] = (), will: tuple | None = None) -> Iterator[Probe]:
    connected = Probe(broker, identity, client, subscriptions, will)
    try:
        yield connected
    finally:
        connected.close()


def control_topic(identity: str) -> str:
    """A topic ``identity`` may read: how a test knows that what came before has arrived."""
    if role_of(identity) == "taskmanager":
        return LAYOUT.reply(identity, "jobmanager")
    return rel(f"events/acl-control/{uuid.uuid4().hex[:8]}")


def settle(jobmanager: Probe, reader: Probe, control: str) -> None:
    """Two control messages in turn: whatever was published before them has been
    delivered to ``reader`` by the time the second arrives."""
    for _ in range(2):
        marker = uuid.uuid4().hex.encode()
        jobmanager.publish(control, marker)
        reader.wait_for(control, marker)


# -- the cases, from broker/acl.py's table ------------------------------------------------

SHARED_LOGIN = ("the clients of one login are told apart only by their client ids, which "
                "are unguessable: who knows another client's id may read its answers")


@dataclass(frozen=True)
class Case:
    identity: str         # whose login: a role, or a TaskManager's own
    topic: str            # concrete topic published
    subscription: str = ""  # filter subscribed (read cases); the topic itself when empty
    client: str = ""      # the client id's service part; the identity's own when empty
    leaks: str = ""       # a known hole on both brokers (strict xfail)

    @property
    def client_name(self) -> str:
        return self.client or (CLIENT if self.identity == "client" else self.identity)

    def id(self) -> str:
        return f"{self.identity}@{self.client_name}:{LAYOUT.relative(self.topic)}" + (
            f"<-{LAYOUT.relative(self.subscription)}" if self.subscription else "")


def own(name: str) -> str:
    """A client name no earlier test used: the broker is shared by the module's tests, and
    amqtt 0.12 may end a new connection under a name whose old one it is still closing."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def params(cases: list[Case]) -> list:
    """The cases as parameters; the broker is a parameter of its own, so that pytest runs
    every case of one broker kind against one module-wide broker (a parameter set naming
    both would start a broker per case)."""
    return [pytest.param(case, id=case.id(), marks=[pytest.mark.xfail(
        reason=case.leaks, strict=True)] if case.leaks else []) for case in cases]


def per_broker(cases: list[Case]) -> Callable[[T], T]:
    def both(test: T) -> T:
        test = pytest.mark.parametrize("broker", KINDS, indirect=True)(test)
        return pytest.mark.parametrize("case", params(cases))(test)
    return both


TM, JM = TASKMANAGER, "jobmanager"
FORBIDDEN_PUBLISHES = [
    *[Case(TM, rel(topic)) for topic in (
        topics.LEADER, topics.CLUSTER_STATE, topics.job_state("j"), topics.job_result("j"),
        topics.CLUSTER_EVENTS, topics.job_events("j"), topics.job_output("j"), "elsewhere")],
    # a script's output reaches the submitter only through its JobMaster, which checks it
    Case("client", rel(topics.job_output("j"))),
    Case(TM, LAYOUT.rpc("taskexecutor.taskmanager-2", TM)),
    Case(TM, LAYOUT.heartbeat("taskexecutor.taskmanager-2", TM)),
    Case(TM, LAYOUT.reply(CLIENT, TM)),
    # speaking as another: the last level is the sender, bound to the login
    Case(TM, LAYOUT.rpc("resourcemanager", OTHER_TASKMANAGER)),
    Case(TM, LAYOUT.heartbeat("resourcemanager", OTHER_TASKMANAGER)),
    Case(TM, LAYOUT.rpc("jobmaster.j", OTHER_TASKMANAGER)),
    Case(TM, LAYOUT.reply(JM, OTHER_TASKMANAGER)),
    Case(TM, LAYOUT.rpc("dispatcher", "client")),
    Case(TM, LAYOUT.rpc("taskexecutor.taskmanager-2", JM)),
    Case(TM, LAYOUT.presence(OTHER_TASKMANAGER)),
    Case(TM, LAYOUT.presence(JM)),
    *[Case("client", topic) for topic in (
        LAYOUT.rpc("resourcemanager", "client"), LAYOUT.heartbeat("resourcemanager", "client"),
        LAYOUT.rpc("jobmaster.j", "client"), LAYOUT.rpc("taskexecutor.taskmanager-1", "client"),
        LAYOUT.reply(JM, "client"), LAYOUT.presence(CLIENT), rel(topics.LEADER),
        rel(topics.CLUSTER_EVENTS), LAYOUT.rpc("dispatcher", TM),
        LAYOUT.rpc("dispatcher", JM), LAYOUT.reply(OTHER_CLIENT, JM))],
    *[Case("observer", topic) for topic in (
        LAYOUT.rpc("dispatcher", "observer"), LAYOUT.rpc("dispatcher", "client"),
        LAYOUT.rpc("resourcemanager", "observer"), LAYOUT.reply(JM, "observer"),
        LAYOUT.presence("observer"), rel(topics.LEADER), rel(topics.CLUSTER_EVENTS))],
    # Under a TaskManager's client id, the observer may still write nothing.
    Case("observer", LAYOUT.presence(TM), client=TM),
]

FORBIDDEN_READS = [
    *[Case(TM, topic) for topic in (
        LAYOUT.rpc("dispatcher", "client"), LAYOUT.rpc("resourcemanager", OTHER_TASKMANAGER),
        LAYOUT.rpc("jobmaster.j", OTHER_TASKMANAGER),
        LAYOUT.heartbeat("resourcemanager", OTHER_TASKMANAGER), rel(topics.CLUSTER_EVENTS),
        rel(topics.job_events("j")), rel(topics.job_output("j")), rel(topics.CLUSTER_STATE),
        LAYOUT.reply(JM, OTHER_TASKMANAGER), LAYOUT.reply(CLIENT, JM),
        LAYOUT.reply(OTHER_TASKMANAGER, JM),
        LAYOUT.rpc("taskexecutor.taskmanager-2", JM),
        LAYOUT.heartbeat("taskexecutor.taskmanager-2", JM))],
    Case(TM, rel(topics.CLUSTER_STATE), rel("#")),
    Case(TM, LAYOUT.rpc("dispatcher", "client"), rel("rpc/#")),
    Case(TM, LAYOUT.reply(CLIENT, JM), rel("reply/#")),
    *[Case("client", topic) for topic in (
        LAYOUT.rpc("dispatcher", "client"), LAYOUT.heartbeat("resourcemanager", TM),
        LAYOUT.rpc("taskexecutor.taskmanager-1", JM), LAYOUT.reply(JM, TM),
        LAYOUT.reply(TM, JM), LAYOUT.reply(OTHER_CLIENT, JM))],
    Case("client", LAYOUT.rpc("dispatcher", "client"), rel("#")),
    Case("client", LAYOUT.reply(OTHER_CLIENT, JM), rel(f"reply/{CLUSTER}.client/+/+")),
    # Under another process's client id: nothing of that process opens.
    Case("client", LAYOUT.heartbeat("taskexecutor.taskmanager-1", JM), client=TM),
    Case("client", LAYOUT.reply(TM, JM), client=TM),
    Case("client", LAYOUT.reply(JM, TM), client=JM),
    Case(TM, LAYOUT.reply(JM, OTHER_TASKMANAGER), client=JM),
    Case(TM, LAYOUT.reply(OTHER_TASKMANAGER, JM), client=OTHER_TASKMANAGER),
    Case(TM, LAYOUT.reply(CLIENT, JM), client=CLIENT),
    Case("client", LAYOUT.reply(OTHER_CLIENT, JM), client=OTHER_CLIENT, leaks=SHARED_LOGIN),
]

ALLOWED_PUBLISHES = [
    *[Case(TM, topic) for topic in (
        LAYOUT.rpc("resourcemanager", TM), LAYOUT.heartbeat("resourcemanager", TM),
        LAYOUT.rpc("dispatcher", TM), LAYOUT.rpc("jobmaster.j", TM), LAYOUT.reply(JM, TM),
        LAYOUT.presence(TM))],
    Case("client", LAYOUT.rpc("dispatcher", "client")),
    *[Case(JM, topic) for topic in (
        rel(topics.LEADER), LAYOUT.rpc("taskexecutor.taskmanager-1", JM),
        LAYOUT.reply(CLIENT, JM), LAYOUT.reply(TM, JM))],
]

ALLOWED_READS = [
    *[Case(TM, topic) for topic in (
        rel(topics.LEADER), rel(topics.presence(JM)), LAYOUT.reply(TM, JM),
        LAYOUT.rpc(f"taskexecutor.{TM}", JM), LAYOUT.heartbeat(f"taskexecutor.{TM}", JM))],
    *[Case(identity, topic, subscription)
      for identity in ("client", "observer")
      for topic, subscription in (
          (rel(topics.LEADER), rel(topics.LEADER)),
          (rel(topics.job_state("j")), rel(topics.JOB_STATES_ALL)),
          (rel(topics.job_events("j")), rel(topics.JOB_EVENTS_ALL)),
          (rel(topics.job_output("j")), rel(topics.job_output("j"))),
          (rel(topics.CLUSTER_EVENTS), rel("events/#")),
          (LAYOUT.presence(TM), rel(topics.PRESENCE_ALL)))],
    Case("client", LAYOUT.reply(CLIENT, JM)),
    Case("client", LAYOUT.reply(CLIENT, JM), LAYOUT.reply(CLIENT)),
    # The observer reads the whole control plane (the messages view), writes nothing.
    *[Case("observer", topic, rel("#")) for topic in (
        LAYOUT.rpc("dispatcher", "client"), LAYOUT.reply(JM, TM),
        LAYOUT.heartbeat("resourcemanager", TM), LAYOUT.reply(CLIENT, JM))],
    Case(JM, LAYOUT.rpc("dispatcher", "client"), rel("#")),
]


# -- the tests ---------------------------------------------------------------------------

def check_publish(broker: RunningBroker, case: Case) -> bool:
    """Whether ``case.identity`` publishing on ``case.topic`` reaches a subscriber."""
    payload = uuid.uuid4().hex.encode()
    control = rel("events/acl-control/watcher")
    with probe(broker, JM, own("watcher"), [case.topic, control]) as watcher, \
            probe(broker, JM, own("jobmanager-control")) as jobmanager, \
            probe(broker, case.identity, case.client_name) as sender:
        sender.publish(case.topic, payload)
        settle(jobmanager, watcher, control)
        return bool(watcher.got(payload))


def check_read(broker: RunningBroker, case: Case) -> bool:
    """Whether ``case.identity``, subscribed to ``case.subscription``, is delivered a
    message the jobmanager login publishes on ``case.topic``."""
    payload = uuid.uuid4().hex.encode()
    control = control_topic(case.identity)
    with probe(broker, case.identity, case.client_name,
               [case.subscription or case.topic, control]) as reader, \
            probe(broker, JM, own("jobmanager-control")) as jobmanager:
        jobmanager.publish(case.topic, payload)
        settle(jobmanager, reader, control)
        return bool(reader.got(payload))


@per_broker(FORBIDDEN_PUBLISHES)
def test_a_forbidden_publish_reaches_no_subscriber(broker, case):
    assert not check_publish(broker, case)


@per_broker(FORBIDDEN_READS)
def test_a_forbidden_subscription_delivers_nothing(broker, case):
    assert not check_read(broker, case)


@per_broker(ALLOWED_PUBLISHES)
def test_an_allowed_publish_is_delivered(broker, case):
    assert check_publish(broker, case)


@per_broker(ALLOWED_READS)
def test_an_allowed_subscription_is_delivered(broker, case):
    assert check_read(broker, case)


FORGERS = [Case(identity, rel(topics.LEADER), client=f"{identity}-forger")
           for identity in (TM, "client", "observer")]


def current_leader(broker: RunningBroker) -> bytes:
    with probe(broker, JM, own("reader"), [rel(topics.LEADER)]) as reader:
        return reader.wait_for(rel(topics.LEADER))


@per_broker(FORGERS)
def test_a_forged_retained_leader_is_not_kept(broker, case):
    original = f"leader-{uuid.uuid4().hex}".encode()
    with probe(broker, JM, own(JM)) as jobmanager:
        jobmanager.publish(rel(topics.LEADER), original, retain=True)
        with probe(broker, case.identity, case.client_name) as forger:
            forger.publish(rel(topics.LEADER), b"forged", retain=True)
        assert current_leader(broker) == original


@per_broker(FORGERS)
def test_a_forged_leader_as_a_last_will_is_not_kept(broker, case):
    """Mosquitto drops the will; our amqtt plugin refuses the login that carries it."""
    original = f"leader-{uuid.uuid4().hex}".encode()
    control = rel("events/acl-control/will")
    with probe(broker, JM, own(JM)) as jobmanager, \
            probe(broker, JM, own("will-watcher"), [control, rel(topics.LEADER)]) as watcher:
        jobmanager.publish(rel(topics.LEADER), original, retain=True)
        watcher.wait_for(rel(topics.LEADER), original)
        with contextlib.suppress(BrokerConnectError):
            forger = Probe(broker, case.identity, case.client_name,
                           will=(rel(topics.LEADER), b"forged", 1, True))
            forger.drop()
        # A will follows the closed socket within milliseconds, in no order with other
        # clients' messages: give a will that should never come a second to show up.
        with contextlib.suppress(AssertionError):
            watcher.wait_for(rel(topics.LEADER), b"forged", timeout=1.0)
        settle(jobmanager, watcher, control)
        assert current_leader(broker) == original


@pytest.mark.parametrize("broker", KINDS, indirect=True)
def test_a_taskmanagers_own_will_is_accepted(broker):
    """The check on wills refuses only what the login could not publish."""
    control = rel("events/acl-control/own-will")
    offline = uuid.uuid4().hex.encode()
    with probe(broker, JM, own(JM)) as jobmanager, \
            probe(broker, JM, own("will-watcher"), [control, LAYOUT.presence(TM)]) as watcher:
        Probe(broker, TM, TM, will=(LAYOUT.presence(TM), offline, 1, True)).drop()
        watcher.wait_for(LAYOUT.presence(TM), offline)
        settle(jobmanager, watcher, control)
        jobmanager.publish(LAYOUT.presence(TM), b"", retain=True)


AMQTT_RETAINED = ("amqtt 0.12.1 sends every new client the retained messages matching "
                  "anyone's subscription, without an ACL check")


@per_broker([Case(TM, rel(topics.job_state("j"))), Case("observer", LAYOUT.presence("x"))])
def test_retained_messages_reach_no_login_that_may_not_read_them(broker, case):
    """The observer may read presence: its case shows the test sees retained messages."""
    payload = uuid.uuid4().hex.encode()
    filters = [rel(topics.JOB_STATES_ALL), rel(topics.PRESENCE_ALL)]
    with probe(broker, JM, own(JM), filters) as jobmanager:
        jobmanager.publish(case.topic, payload, retain=True)
        jobmanager.wait_for(case.topic, payload)
        control = control_topic(case.identity)
        subscriptions = [control] if case.identity == TM else [control, *filters]
        try:
            with probe(broker, case.identity, case.client_name, subscriptions) as newcomer:
                settle(jobmanager, newcomer, control)
                delivered = bool(newcomer.got(payload))
        finally:
            jobmanager.publish(case.topic, b"", retain=True)
    assert delivered is (case.identity == "observer")


@pytest.mark.parametrize("broker", KINDS, indirect=True)
def test_every_login_logs_in_with_the_password_file_clusterdeck_wrote(broker):
    """For Mosquitto the $7$ hashes are written in Python: a real login proves them."""
    for identity in ("jobmanager", "client", "observer", TM, "taskmanager-64"):
        with probe(broker, identity, f"login-{identity}"):
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



def test_a_taskmanager_login_speaks_only_for_itself_and_jobs_still_finish(cluster, tmp_path):
    """The whole cluster against a TaskManager login in the wrong hands: it cannot speak
    for another TaskManager, nor ask what only clients may ask, nor report another's
    death; the TaskManagers stay registered and a job finishes with the right result.
    On amqtt only: what the broker refuses such a login (the presence of another, asks
    on another's topics) is each broker's FORBIDDEN_PUBLISHES above, and the rest is the
    JobManager's, whichever broker carries it."""
    local_cluster, watcher = cluster
    if local_cluster.config["broker.kind"] != "amqtt":
        pytest.skip("the broker's part is FORBIDDEN_PUBLISHES' on each broker")
    victim = "taskmanager-1"
    impostor = Impostor(local_cluster)
    try:
        report = p.SlotReport(())
        hijack = p.RegisterTaskManager(local_cluster.cluster_id, p.PROTOCOL_VERSION, victim,
                                       "forged", f"taskexecutor.{victim}", "evil", 1, report)
        refused = impostor.answer(impostor.ask("resourcemanager", hijack))
        assert refused.error and refused.error["type"] == "SenderMismatchError"
        assert "speaks only for itself" in refused.error["message"]

        # Claiming to be the victim in ``from``: the topic says otherwise, so nobody
        # answers anyone; the ask after it shows it was handled (in order, one sender).
        impostor.ask("resourcemanager", hijack, claims=victim)
        listing = impostor.answer(impostor.ask("dispatcher", p.RequestJobList()))
        assert listing.error and listing.error["type"] == "SenderMismatchError"

        will = p.Presence(victim, "taskmanager", p.PresenceStatus.OFFLINE, "x", 1, "evil", 0.0)
        impostor.client.publish(impostor.layout.presence(impostor.name),
                                encode(Envelope("event", impostor.name, will),
                                       impostor.framesize), qos=1, retain=True
                                ).wait_for_publish(5)
        impostor.client.publish(impostor.layout.presence(victim), b"forged", qos=1,
                                retain=True).wait_for_publish(5)
        impostor.answer(impostor.ask("resourcemanager", hijack))  # all of it handled
    finally:
        impostor.client.publish(impostor.layout.presence(impostor.name), b"", qos=1,
                                retain=True).wait_for_publish(5)
        impostor.close()
    info = watcher.taskmanager(victim)
    assert info is not None and info.state is p.TaskManagerState.REGISTERED
    assert info.host != "evil"

    words = tmp_path / "words"
    words.mkdir()
    (words / "a.txt").write_text("slot slot fencing\nbroker slot\n")
    with JobClient(local_cluster.config, connect_timeout=30) as client:
        result = wait_result(client, client.submit(EXAMPLES / "wordcount.py",
                                                   (str(words), "2")), 240)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert dict(collected_rows(result)) == {"slot": 3, "fencing": 1, "broker": 1}


def test_a_malformed_ask_is_answered_with_why_and_the_receiver_keeps_serving(cluster):
    """A raw client with a TaskManager login asks what the protocol never sends: each
    receiver answers at once naming what it could not read, instead of leaving the asker
    to its timeout, and answers the next well-formed ask as usual. (A TaskExecutor hears
    asks from the JobManager's login only: the broker drops this login's.)"""
    local_cluster, _ = cluster
    impostor = Impostor(local_cluster, name="taskmanager-63")
    try:
        for endpoint, type_name, body, complaint in (
                ("resourcemanager", "RegisterTaskManager", {"cluster_id": 5},
                 "RegisterTaskManager.cluster_id: expected a string"),
                ("dispatcher", "RequestJobList", {"page": "everything"}, "unknown field"),
                ("resourcemanager", "NoSuchMessage", {}, "unknown message type")):
            answer = impostor.answer(impostor.ask_raw(endpoint, type_name, body), timeout=10)
            assert answer.error and answer.error["type"] == "MalformedMessageError", answer
            assert f"{endpoint} could not read the request" in answer.error["message"]
            assert complaint in answer.error["message"]
        hello = impostor.answer(impostor.ask("dispatcher", p.RequestJobList()), timeout=10)
        assert hello.error and hello.error["type"] == "SenderMismatchError"  # served as ever
    finally:
        impostor.close()


def test_a_strangers_tells_about_anothers_attempt_are_refused_and_fail_nothing(
        cluster, tmp_path):
    """A TaskManager login tells a running script's JobMaster about an attempt that runs
    on another TaskManager (its Spark work, its output, a declined checkpoint), and about
    an attempt the job never had: each is refused and logged; none fails the job, which
    finishes as it would have."""
    local_cluster, _ = cluster
    script = tmp_path / "waits.py"
    script.write_text("import time\nimport pyspark  # a PySpark script\ntime.sleep(4)\n")
    stranger = Impostor(local_cluster, name="taskmanager-62")
    try:
        with JobClient(local_cluster.config, connect_timeout=30) as client:
            job_id = client.submit(script, ())
            attempt_id = wait_for(lambda: _running_attempt(client, job_id), 120,
                                  "the script's attempt running")
            fencing = stranger.leader_token()
            for message in (
                    p.SparkWorkReport(job_id, SparkWork(attempt_id)),
                    p.SparkWorkReport(job_id, SparkWork(f"{job_id}/nobody#0/a0")),
                    p.TaskOutput(job_id, attempt_id, "stdout", "output/x", 0, "forged"),
                    p.DeclineCheckpoint(job_id, attempt_id, "s", 1, "forged")):
                stranger.tell(f"jobmaster.{job_id}", message, fencing)
            result = wait_result(client, job_id, 120)
    finally:
        stranger.close()
    assert result.status is JobStatus.FINISHED, result.root_cause


def _running_attempt(client: JobClient, job_id: str) -> str | None:
    snapshot = client.snapshot(job_id, 2)
    if snapshot is None:
        return None
    subtask = snapshot.graph.vertices[0].subtasks[0]
    return subtask.attempt_id if subtask.state is ExecutionState.RUNNING else None
