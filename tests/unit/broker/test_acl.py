"""The one ACL table, as both brokers get it, checked against the topics the code uses.

The generated Mosquitto file is read back and evaluated as Mosquitto 2.0 does (a user's
denials, then its grants, then the patterns with ``%c``); amqtt's tables are evaluated
by our own amqtt plugin's matcher (broker/amqttacl.py). The topics come from TopicLayout
and core/protocol/topics.py, so a change of topic shape that the table does not follow
fails here, not on a cluster.
"""

from __future__ import annotations

import pytest

from clusterdeck.broker import acl
from clusterdeck.broker.amqttacl import permitted
from clusterdeck.broker.credentials import ROLES, Credentials, generate, generate_taskmanagers
from clusterdeck.core.jobmanager.jobmaster import endpoint_id_of as jobmaster_endpoint
from clusterdeck.core.protocol import topics
from clusterdeck.core.rpc import topic_matches
from clusterdeck.core.taskmanager.taskexecutor import endpoint_id_of as executor_endpoint

CLUSTER = "alpha.1"  # a dot in the cluster id, as in the topic levels
CREDENTIALS = Credentials(CLUSTER, generate(CLUSTER),
                          generate_taskmanagers(["taskmanager-1", "taskmanager-2"]))
LOGINS = CREDENTIALS.all_logins()
LAYOUT = topics.layout(CLUSTER)
READ, WRITE = "read", "write"
MOSQUITTO_TEXT = acl.mosquitto_acl(CLUSTER, LOGINS)
AMQTT_SUBSCRIBE, AMQTT_PUBLISH = acl.amqtt_acl(CLUSTER, LOGINS)
TASKMANAGER, OTHER_TASKMANAGER = "taskmanager-1", "taskmanager-2"
CLIENT = "client-0123456789abcdef0123456789abcdef"


def login(identity: str) -> acl.Login:
    return next(each for each in LOGINS if each.identity == identity)


def mosquitto_permits(identity: str, client_id: str, topic: str, access: str) -> bool:
    user_rules: dict[str, list[tuple[str, str]]] = {}
    patterns: list[tuple[str, str]] = []
    current: list[tuple[str, str]] = []
    for line in MOSQUITTO_TEXT.splitlines():
        if not line or line.startswith("#"):
            continue
        kind, rest = line.split(" ", 1)
        if kind == "user":
            current = user_rules.setdefault(rest, [])
        else:
            granted, topic_filter = rest.split(" ", 1)
            (patterns if kind == "pattern" else current).append((granted, topic_filter))
    mine = sorted(user_rules.get(login(identity).username, []),
                  key=lambda rule: rule[0] != "deny")
    for granted, topic_filter in mine:
        if topic_matches(topic_filter, topic):
            if granted == "deny":
                return False
            if granted in (access, "readwrite"):
                return True
    return any(granted in (access, "readwrite")
               and topic_matches(topic_filter.replace("%c", client_id), topic)
               for granted, topic_filter in patterns)


def amqtt_permits(identity: str, client_id: str, topic: str, access: str) -> bool:
    table = AMQTT_SUBSCRIBE if access == READ else AMQTT_PUBLISH
    return permitted(table[login(identity).username], topic, client_id)


def both(identity: str, topic: str, access: str, client_id: str | None = None
         ) -> tuple[bool, bool]:
    client_id = client_id or LAYOUT.client_id(CLIENT if identity == "client" else identity)
    return (mosquitto_permits(identity, client_id, topic, access),
            amqtt_permits(identity, client_id, topic, access))


TASKMANAGER_USES = [
    (READ, LAYOUT.reply(TASKMANAGER)),
    (READ, LAYOUT.rpc(executor_endpoint(TASKMANAGER))),
    (READ, LAYOUT.heartbeat(executor_endpoint(TASKMANAGER))),
    (READ, LAYOUT.absolute(topics.LEADER)),
    (READ, LAYOUT.absolute(topics.presence("jobmanager"))),
    (WRITE, LAYOUT.rpc("resourcemanager", TASKMANAGER)),
    (WRITE, LAYOUT.heartbeat("resourcemanager", TASKMANAGER)),
    (WRITE, LAYOUT.rpc("dispatcher", TASKMANAGER)),
    (WRITE, LAYOUT.rpc(jobmaster_endpoint("job-1"), TASKMANAGER)),
    (WRITE, LAYOUT.reply("jobmanager", TASKMANAGER)),
    (WRITE, LAYOUT.presence(TASKMANAGER)),
    (WRITE, LAYOUT.absolute(topics.metrics(TASKMANAGER))),
]
CLIENT_USES = [
    (WRITE, LAYOUT.rpc("dispatcher", "client")),
    (READ, LAYOUT.reply(CLIENT)),
    *[(READ, LAYOUT.absolute(t)) for t in (
        topics.LEADER, topics.CLUSTER_STATE, topics.CLUSTER_EVENTS, topics.JOB_LIST,
        topics.job_state("j"), topics.job_result("j"), topics.job_events("j"),
        topics.presence("taskmanager-1"), topics.metrics("taskmanager-1"))],
]
OBSERVER_USES = [(READ, topic) for _, topic in CLIENT_USES]
OBSERVER_USES += [(READ, LAYOUT.rpc("dispatcher")), (READ, LAYOUT.reply("jobmanager"))]
JOBMANAGER_USES = [
    (WRITE, LAYOUT.rpc(executor_endpoint(TASKMANAGER), "jobmanager")),
    (WRITE, LAYOUT.reply(CLIENT, "jobmanager")),
    (WRITE, LAYOUT.reply(TASKMANAGER, "jobmanager")),
    (WRITE, LAYOUT.absolute(topics.LEADER)),
    (READ, LAYOUT.rpc("dispatcher")),
    (READ, LAYOUT.rpc("resourcemanager")),
    (READ, LAYOUT.reply("jobmanager")),
]


@pytest.mark.parametrize(("identity", "uses"), [
    (TASKMANAGER, TASKMANAGER_USES),
    ("client", CLIENT_USES),
    ("observer", OBSERVER_USES),
    ("jobmanager", JOBMANAGER_USES + CLIENT_USES),
])
def test_every_topic_a_login_uses_is_granted_on_both_brokers(identity, uses):
    refused = [(access, topic) for access, topic in uses
               if both(identity, topic, access) != (True, True)]
    assert refused == []


@pytest.mark.parametrize(("access", "topic"), [
    (WRITE, LAYOUT.absolute(topics.LEADER)),
    (WRITE, LAYOUT.absolute(topics.CLUSTER_STATE)),
    (WRITE, LAYOUT.absolute(topics.job_result("j"))),
    (WRITE, LAYOUT.absolute(topics.CLUSTER_EVENTS)),
    (WRITE, LAYOUT.reply(CLIENT, TASKMANAGER)),
    (WRITE, LAYOUT.rpc(executor_endpoint(OTHER_TASKMANAGER), TASKMANAGER)),
    (WRITE, LAYOUT.heartbeat(executor_endpoint(OTHER_TASKMANAGER), TASKMANAGER)),
    # speaking as someone else: the sender level is not its own
    (WRITE, LAYOUT.rpc("resourcemanager", OTHER_TASKMANAGER)),
    (WRITE, LAYOUT.rpc("dispatcher", "client")),
    (WRITE, LAYOUT.rpc(jobmaster_endpoint("job-1"), "jobmanager")),
    (WRITE, LAYOUT.reply("jobmanager", OTHER_TASKMANAGER)),
    (WRITE, LAYOUT.presence(OTHER_TASKMANAGER)),
    (WRITE, LAYOUT.presence("jobmanager")),
    (WRITE, LAYOUT.absolute(topics.metrics(OTHER_TASKMANAGER))),
    (READ, LAYOUT.rpc("dispatcher")),
    (READ, LAYOUT.rpc("resourcemanager")),
    (READ, LAYOUT.rpc(jobmaster_endpoint("job-1"))),
    (READ, LAYOUT.reply("jobmanager")),
    (READ, LAYOUT.reply(OTHER_TASKMANAGER)),
    (READ, LAYOUT.reply(CLIENT)),
    (READ, LAYOUT.rpc(executor_endpoint(OTHER_TASKMANAGER))),
    (READ, LAYOUT.heartbeat(executor_endpoint(OTHER_TASKMANAGER))),
    (READ, LAYOUT.absolute(topics.job_state("j"))),
    (READ, LAYOUT.absolute(topics.CLUSTER_EVENTS)),
    (WRITE, "clusterdeck/beta/rpc/dispatcher/beta.taskmanager-1"),
])
def test_a_taskmanager_login_may_not(access, topic):
    assert both(TASKMANAGER, topic, access) == (False, False)


@pytest.mark.parametrize("identity", [TASKMANAGER, "client"])
def test_another_process_s_client_id_opens_nothing_of_it(identity):
    """Any login may connect under any client id. The one rule on the client id lies
    under the client identity's own level, so a taken id opens no TaskManager's or
    JobManager's topics, and logins of other roles are denied it outright."""
    for victim in ("jobmanager", OTHER_TASKMANAGER):
        for topic in (LAYOUT.reply(victim), LAYOUT.rpc(executor_endpoint(victim))):
            assert both(identity, topic, READ, LAYOUT.client_id(victim)) == (False, False)
    if identity != "client":
        assert both(identity, LAYOUT.reply(CLIENT), READ, LAYOUT.client_id(CLIENT)) \
            == (False, False)


def test_the_observer_reads_everything_of_its_cluster_only():
    assert both("observer", LAYOUT.absolute("#"), READ) == (True, True)
    assert both("observer", "clusterdeck/beta/state/leader", READ) == (False, False)


def test_a_client_reads_its_own_replies_only():
    assert both("client", LAYOUT.reply(CLIENT), READ) == (True, True)
    other = "client-" + "f" * 32
    assert both("client", LAYOUT.reply(other), READ) == (False, False)
    assert both("client", LAYOUT.absolute(f"reply/{CLUSTER}.client/+/+"), READ) \
        == (False, False)


def test_the_client_login_submits_and_reads_only():
    for topic in (LAYOUT.rpc("resourcemanager", "client"),
                  LAYOUT.rpc(jobmaster_endpoint("j"), "client"),
                  LAYOUT.absolute(topics.LEADER), LAYOUT.presence(CLIENT),
                  LAYOUT.reply("jobmanager", "client"),
                  LAYOUT.rpc("dispatcher", TASKMANAGER)):
        assert both("client", topic, WRITE) == (False, False), topic
    for topic in (LAYOUT.rpc("dispatcher"), LAYOUT.heartbeat("resourcemanager")):
        assert both("client", topic, READ) == (False, False), topic


@pytest.mark.parametrize("client_id", ["observer-1", "jobmanager", TASKMANAGER, CLIENT])
def test_the_observer_login_writes_nothing_whatever_its_client_id(client_id):
    for _, topic in TASKMANAGER_USES + CLIENT_USES + JOBMANAGER_USES:
        assert both("observer", topic, WRITE, LAYOUT.client_id(client_id)) \
            == (False, False), topic


def test_the_only_pattern_is_the_clients_replies_and_the_others_are_denied_it():
    patterns = [line for line in MOSQUITTO_TEXT.splitlines() if line.startswith("pattern ")]
    assert patterns == [f"pattern read clusterdeck/{CLUSTER}/reply/{CLUSTER}.client/%c/+"]
    denied = f"topic deny clusterdeck/{CLUSTER}/reply/{CLUSTER}.client/+/+"
    for each in LOGINS:
        block = MOSQUITTO_TEXT.split(f"user {each.username}\n")[1].split("\n\n")[0]
        assert (denied in block) is (each.role == "taskmanager"), each
    assert "readwrite" not in MOSQUITTO_TEXT and "%u" not in MOSQUITTO_TEXT


def test_each_taskmanager_login_is_its_own_user_with_its_own_topics():
    for name in (TASKMANAGER, OTHER_TASKMANAGER):
        block = MOSQUITTO_TEXT.split(f"user {login(name).username}\n")[1].split("\n\n")[0]
        assert f"topic read clusterdeck/{CLUSTER}/rpc/taskexecutor/{CLUSTER}.{name}/+" in block
        assert f"topic write clusterdeck/{CLUSTER}/presence/{name}" in block


def test_a_pattern_that_would_widen_a_role_it_cannot_be_denied_to_is_refused(monkeypatch):
    """A deny shuts writes as well as reads: the client reads presence/#, so it can be
    neither given nor denied a pattern of presence topics."""
    monkeypatch.setattr(acl, "RULES", (
        *acl.RULES, acl.Rule("taskmanager", acl.Access.WRITE, "presence/{clientid}")))
    with pytest.raises(ValueError, match="would widen"):
        acl.mosquitto_acl(CLUSTER, LOGINS)


def test_every_rule_is_under_the_cluster_and_names_a_known_role():
    assert {rule.role for rule in acl.RULES} == set(ROLES)
    for rule in acl.RULES:
        assert rule.topic_filter(CLUSTER, "x").startswith(f"clusterdeck/{CLUSTER}/")
        assert rule.why


@pytest.mark.parametrize(("first", "second", "overlap"), [
    ("a/#", "a/b/c", True), ("a/+", "a/b", True), ("a/+", "a/b/c", False),
    ("a/b", "a/c", False), ("+/b", "a/+", True), ("#", "x", True), ("a", "a/b", False),
])
def test_filters_overlap_when_some_topic_matches_both(first, second, overlap):
    assert acl.filters_overlap(first, second) is overlap
    assert acl.filters_overlap(second, first) is overlap


@pytest.mark.parametrize(("outer", "inner", "covers"), [
    ("#", "a/+", True), ("a/#", "a/b/+", True), ("a/+", "a/b", True),
    ("a/b", "a/+", False), ("a/+", "a/#", False), ("a/+", "a/b/c", False),
])
def test_a_filter_covers_another_when_it_matches_all_its_topics(outer, inner, covers):
    assert acl.filter_covers(outer, inner) is covers


def test_the_data_topics_are_read_and_written_by_taskmanagers_and_clients_only():
    """Streaming jobs' MQTT sources and sinks (core/engine/mqttparts.py) use the cluster's
    ``data/`` topics with their TaskManager's login; clients feed and read them."""
    data = LAYOUT.absolute(topics.data("sensors/a"))
    for identity in (TASKMANAGER, OTHER_TASKMANAGER, "client", "jobmanager"):
        for access in (READ, WRITE):
            assert both(identity, data, access) == (True, True), (identity, access)
    assert both("observer", data, READ) == (True, True)
    assert both("observer", data, WRITE) == (False, False)
    for topic in (LAYOUT.absolute("datax/a"), LAYOUT.absolute("events/data"),
                  "clusterdeck/beta/data/a"):
        assert both(TASKMANAGER, topic, WRITE) == (False, False), topic
        assert both("client", topic, WRITE) == (False, False), topic
