"""The access rules every clusterdeck broker enforces, as one table.

Each role's login (broker/credentials.py) may publish and subscribe only what ``RULES``
grants it, under ``clusterdeck/<cluster-id>/`` and nowhere else. Both broker kinds build
their ACLs from the table (``mosquitto_acl``, ``amqtt_acl``) so the rules cannot drift
between them; docs/security.md explains each rule and what amqtt cannot enforce. The
cluster id becomes a topic level, a user name and a file name, so it is restricted to
characters that are safe in all three.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

TOPIC_ROOT = "clusterdeck"

_CLUSTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_cluster_id(cluster_id: str) -> str:
    """Return ``cluster_id`` when it is safe as a topic level and a user name."""
    if not isinstance(cluster_id, str) or not _CLUSTER_ID.fullmatch(cluster_id):
        raise ValueError(
            f"cluster id {cluster_id!r} must be 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit")
    return cluster_id


class Access(Enum):
    """What a rule allows on its topics: receive (subscribe and be delivered) or publish."""

    READ = "read"
    WRITE = "write"


# Placeholders a rule's topic may hold. OWN stands for a whole level that must equal the
# connecting client's id (``<cluster-id>.<service-id>``): Mosquitto binds it with ``%c``,
# amqtt (no patterns) can only widen it to ``+``.
CLUSTER = "{cluster}"
OWN = "{own}"


@dataclass(frozen=True)
class Rule:
    """One grant: ``role`` may ``access`` the topics of ``topic``, a filter relative to
    ``clusterdeck/<cluster-id>/``. Nothing is allowed that no rule grants."""

    role: str
    access: Access
    topic: str
    why: str = ""

    @property
    def is_own(self) -> bool:
        return OWN in self.topic.split("/")

    def topic_filter(self, cluster_id: str, own: str) -> str:
        """The absolute filter, with ``own`` put in place of the client's own id."""
        relative = self.topic.replace(CLUSTER, cluster_id).replace(OWN, own)
        return f"{TOPIC_ROOT}/{cluster_id}/{relative}"


R, W = Access.READ, Access.WRITE

# The one table both brokers enforce. Topic shapes come from core/rpc/_topics.py
# (TopicLayout) and core/protocol/topics.py; tests/unit/test_broker_acl.py checks that the
# topics those modules build are the ones granted here.
RULES: tuple[Rule, ...] = (
    Rule("jobmanager", R, "#", "hosts the ResourceManager, Dispatcher and JobMasters"),
    Rule("jobmanager", W, "#", "publishes the cluster's state and answers everyone"),

    Rule("taskmanager", W, "rpc/resourcemanager", "registers"),
    Rule("taskmanager", W, "heartbeat/resourcemanager", "heartbeats to the ResourceManager"),
    Rule("taskmanager", W, "rpc/dispatcher", "fetches job artifacts (a hole: see security.md)"),
    Rule("taskmanager", W, "rpc/jobmaster/+", "offers slots, reports task states"),
    Rule("taskmanager", W, f"reply/{CLUSTER}.jobmanager", "answers the JobManager's asks"),
    Rule("taskmanager", W, "presence/+", "its presence, retained, and its last will"),
    Rule("taskmanager", R, "state/leader", "follows the leader"),
    Rule("taskmanager", R, "presence/jobmanager", "sees the JobManager go offline"),
    Rule("taskmanager", R, f"reply/{OWN}", "answers to its own asks"),
    Rule("taskmanager", R, f"rpc/taskexecutor/{OWN}", "its own TaskExecutor's messages"),
    Rule("taskmanager", R, f"heartbeat/taskexecutor/{OWN}", "its own TaskExecutor's heartbeats"),

    Rule("client", W, "rpc/dispatcher", "submits, lists and cancels jobs"),
    Rule("client", R, "state/#", "leader, cluster and job snapshots, results"),
    Rule("client", R, "events/#", "cluster and job events"),
    Rule("client", R, "presence/#", "who is online"),
    Rule("client", R, f"reply/{OWN}", "answers to its own asks"),

    Rule("observer", R, "state/#", "leader, cluster and job snapshots, results"),
    Rule("observer", R, "events/#", "cluster and job events"),
    Rule("observer", R, "presence/#", "who is online"),
)


def rules_for(role: str) -> list[Rule]:
    return [rule for rule in RULES if rule.role == role]


def filters_overlap(first: str, second: str) -> bool:
    """Whether some topic matches both filters (``+`` one level, ``#`` the rest)."""
    a, b = first.split("/"), second.split("/")
    for index in range(max(len(a), len(b))):
        if index >= len(a) or index >= len(b):
            return False
        if "#" in (a[index], b[index]):
            return True
        if "+" not in (a[index], b[index]) and a[index] != b[index]:
            return False
    return True


def filter_covers(outer: str, inner: str) -> bool:
    """Whether every topic matching ``inner`` also matches ``outer``."""
    o, i = outer.split("/"), inner.split("/")
    for index, level in enumerate(o):
        if level == "#":
            return True
        if index >= len(i) or i[index] == "#" or level not in ("+", i[index]):
            return False
    return len(o) == len(i)


def mosquitto_acl(cluster_id: str, usernames: Mapping[str, str]) -> str:
    """The acl_file text for one cluster; ``usernames`` maps each role to its login.

    Rules on a client's own id become ``pattern`` lines. Mosquitto applies a pattern to
    every login, so a login whose role lacks it gets a ``topic deny`` on the same topics
    (denials are checked before patterns): otherwise a client of that role could take
    another process's client id and read that process's own topics. A deny shuts reads
    and writes alike, so a pattern a role can be neither given nor denied is an error.
    """
    check_cluster_id(cluster_id)
    own_rules = [rule for rule in RULES if rule.is_own]
    patterns = list(dict.fromkeys((rule.access, rule.topic_filter(cluster_id, "%c"))
                                  for rule in own_rules))
    lines = ["# Written by clusterdeck from broker/acl.py; rewritten at every broker start.",
             "# Patterns hold for every login; %c is the connecting client's id."]
    lines += [f"pattern {access.value} {topic}" for access, topic in patterns]
    for role, username in usernames.items():
        lines += ["", f"user {username}"]
        lines += _mosquitto_denials(cluster_id, role, own_rules)
        lines += [f"topic {rule.access.value} {rule.topic_filter(cluster_id, '+')}"
                  for rule in rules_for(role) if not rule.is_own]
    return "\n".join(lines) + "\n"


def _mosquitto_denials(cluster_id: str, role: str, own_rules: list[Rule]) -> list[str]:
    held = rules_for(role)
    denials: list[str] = []
    for rule in own_rules:
        widened = rule.topic_filter(cluster_id, "+")
        if any(mine.is_own and mine.access == rule.access and mine.topic == rule.topic
               for mine in held):
            continue
        if any(mine.access == rule.access
               and filter_covers(mine.topic_filter(cluster_id, "+"), widened)
               for mine in held if not mine.is_own):
            continue  # the role holds these topics anyway
        if any(filters_overlap(mine.topic_filter(cluster_id, "+"), widened) for mine in held):
            raise ValueError(f"the pattern on {rule.topic!r} would widen role {role!r}, and "
                             "a deny would cut one of its own rules")
        denials.append(f"topic deny {widened}")
    return list(dict.fromkeys(denials))


def amqtt_acl(cluster_id: str, usernames: Mapping[str, str]
              ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """amqtt's (subscribe ``acl``, ``publish_acl``) per login. amqtt has no patterns: a
    rule on the client's own id is widened to every id (``+``); see ``amqtt_widened``."""
    check_cluster_id(cluster_id)
    subscribe: dict[str, list[str]] = {}
    publish: dict[str, list[str]] = {}
    for role, username in usernames.items():
        for access, table in ((Access.READ, subscribe), (Access.WRITE, publish)):
            table[username] = list(dict.fromkeys(
                rule.topic_filter(cluster_id, "+") for rule in rules_for(role)
                if rule.access == access))
    return subscribe, publish


def amqtt_widened() -> list[Rule]:
    """The rules amqtt enforces only for the whole role, not for the client's own id."""
    return [rule for rule in RULES if rule.is_own]
