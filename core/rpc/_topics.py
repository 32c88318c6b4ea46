"""Where the transport's own channels live, and MQTT's wildcard matching.

The application names the root (``clusterdeck/<cluster-id>``) and hands the layout to the
service; the transport only knows its four channels under it:

- ``rpc/<endpoint>`` and ``heartbeat/<endpoint>``: an endpoint id ``kind.name`` (split at
  its first dot; a name may hold more dots) becomes the two levels
  ``<kind>/<cluster-id>.<name>``; any other id stays one level. So every
  JobMaster's topic matches ``rpc/jobmaster/+``, and a TaskExecutor's last level is the
  client id of the TaskManager hosting it (``<cluster-id>.<resource-id>``), which lets
  Mosquitto bind that topic to that one client (``%c``; broker/acl.py).
- ``reply/<cluster-id>.<service>``: the asking process's client id, for the same reason.
- ``presence/<service>``.

Only this class builds or parses these topics.
"""

from __future__ import annotations

TRANSPORT_CHANNELS = ("rpc", "reply", "heartbeat")


class TopicLayout:
    """``root``: the application's prefix for one cluster; ``cluster_id`` names the
    cluster in client ids."""

    def __init__(self, root: str, cluster_id: str) -> None:
        self.root = root
        self.cluster_id = cluster_id

    def client_id(self, service_id: str) -> str:
        """The MQTT client id of the process of ``service_id``."""
        return f"{self.cluster_id}.{service_id}"

    def _endpoint_levels(self, endpoint_id: str) -> str:
        kind, dot, name = endpoint_id.partition(".")
        return f"{kind}/{self.client_id(name)}" if dot and kind and name else endpoint_id

    def rpc(self, endpoint_id: str) -> str:
        return f"{self.root}/rpc/{self._endpoint_levels(endpoint_id)}"

    def reply(self, service_id: str) -> str:
        return f"{self.root}/reply/{self.client_id(service_id)}"

    def heartbeat(self, endpoint_id: str) -> str:
        return f"{self.root}/heartbeat/{self._endpoint_levels(endpoint_id)}"

    def presence(self, service_id: str) -> str:
        return f"{self.root}/presence/{service_id}"

    def absolute(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def relative(self, topic: str) -> str:
        prefix = f"{self.root}/"
        return topic[len(prefix):] if topic.startswith(prefix) else topic

    def parse(self, topic: str) -> tuple[str, str | None]:
        """The channel (first level under the root) of ``topic`` and, on a transport
        channel, the endpoint id (``rpc``, ``heartbeat``) or service id (``reply``) it
        addresses; None when it addresses nothing of this cluster's shape."""
        channel, _, rest = self.relative(topic).partition("/")
        if channel not in TRANSPORT_CHANNELS or not rest:
            return channel, None
        own = f"{self.cluster_id}."
        if channel == "reply":
            return channel, rest[len(own):] if rest.startswith(own) and rest != own else None
        if "/" not in rest:
            return channel, rest
        kind, _, last = rest.partition("/")
        if kind and last.startswith(own) and last != own and "/" not in last:
            return channel, f"{kind}.{last[len(own):]}"
        return channel, None


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
