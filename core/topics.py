"""Every MQTT topic of a cluster comes from here.

All topics live under ``clusterdeck/<cluster-id>/``. Services publish and subscribe with
topics relative to that root (``events/cluster``, ``state/leader``).
"""

from __future__ import annotations

ROOT = "clusterdeck"


class Topics:
    def __init__(self, cluster_id: str) -> None:
        if not cluster_id or any(c in cluster_id for c in "/+#"):
            raise ValueError(f"cluster id {cluster_id!r} must be non-empty, without / + #")
        self.cluster_id = cluster_id
        self.root = f"{ROOT}/{cluster_id}"

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


# Topics relative to the cluster root, for publish/subscribe.
LEADER = "state/leader"             # retained: who leads, with its fencing token
CLUSTER_STATE = "state/cluster"     # retained: TaskManagers and slots now
CLUSTER_EVENTS = "events/cluster"   # registrations, losses, slot changes
PRESENCE_ALL = "presence/+"


def presence(service_id: str) -> str:
    return f"presence/{service_id}"


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


def job_events(job_id: str) -> str:
    """Job status and execution state changes of one job."""
    return f"events/jobs/{job_id}"


def job_state(job_id: str) -> str:
    """Retained JobSnapshot of one job."""
    return f"state/jobs/{job_id}"


def job_result(job_id: str) -> str:
    """Retained JobResult of one job, once it ended."""
    return f"state/results/{job_id}"


JOB_EVENTS_ALL = "events/jobs/+"
JOB_STATES_ALL = "state/jobs/+"
JOB_LIST = "state/joblist"          # retained JobList
