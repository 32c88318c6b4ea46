"""Where the transport's own channels live, and MQTT's wildcard matching.

The application names the root (``clusterdeck/<cluster-id>``) and hands the layout to the
service; the transport only knows its four channels under it: ``rpc/<endpoint>``,
``reply/<service>``, ``heartbeat/<endpoint>`` and ``presence/<service>``.
"""

from __future__ import annotations


class TopicLayout:
    """``root``: the application's prefix for one cluster; ``cluster_id`` names the
    cluster in client ids."""

    def __init__(self, root: str, cluster_id: str) -> None:
        self.root = root
        self.cluster_id = cluster_id

    def rpc(self, endpoint_id: str) -> str:
        return f"{self.root}/rpc/{endpoint_id}"

    def reply(self, service_id: str) -> str:
        return f"{self.root}/reply/{service_id}"

    def heartbeat(self, endpoint_id: str) -> str:
        return f"{self.root}/heartbeat/{endpoint_id}"

    def presence(self, service_id: str) -> str:
        return f"{self.root}/presence/{service_id}"

    def absolute(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def relative(self, topic: str) -> str:
        prefix = f"{self.root}/"
        return topic[len(prefix):] if topic.startswith(prefix) else topic


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
