"""The access rules every clusterdeck broker enforces, as one table.

Each login (broker/credentials.py) may publish and subscribe only what ``RULES`` grants
its role, under ``clusterdeck/<cluster-id>/`` and nowhere else. Both broker kinds build
their ACLs from the table (``mosquitto_acl``, ``amqtt_acl``) so the rules cannot drift
between them; docs/security.md explains each rule. The cluster id becomes a topic level,
a user name and a file name, so it is restricted to characters that are safe in all
three.

A rule may name the login's own identity (``{level}``, ``{identity}``): it is written out
for each login, so a TaskManager reads and writes only its own topics and publishes
only under its own name, which is how a receiver knows who sent a message
(core/rpc/_topics.py). The one rule on the connecting client's id (``{clientid}``: a
client's replies, as every client shares one login) lives under the client identity's
own level, where no other process's topics are.
"""

from __future__ import annotations

import re
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


# Placeholders a rule's topic may hold.
CLUSTER = "{cluster}"      # the cluster id
LEVEL = "{level}"          # the login's identity as a topic level: <cluster-id>.<identity>
IDENTITY = "{identity}"    # the login's identity alone (presence/<identity>)
CLIENT_ID = "{clientid}"   # the connecting client's id: Mosquitto's %c, ours on amqtt
MQTT_CLIENT_ID = "%c"


@dataclass(frozen=True)
class Login:
    """A login as the ACL sees it: its username, its role and the identity it speaks as."""

    username: str
    role: str
    identity: str


@dataclass(frozen=True)
class Rule:
    """One grant: ``role`` may ``access`` the topics of ``topic``, a filter relative to
    ``clusterdeck/<cluster-id>/``. Nothing is allowed that no rule grants."""

    role: str
    access: Access
    topic: str
    why: str = ""

    @property
    def on_client_id(self) -> bool:
        return CLIENT_ID in self.topic

    def topic_filter(self, cluster_id: str, identity: str = "+",
                     client_id: str = MQTT_CLIENT_ID) -> str:
        """The absolute filter for a login of ``identity`` connected as ``client_id``."""
        level = identity if identity == "+" else f"{cluster_id}.{identity}"
        relative = (self.topic.replace(CLUSTER, cluster_id).replace(LEVEL, level)
                    .replace(IDENTITY, identity).replace(CLIENT_ID, client_id))
        return f"{TOPIC_ROOT}/{cluster_id}/{relative}"


R, W = Access.READ, Access.WRITE

# The one table both brokers enforce. Topic shapes come from core/rpc/_topics.py
# (TopicLayout) and core/protocol/topics.py; tests/unit/broker/test_acl.py checks that the
# topics those modules build are the ones granted here.
RULES: tuple[Rule, ...] = (
    Rule("jobmanager", R, "#", "hosts the ResourceManager, Dispatcher and JobMasters"),
    Rule("jobmanager", W, "#", "publishes the cluster's state and answers everyone"),

    Rule("taskmanager", W, f"rpc/resourcemanager/{LEVEL}", "registers, as itself"),
    Rule("taskmanager", W, f"heartbeat/resourcemanager/{LEVEL}", "heartbeats, as itself"),
    Rule("taskmanager", W, f"rpc/dispatcher/{LEVEL}",
         "fetches job artifacts; the Dispatcher takes nothing else from a TaskManager"),
    Rule("taskmanager", W, f"rpc/jobmaster/+/{LEVEL}", "reports its tasks' states"),
    Rule("taskmanager", W, f"reply/{CLUSTER}.jobmanager/{LEVEL}",
         "answers the JobManager's asks"),
    Rule("taskmanager", W, f"presence/{IDENTITY}", "its presence, retained, and its will"),
    Rule("taskmanager", W, f"metrics/{IDENTITY}",
         "its tasks' live numbers and its JVM's heap, as itself"),
    Rule("taskmanager", R, "state/leader", "follows the leader"),
    Rule("taskmanager", R, "presence/jobmanager", "sees the JobManager go offline"),
    Rule("taskmanager", R, f"reply/{LEVEL}/+", "answers to its own asks"),
    Rule("taskmanager", R, f"rpc/taskexecutor/{LEVEL}/+", "its own TaskExecutor's messages"),
    Rule("taskmanager", R, f"heartbeat/taskexecutor/{LEVEL}/+",
         "its own TaskExecutor's heartbeats"),
    Rule("taskmanager", R, "data/#", "streaming jobs' MQTT sources on the cluster's broker"),
    Rule("taskmanager", W, "data/#", "streaming jobs' MQTT sinks on the cluster's broker"),

    Rule("client", W, f"rpc/dispatcher/{LEVEL}", "submits, lists and cancels jobs"),
    Rule("client", R, "state/#", "leader, cluster and job snapshots, results"),
    Rule("client", R, "events/#", "cluster and job events"),
    Rule("client", R, "presence/#", "who is online"),
    Rule("client", R, "metrics/#", "the TaskManagers' live numbers, for the window"),
    Rule("client", R, f"reply/{LEVEL}/{CLIENT_ID}/+", "answers to its own asks"),
    Rule("client", W, "data/#", "feeds streaming jobs' MQTT sources"),
    Rule("client", R, "data/#", "reads what streaming jobs' MQTT sinks publish"),

    Rule("observer", R, "#", "everything, the whole control plane too: a GUI watching "
         "somebody else's cluster, and the messages view"),
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


def grants(cluster_id: str, login: Login, client_id: str = MQTT_CLIENT_ID
           ) -> list[tuple[Access, str]]:
    """Every (access, absolute filter) ``login`` holds, connected as ``client_id``."""
    check_cluster_id(cluster_id)
    return list(dict.fromkeys((rule.access, rule.topic_filter(cluster_id, login.identity,
                                                              client_id))
                              for rule in rules_for(login.role)))


def mosquitto_acl(cluster_id: str, logins: list[Login]) -> str:
    """The acl_file text for one cluster.

    Rules on the client id become ``pattern`` lines. Mosquitto applies a pattern to every
    login, and any login may connect under any client id, so a login whose role lacks the
    pattern gets a ``topic deny`` on what it would open (denials are checked before
    patterns). A deny shuts reads and writes alike, so a pattern that a role can be
    neither given nor denied is an error here.
    """
    check_cluster_id(cluster_id)
    lines = ["# Written by clusterdeck from broker/acl.py; rewritten at every broker start.",
             "# Patterns hold for every login; %c is the connecting client's id."]
    patterns: dict[str, Rule] = {}
    for rule in RULES:
        if rule.on_client_id:
            identity = next(login.identity for login in logins if login.role == rule.role)
            patterns.setdefault(rule.topic_filter(cluster_id, identity), rule)
    lines += [f"pattern {rule.access.value} {topic}" for topic, rule in patterns.items()]
    for login in logins:
        lines += ["", f"user {login.username}"]
        lines += _mosquitto_denials(cluster_id, login, patterns)
        lines += [f"topic {access.value} {topic}"
                  for access, topic in grants(cluster_id, login)
                  if MQTT_CLIENT_ID not in topic]
    return "\n".join(lines) + "\n"


def _mosquitto_denials(cluster_id: str, login: Login, patterns: dict[str, Rule]
                       ) -> list[str]:
    held = [(access, topic) for access, topic in grants(cluster_id, login)
            if MQTT_CLIENT_ID not in topic]
    denials: list[str] = []
    for pattern, rule in patterns.items():
        if rule.role == login.role:
            continue
        widened = pattern.replace(MQTT_CLIENT_ID, "+")
        if any(access == rule.access and filter_covers(mine, widened)
               for access, mine in held):
            continue  # the role holds these topics anyway
        if any(filters_overlap(mine, widened) for _, mine in held):
            raise ValueError(f"the pattern {rule.topic!r} would widen {login.username!r}, "
                             "and a deny would cut one of its own rules")
        denials.append(f"topic deny {widened}")
    return list(dict.fromkeys(denials))


def amqtt_acl(cluster_id: str, logins: list[Login]
              ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The (subscribe, publish) filters per username for broker/amqttacl.py's plugin,
    which puts the session's client id in place of ``%c``."""
    subscribe: dict[str, list[str]] = {}
    publish: dict[str, list[str]] = {}
    for login in logins:
        held = grants(cluster_id, login)
        subscribe[login.username] = [topic for access, topic in held if access is R]
        publish[login.username] = [topic for access, topic in held if access is W]
    return subscribe, publish
