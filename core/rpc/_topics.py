"""Where the transport's own channels live, and MQTT's wildcard matching.

The application names the root (``clusterdeck/<cluster-id>``) and hands the layout to the
service; the transport only knows its four channels under it:

- ``rpc/<endpoint>/<sender>`` and ``heartbeat/<endpoint>/<sender>``: an endpoint id
  ``kind.name`` (split at its first dot; a name may hold more dots) becomes the two
  levels ``<kind>/<cluster-id>.<name>``; any other id stays one level. So every
  JobMaster's topic matches ``rpc/jobmaster/+/+``.
- ``reply/<cluster-id>.<service>/<sender>``: answers to the asking process; for a process
  of a shared identity (a client), ``reply/<cluster-id>.<identity>/<client-id>/<sender>``,
  under its identity's level, where the broker binds it to the client id (``%c``).
- ``presence/<service>``.

The last level of every rpc, heartbeat and reply topic is the sender's identity,
``<cluster-id>.<identity>``. The broker lets each login publish only under its own
identity (broker/acl.py), so a receiver knows who sent a message from its topic and
refuses one whose ``from`` says otherwise. A login that many processes share (every
client) is one identity; its processes name themselves ``<identity>-<something>``.

Only this class builds or parses these topics.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

TRANSPORT_CHANNELS = ("rpc", "reply", "heartbeat")


class Route(NamedTuple):
    """What a topic says: its channel, the endpoint (rpc, heartbeat) or service (reply)
    it addresses, and the sender's identity; None where the topic has no such part."""

    channel: str
    name: str | None = None
    sender: str | None = None


class TopicLayout:
    """``root``: the application's prefix for one cluster; ``cluster_id`` names the
    cluster in topic levels and client ids. ``named_hosts`` are the endpoint kinds whose
    ``kind.name`` endpoint lives in the process whose identity is ``name`` (a
    TaskExecutor in its TaskManager); every other endpoint lives in ``server``."""

    def __init__(self, root: str, cluster_id: str, *, server: str = "",
                 named_hosts: Iterable[str] = (), shared: Iterable[str] = ()) -> None:
        self.root = root
        self.cluster_id = cluster_id
        self.server = server
        self.named_hosts = frozenset(named_hosts)
        self.shared = tuple(shared)  # identities many processes share (clients)

    def level(self, name: str) -> str:
        """One topic level naming ``name`` of this cluster."""
        return f"{self.cluster_id}.{name}"

    def client_id(self, service_id: str) -> str:
        """The MQTT client id of a process that shares its login (a client): its reply
        topic is bound to it (Mosquitto's ``%c``)."""
        return self.level(service_id)

    def _endpoint_levels(self, endpoint_id: str) -> str:
        kind, dot, name = endpoint_id.partition(".")
        return f"{kind}/{self.level(name)}" if dot and kind and name else endpoint_id

    def rpc(self, endpoint_id: str, sender: str = "+") -> str:
        return f"{self.root}/rpc/{self._endpoint_levels(endpoint_id)}/{self._sender(sender)}"

    def heartbeat(self, endpoint_id: str, sender: str = "+") -> str:
        return (f"{self.root}/heartbeat/{self._endpoint_levels(endpoint_id)}/"
                f"{self._sender(sender)}")

    def reply(self, service_id: str, sender: str = "+") -> str:
        return f"{self.root}/reply/{self._reply_levels(service_id)}/{self._sender(sender)}"

    def _reply_levels(self, service_id: str) -> str:
        group = self.shared_identity(service_id)
        if group is None:
            return self.level(service_id)
        return f"{self.level(group)}/{self.client_id(service_id)}"

    def shared_identity(self, service_id: str) -> str | None:
        """The shared identity ``service_id`` is one process of, if any."""
        return next((group for group in self.shared
                     if service_id != group and sent_by(group, service_id)), None)

    def _sender(self, identity: str) -> str:
        """``+`` (a subscription's filter: any sender) or the sender's level."""
        return identity if identity == "+" else self.level(identity)

    def presence(self, service_id: str) -> str:
        return f"{self.root}/presence/{service_id}"

    def absolute(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def relative(self, topic: str) -> str:
        prefix = f"{self.root}/"
        return topic[len(prefix):] if topic.startswith(prefix) else topic

    def host_of(self, endpoint_id: str) -> str | None:
        """The identity of the process that hosts ``endpoint_id``: the only one that may
        answer an ask to it; None when the layout does not know."""
        kind, dot, name = endpoint_id.partition(".")
        if dot and kind in self.named_hosts and name:
            return name
        return self.server or None

    def parse(self, topic: str) -> Route:
        """The route of ``topic``; name and sender are None when it addresses nothing of
        this cluster's shape."""
        channel, _, rest = self.relative(topic).partition("/")
        if channel not in TRANSPORT_CHANNELS or not rest:
            return Route(channel)
        address, _, last = rest.rpartition("/")
        sender = self._own(last)
        if not address or sender is None:
            return Route(channel)
        if channel == "reply":
            return Route(channel, self._reply_address(address), sender)
        if "/" not in address:
            return Route(channel, address, sender)
        kind, _, name = address.partition("/")
        own = self._own(name) if "/" not in name else None
        return Route(channel, f"{kind}.{own}" if kind and own else None, sender)

    def _reply_address(self, address: str) -> str | None:
        if "/" not in address:
            service = self._own(address)
            return service if service and self.shared_identity(service) is None else None
        group_level, _, client_level = address.partition("/")
        service = self._own(client_level) if "/" not in client_level else None
        if service is None or self.shared_identity(service) is None \
                or self.level(self.shared_identity(service) or "") != group_level:
            return None
        return service

    def _own(self, level: str) -> str | None:
        """The name in a level ``<cluster-id>.<name>`` of this cluster, else None."""
        prefix = f"{self.cluster_id}."
        return level[len(prefix):] if level.startswith(prefix) and level != prefix else None


def sent_by(identity: str, claimed: str) -> bool:
    """Whether a process whose topic says ``identity`` may call itself ``claimed``: the
    same name, or one of the processes sharing that identity (``<identity>-...``)."""
    return claimed == identity or claimed.startswith(f"{identity}-")


def topic_matches(topic_filter: str, topic: str) -> bool:
    """MQTT wildcard matching (``+`` one level, ``#`` the rest)."""
    filter_parts = topic_filter.split("/")
    topic_parts = topic.split("/")
    for index, part in enumerate(filter_parts):
        if part == "#":
            return True
        if index >= len(topic_parts):
            return False
        if part not in ("+", topic_parts[index]):
            return False
    return len(filter_parts) == len(topic_parts)
