"""Every message of the control plane: small frozen dataclasses, validated on receipt.

The wire format and its checks are in ``core.rpc._codec``; docs/protocol.md lists each
message with its topic and QoS. PROTOCOL_VERSION changes whenever a message changes
incompatibly; a TaskManager of another version is refused at registration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from core.rpc import message

PROTOCOL_VERSION = 1

# -- presence and leadership (retained) -------------------------------------------------


class PresenceStatus(StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"


@message
@dataclass(frozen=True)
class Presence:
    """On ``presence/<service>``, retained; the ``offline`` one is the process's last will."""

    service_id: str
    role: str
    status: PresenceStatus
    instance_id: str
    pid: int
    host: str
    started_at: float


@message
@dataclass(frozen=True)
class LeaderInfo:
    """On ``state/leader``, retained: where the JobManager's endpoints are, and its token."""

    resource_manager: str
    dispatcher: str
    fencing_token: str
    protocol_version: int
    pid: int
    host: str
    started_at: float


# -- registration (seed 000) ------------------------------------------------------------


@message
@dataclass(frozen=True)
class SlotStatus:
    index: int
    allocation_id: str | None = None
    job_id: str | None = None


@message
@dataclass(frozen=True)
class SlotReport:
    slots: tuple[SlotStatus, ...]

    @property
    def free(self) -> int:
        return sum(1 for slot in self.slots if slot.allocation_id is None)


@message
@dataclass(frozen=True)
class RegisterTaskManager:
    """TaskExecutor -> ResourceManager (unfenced: the answer hands out the token)."""

    cluster_id: str
    protocol_version: int
    resource_id: str
    instance_id: str
    endpoint_id: str
    host: str
    pid: int
    slot_report: SlotReport


@message
@dataclass(frozen=True)
class AcknowledgeRegistration:
    registration_id: str
    resource_manager: str
    fencing_token: str
    heartbeat_interval: float


@message
@dataclass(frozen=True)
class AlreadyRegistered:
    """The same TaskManager instance registered again (e.g. a retried ask)."""

    registration_id: str
    resource_manager: str
    fencing_token: str
    heartbeat_interval: float


@message
@dataclass(frozen=True)
class RefuseRegistration:
    reason: str


RegistrationResponse = AcknowledgeRegistration | AlreadyRegistered | RefuseRegistration

# -- liveness ---------------------------------------------------------------------------


@message
@dataclass(frozen=True)
class TaskManagerHeartbeat:
    """TaskExecutor -> ResourceManager on ``heartbeat/<rm>``, fenced, QoS 0."""

    resource_id: str
    registration_id: str
    slot_report: SlotReport
    cpu_percent: float = 0.0
    memory_bytes: int = 0


@message
@dataclass(frozen=True)
class ResourceManagerHeartbeat:
    """ResourceManager -> TaskExecutor on ``heartbeat/<te>``, QoS 0."""

    registration_id: str
    fencing_token: str


@message
@dataclass(frozen=True)
class DisconnectTaskManager:
    """ResourceManager -> TaskExecutor: you are not (or no longer) registered here."""

    resource_id: str
    reason: str


# -- cluster overview and events --------------------------------------------------------


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
