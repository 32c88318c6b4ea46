"""Every MQTT topic of a cluster comes from here.

All topics live under ``clusterdeck/<cluster-id>/``. Services publish and subscribe with
topics relative to that root (``events/cluster``, ``state/leader``); the transport's own
channels (rpc, heartbeat, reply, presence) are shaped by ``TopicLayout``. Which login may
publish or read which of them is in broker/acl.py: a new topic needs a rule there.
"""

from __future__ import annotations

from clusterdeck.core.rpc import TopicLayout

ROOT = "clusterdeck"
# Identities on the wire (core/rpc/_topics.py): the JobManager's; every TaskManager's
# starts with "taskmanager-" (its login, broker/credentials.py); every client's and
# observer's is shared by its login.
JOBMANAGER = "jobmanager"
TASKMANAGERS = "taskmanager"
CLIENTS = ("client", JOBMANAGER)  # who may submit, cancel and ask about jobs
SHARED = ("client", "observer")   # identities every process of one login shares


def layout(cluster_id: str) -> TopicLayout:
    """The transport's topics for one cluster, all under ``clusterdeck/<cluster-id>/``."""
    if not cluster_id or any(c in cluster_id for c in "/+#"):
        raise ValueError(f"cluster id {cluster_id!r} must be non-empty, without / + #")
    # The JobManager hosts every endpoint but the TaskExecutors, each in its TaskManager.
    return TopicLayout(f"{ROOT}/{cluster_id}", cluster_id, server=JOBMANAGER,
                       named_hosts=("taskexecutor",), shared=SHARED)


# Topics relative to the cluster root, for publish/subscribe.
LEADER = "state/leader"             # retained: who leads, with its fencing token
CLUSTER_STATE = "state/cluster"     # retained: TaskManagers and slots now
CLUSTER_EVENTS = "events/cluster"   # registrations, losses, slot changes
TASKMANAGER_DEMAND = "state/taskmanager-demand"  # retained: what the provider starts, stops
PRESENCE_ALL = "presence/+"


def data(topic: str) -> str:
    """Where streaming jobs' MQTT sources and sinks read and write on the cluster's broker
    (``topic`` relative to it, wildcards allowed in a filter): the only topics beyond the
    control plane a TaskManager's login may use (broker/acl.py)."""
    return f"{DATA}/{topic}"


DATA = "data"


def presence(service_id: str) -> str:
    return f"presence/{service_id}"


def job_events(job_id: str) -> str:
    """Job status and execution state changes of one job."""
    return f"events/jobs/{job_id}"


def job_state(job_id: str) -> str:
    """Retained JobSnapshot of one job."""
    return f"state/jobs/{job_id}"


def job_output(job_id: str) -> str:
    """What a job's PySpark script prints, while it runs (JobOutput)."""
    return f"events/output/{job_id}"


def job_result(job_id: str) -> str:
    """Retained JobResult of one job, once it ended."""
    return f"state/results/{job_id}"


def metrics(service_id: str) -> str:
    """A TaskManager's live numbers: its attempts' records and bytes, its JVM's heap."""
    return f"metrics/{service_id}"


METRICS_ALL = "metrics/+"
JOB_EVENTS_ALL = "events/jobs/+"
JOB_STATES_ALL = "state/jobs/+"
JOB_LIST = "state/joblist"          # retained JobList
