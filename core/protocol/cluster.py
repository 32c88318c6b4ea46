"""The cluster overview: the TaskManagers the ResourceManager knows, asked for or retained
on ``state/cluster``, the events of one joining or being lost, and of a JobManager taking
or giving up the lead (docs/ha.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from clusterdeck.core.protocol.elastic import TaskManagerDemand
from clusterdeck.core.rpc import message


class TaskManagerState(StrEnum):
    REGISTERED = "registered"
    LOST = "lost"


@message
@dataclass(frozen=True)
class TaskManagerInfo:
    id: str
    state: TaskManagerState
    host: str
    pid: int
    slots_total: int
    slots_free: int
    heartbeat_age_s: float | None
    registered_at: float
    endpoint_id: str = ""
    lost_cause: str = ""
    cpu_percent: float = 0.0
    memory_bytes: int = 0
    clock_offset_s: float | None = None  # its wall clock less the JobManager's; None: unknown


@message
@dataclass(frozen=True)
class RequestClusterOverview:
    """Client -> Dispatcher (unfenced) and Dispatcher -> ResourceManager."""


@message
@dataclass(frozen=True)
class ClusterOverview:
    """The answer to RequestClusterOverview, and the retained ``state/cluster`` snapshot."""

    cluster_id: str
    taskmanagers: tuple[TaskManagerInfo, ...]
    slots_total: int
    slots_free: int
    jobmanager_pid: int
    taken_at: float
    fencing_token: str = ""
    taskmanagers_left_out: int = 0  # not listed: the overview would not fit rpc.framesize
    leader_epoch: int = 0  # the leading JobManager's epoch (docs/ha.md); protocol 19
    leader_host: str = ""
    standbys: tuple[str, ...] = ()  # JobManagers waiting to take over: "pid N on host H"
    leader_cause: str = ""  # how the leader came to lead; protocol 20
    elastic: TaskManagerDemand | None = None  # the active ResourceManager's; protocol 22


@message
@dataclass(frozen=True)
class TaskManagerRegistered:
    """Event on ``events/cluster``."""

    info: TaskManagerInfo


@message
@dataclass(frozen=True)
class TaskManagerLost:
    """Event on ``events/cluster``; ``detected_by`` is "last will" or "heartbeat timeout"."""

    resource_id: str
    cause: str
    detected_by: str
    at: float = field(default=0.0)


@message
@dataclass(frozen=True)
class LeadershipChanged:
    """Event on ``events/cluster``: a JobManager took the lead (``leading``) or gave it up,
    and why; the recorder keeps them, so a recording tells every takeover (docs/ha.md).
    A JobManager killed outright sends none: its successor's event says it took over."""

    epoch: int
    pid: int
    host: str
    ha_mode: str
    leading: bool
    cause: str
    at: float = field(default=0.0)
