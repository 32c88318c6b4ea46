"""Registration and liveness: a TaskManager joins the ResourceManager and stays alive.

RegisterTaskManager is answered AcknowledgeRegistration (new), AlreadyRegistered (the same
instance again, e.g. a retried ask) or RefuseRegistration; then heartbeats go both ways
until one side times out or the ResourceManager disconnects the TaskManager.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterdeck.core.rpc import message


@message
@dataclass(frozen=True)
class SlotStatus:
    index: int
    allocation_id: str | None = None
    job_id: str | None = None


@message
@dataclass(frozen=True)
class SlotReport:
    """``spark_ready``: the TaskManager's SparkSession is up, so a task starts at once; the
    ResourceManager prefers such slots (a TaskManager just restarted is still starting
    its JVM)."""

    slots: tuple[SlotStatus, ...]
    spark_ready: bool = True

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
    data_url: str = ""  # its data service (core/dataservice), "" when it runs none
    data_fingerprint: str = ""
    data_key: str = ""
    stream_address: str = ""  # host:port of its channel server (same key and certificate)


@dataclass(frozen=True)
class RegistrationAccepted:
    """What both accepting answers carry; not a message itself, so the wire keeps its two
    type names and a TaskManager can tell a fresh registration from a repeated one.

    ``spark_properties``: the cluster's spark.* settings; a TaskManager's session gets those
    its own configuration does not set (one on another machine has only its own file)."""

    registration_id: str
    resource_manager: str
    fencing_token: str
    heartbeat_interval: float
    spark_properties: dict[str, str] = field(default_factory=dict)


@message
@dataclass(frozen=True)
class AcknowledgeRegistration(RegistrationAccepted):
    """A new registration: the TaskManager instance was not registered before."""


@message
@dataclass(frozen=True)
class AlreadyRegistered(RegistrationAccepted):
    """The same TaskManager instance registered again (e.g. a retried ask)."""


@message
@dataclass(frozen=True)
class RefuseRegistration:
    reason: str


RegistrationResponse = AcknowledgeRegistration | AlreadyRegistered | RefuseRegistration


@message
@dataclass(frozen=True)
class TaskManagerHeartbeat:
    """TaskExecutor -> ResourceManager on ``heartbeat/<rm>``, fenced, QoS 0.
    ``wall_time``: the TaskManager's wall clock when it sent it, from which the
    ResourceManager measures how far that clock is off its own (0: not told)."""

    resource_id: str
    registration_id: str
    slot_report: SlotReport
    cpu_percent: float = 0.0
    memory_bytes: int = 0
    wall_time: float = 0.0


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
