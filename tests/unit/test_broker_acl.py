"""The one ACL table, as both brokers get it, checked against the topics the code uses.

The generated Mosquitto file is read back and evaluated as Mosquitto 2.0 does (a user's
denials, then its grants, then the patterns with ``%c``); amqtt's tables are evaluated
with amqtt's own matcher. The topics come from TopicLayout and core/protocol/topics.py,
so a change of topic shape that the table does not follow fails here, not on a cluster.
"""

from __future__ import annotations

import pytest
from amqtt.plugins.topic_checking import TopicAccessControlListPlugin

from clusterdeck.broker import acl
from clusterdeck.broker.credentials import ROLES, username_for
from clusterdeck.core.jobmanager.jobmaster import endpoint_id_of as jobmaster_endpoint
from clusterdeck.core.protocol import topics
from clusterdeck.core.rpc import topic_matches
from clusterdeck.core.taskmanager.taskexecutor import endpoint_id_of as executor_endpoint

CLUSTER = "alpha.1"  # a dot in the cluster id, as in the client ids
USERS = {role: username_for(CLUSTER, role) for role in ROLES}
LAYOUT = topics.layout(CLUSTER)
READ, WRITE = "read", "write"


def mosquitto_permits(role: str, client_id: str, topic: str, access: str) -> bool:
    user_rules: dict[str, list[tuple[str, str]]] = {}
    patterns: list[tuple[str, str]] = []
    current: list[tuple[str, str]] = []
    for line in acl.mosquitto_acl(CLUSTER, USERS).splitlines():
        if not line or line.startswith("#"):
            continue
        kind, rest = line.split(" ", 1)
        if kind == "user":
            current = user_rules.setdefault(rest, [])
        else:
            granted, topic_filter = rest.split(" ", 1)
            (patterns if kind == "pattern" else current).append((granted, topic_filter))
    mine = sorted(user_rules.get(USERS[role], []), key=lambda rule: rule[0] != "deny")
    for granted, topic_filter in mine:
        if topic_matches(topic_filter, topic):
            if granted == "deny":
                return False
            if granted in (access, "readwrite"):
                return True
    return any(granted in (access, "readwrite")
               and topic_matches(topic_filter.replace("%c", client_id), topic)
               for granted, topic_filter in patterns)


def amqtt_permits(role: str, topic: str, access: str) -> bool:
    subscribe, publish = acl.amqtt_acl(CLUSTER, USERS)
    table = subscribe if access == READ else publish
    return any(TopicAccessControlListPlugin.topic_ac(topic, allowed)
               for allowed in table[USERS[role]])


def both(role: str, service_id: str, topic: str, access: str) -> tuple[bool, bool]:
    return (mosquitto_permits(role, LAYOUT.client_id(service_id), topic, access),
            amqtt_permits(role, topic, access))


TASKMANAGER = "host.example-42"  # resource ids may hold dots
TASKMANAGER_USES = [
    (READ, LAYOUT.reply(TASKMANAGER)),
    (READ, LAYOUT.rpc(executor_endpoint(TASKMANAGER))),
    (READ, LAYOUT.heartbeat(executor_endpoint(TASKMANAGER))),
    (READ, LAYOUT.absolute(topics.LEADER)),
    (READ, LAYOUT.absolute(topics.presence("jobmanager"))),
    (WRITE, LAYOUT.rpc("resourcemanager")),
    (WRITE, LAYOUT.heartbeat("resourcemanager")),
    (WRITE, LAYOUT.rpc("dispatcher")),
    (WRITE, LAYOUT.rpc(jobmaster_endpoint("job-1"))),
    (WRITE, LAYOUT.reply("jobmanager")),
    (WRITE, LAYOUT.presence(TASKMANAGER)),
]
CLIENT = "client-0123456789ab"
CLIENT_USES = [
    (WRITE, LAYOUT.rpc("dispatcher")),
    (READ, LAYOUT.reply(CLIENT)),
    *[(READ, LAYOUT.absolute(t)) for t in (
        topics.LEADER, topics.CLUSTER_STATE, topics.CLUSTER_EVENTS, topics.JOB_LIST,
        topics.job_state("j"), topics.job_result("j"), topics.job_events("j"),
        topics.presence("taskmanager-1"))],
]
OBSERVER_USES = [(READ, topic) for access, topic in CLIENT_USES
                 if access == READ and "/reply/" not in topic]


@pytest.mark.parametrize(("role", "service_id", "uses"), [
    ("taskmanager", TASKMANAGER, TASKMANAGER_USES),
    ("client", CLIENT, CLIENT_USES),
    ("observer", "observer-1", OBSERVER_USES),
    ("jobmanager", "jobmanager", TASKMANAGER_USES + CLIENT_USES),
])
def test_every_topic_a_role_uses_is_granted_on_both_brokers(role, service_id, uses):
    refused = [(access, topic) for access, topic in uses
               if both(role, service_id, topic, access) != (True, True)]
    assert refused == []


@pytest.mark.parametrize(("access", "topic"), [
    (WRITE, LAYOUT.absolute(topics.LEADER)),
    (WRITE, LAYOUT.absolute(topics.CLUSTER_STATE)),
    (WRITE, LAYOUT.absolute(topics.job_result("j"))),
    (WRITE, LAYOUT.absolute(topics.CLUSTER_EVENTS)),
    (WRITE, LAYOUT.reply(CLIENT)),
    (WRITE, LAYOUT.rpc(executor_endpoint("taskmanager-2"))),
    (WRITE, LAYOUT.heartbeat(executor_endpoint("taskmanager-2"))),
    (READ, LAYOUT.rpc("dispatcher")),
    (READ, LAYOUT.rpc("resourcemanager")),
    (READ, LAYOUT.rpc(jobmaster_endpoint("job-1"))),
    (READ, LAYOUT.absolute(topics.job_state("j"))),
    (READ, LAYOUT.absolute(topics.CLUSTER_EVENTS)),
    (WRITE, "clusterdeck/beta/rpc/dispatcher"),
])
def test_the_taskmanager_login_may_not(access, topic):
    assert both("taskmanager", TASKMANAGER, topic, access) == (False, False)


@pytest.mark.parametrize("topic", [LAYOUT.reply("jobmanager"), LAYOUT.reply("taskmanager-2"),
                                   LAYOUT.rpc(executor_endpoint("taskmanager-2")),
                                   LAYOUT.heartbeat(executor_endpoint("taskmanager-2"))])
def test_others_own_topics_are_closed_on_mosquitto_and_open_to_the_role_on_amqtt(topic):
    """What amqtt cannot enforce: without patterns, a TaskManager reads every reply and
    every TaskExecutor's topics."""
    assert both("taskmanager", TASKMANAGER, topic, READ) == (False, True)


def test_the_client_login_submits_and_reads_only():
    assert both("client", CLIENT, LAYOUT.rpc("dispatcher"), WRITE) == (True, True)
    for topic in (LAYOUT.rpc("resourcemanager"), LAYOUT.rpc(jobmaster_endpoint("j")),
                  LAYOUT.absolute(topics.LEADER), LAYOUT.presence(CLIENT),
                  LAYOUT.reply("jobmanager")):
        assert both("client", CLIENT, topic, WRITE) == (False, False), topic
    for topic in (LAYOUT.rpc("dispatcher"), LAYOUT.heartbeat("resourcemanager")):
        assert both("client", CLIENT, topic, READ) == (False, False), topic


def test_the_observer_login_writes_nothing_whatever_its_client_id():
    for service_id in ("observer-1", "jobmanager", TASKMANAGER):
        for topic in [topic for _, topic in TASKMANAGER_USES + CLIENT_USES] + [
                LAYOUT.absolute("anything/else")]:
            assert both("observer", service_id, topic, WRITE) == (False, False), topic


def test_a_taken_over_client_id_reads_no_more_with_an_observer_or_client_login():
    """A login may connect with another process's client id; Mosquitto's patterns then
    match for it, which the generated denials stop for roles that lack those rules."""
    executor_topics = [LAYOUT.rpc(executor_endpoint(TASKMANAGER)),
                       LAYOUT.heartbeat(executor_endpoint(TASKMANAGER))]
    for topic in executor_topics:
        assert not mosquitto_permits("client", LAYOUT.client_id(TASKMANAGER), topic, READ)
    for topic in [*executor_topics, LAYOUT.reply(TASKMANAGER)]:
        assert not mosquitto_permits("observer", LAYOUT.client_id(TASKMANAGER), topic, READ)


def test_patterns_hold_for_every_login_so_the_file_says_so_once():
    text = acl.mosquitto_acl(CLUSTER, USERS)
    patterns = [line for line in text.splitlines() if line.startswith("pattern ")]
    assert patterns == [
        f"pattern read clusterdeck/{CLUSTER}/reply/%c",
        f"pattern read clusterdeck/{CLUSTER}/rpc/taskexecutor/%c",
        f"pattern read clusterdeck/{CLUSTER}/heartbeat/taskexecutor/%c",
    ]
    assert "readwrite" not in text and "%u" not in text


def test_what_amqtt_widens_is_exactly_the_rules_on_a_clients_own_id():
    assert [(rule.role, rule.topic) for rule in acl.amqtt_widened()] == [
        ("taskmanager", "reply/{own}"), ("taskmanager", "rpc/taskexecutor/{own}"),
        ("taskmanager", "heartbeat/taskexecutor/{own}"), ("client", "reply/{own}")]


def test_a_pattern_that_would_widen_a_role_it_cannot_be_denied_to_is_refused(monkeypatch):
    """A deny shuts writes as well as reads: the client reads presence/#, so it can be
    neither given nor denied a pattern of presence topics."""
    monkeypatch.setattr(acl, "RULES", (
        *acl.RULES, acl.Rule("taskmanager", acl.Access.WRITE, "presence/{own}")))
    with pytest.raises(ValueError, match="would widen role 'client'"):
        acl.mosquitto_acl(CLUSTER, USERS)


def test_every_rule_is_under_the_cluster_and_names_a_known_role():
    assert {rule.role for rule in acl.RULES} == set(ROLES)
    for rule in acl.RULES:
        assert rule.topic_filter(CLUSTER, "+").startswith(f"clusterdeck/{CLUSTER}/")
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
