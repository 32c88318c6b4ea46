"""The ResourceManager's book of TaskManagers: pure state, no transport.

Registration follows seed 000: a TaskManager of another cluster or protocol version is
refused; the same instance registering twice gets AlreadyRegistered; a restarted
instance (new ``instance_id``) replaces its predecessor. The book is bounded, so the
cluster overview fits one message: at most ``max_registered`` TaskManagers at once (more
are refused), and lost ones are forgotten after a while or beyond a count (a remote
TaskManager without ``--id`` gets a new id on every restart, so they only pile up).
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass, field

from clusterdeck.core.protocol import messages as p

# Heartbeats whose clock samples give a TaskManager's offset: the last 16 (16 s with the
# defaults), so a clock stepped by NTP shows its new offset within as long.
CLOCK_SAMPLES = 16


@dataclass
class Registration:
    request: p.RegisterTaskManager
    registration_id: str
    registered_at: float
    slot_report: p.SlotReport
    state: p.TaskManagerState = p.TaskManagerState.REGISTERED
    lost_cause: str = ""
    cpu_percent: float = 0.0
    memory_bytes: int = 0
    lost_at: float = 0.0
    # its wall clock less ours, one per heartbeat: each too low by that heartbeat's delay
    clock_samples: deque[float] = field(default_factory=lambda: deque(maxlen=CLOCK_SAMPLES))

    @property
    def clock_offset(self) -> float | None:
        """How far its wall clock is ahead of ours (behind: negative), as NTP's minimum-
        delay filter takes it: the highest sample is the least delayed one."""
        return max(self.clock_samples) if self.clock_samples else None

    @property
    def resource_id(self) -> str:
        return self.request.resource_id

    @property
    def is_registered(self) -> bool:
        return self.state is p.TaskManagerState.REGISTERED


class TaskManagerRegistry:
    """Owned by the ResourceManager's main thread."""

    def __init__(self, cluster_id: str, max_registered: int | None = None) -> None:
        self.cluster_id = cluster_id
        self.max_registered = max_registered
        self._registrations: dict[str, Registration] = {}

    def register(self, request: p.RegisterTaskManager,
                 now: float) -> tuple[str, Registration | None]:
        """Returns ("refused", None) with the reason in RefuseRegistration, or
        ("acknowledged"|"already", registration)."""
        current = self._registrations.get(request.resource_id)
        if current and current.is_registered and current.request.instance_id == request.instance_id:
            return "already", current
        registration = Registration(request, uuid.uuid4().hex, now, request.slot_report)
        self._registrations[request.resource_id] = registration
        return "acknowledged", registration

    def refusal(self, request: p.RegisterTaskManager) -> str | None:
        if request.cluster_id != self.cluster_id:
            return (f"wrong cluster id: this is cluster {self.cluster_id!r}, the TaskManager "
                    f"belongs to {request.cluster_id!r}")
        if request.protocol_version != p.PROTOCOL_VERSION:
            return (f"incompatible protocol version {request.protocol_version}: this "
                    f"JobManager speaks {p.PROTOCOL_VERSION}")
        current = self._registrations.get(request.resource_id)
        if self.max_registered is not None and not (current and current.is_registered) \
                and len(self.registered()) >= self.max_registered:
            return (f"too many TaskManagers: this cluster has {self.max_registered} "
                    f"registered, the most resourcemanager.max-taskmanagers allows")
        return None

    def get(self, resource_id: str) -> Registration | None:
        return self._registrations.get(resource_id)

    def registered(self) -> list[Registration]:
        return [r for r in self._registrations.values() if r.is_registered]

    def accept_heartbeat(self, heartbeat: p.TaskManagerHeartbeat, wall: float) -> bool:
        """Record a heartbeat's slot report and, from its send time against ``wall`` (our
        wall clock on its arrival), a sample of its clock's offset; False if its sender is
        not registered here."""
        registration = self._registrations.get(heartbeat.resource_id)
        if (registration is None or not registration.is_registered
                or registration.registration_id != heartbeat.registration_id):
            return False
        registration.slot_report = heartbeat.slot_report
        registration.cpu_percent = heartbeat.cpu_percent
        registration.memory_bytes = heartbeat.memory_bytes
        if heartbeat.wall_time > 0:
            registration.clock_samples.append(heartbeat.wall_time - wall)
        return True

    def mark_lost(self, resource_id: str, cause: str, instance_id: str | None = None,
                  now: float = 0.0) -> Registration | None:
        """Mark a TaskManager lost (its slots leave the pool); None if it was not live."""
        registration = self._registrations.get(resource_id)
        if registration is None or not registration.is_registered:
            return None
        if instance_id is not None and registration.request.instance_id != instance_id:
            return None  # the will of an instance that was already replaced
        registration.state = p.TaskManagerState.LOST
        registration.lost_cause = cause
        registration.lost_at = now
        return registration

    def forget_lost(self, now: float, retention: float, keep: int) -> list[str]:
        """Forget lost TaskManagers lost more than ``retention`` seconds ago, and the
        longest lost beyond the ``keep`` most recent; their ids, longest lost first. A
        forgotten one that comes back registers as new."""
        lost = sorted((r for r in self._registrations.values() if not r.is_registered),
                      key=lambda r: r.lost_at)
        excess = max(0, len(lost) - keep)
        gone = [r.resource_id for index, r in enumerate(lost)
                if index < excess or now - r.lost_at > retention]
        for resource_id in gone:
            del self._registrations[resource_id]
        return gone

    def info(self, registration: Registration, heartbeat_age: float | None,
             slots_free: int) -> p.TaskManagerInfo:
        """``slots_free`` comes from the slot pool, which is never a heartbeat late."""
        request = registration.request
        report = registration.slot_report
        live = registration.is_registered
        return p.TaskManagerInfo(
            id=request.resource_id, state=registration.state, host=request.host,
            pid=request.pid, slots_total=len(report.slots), slots_free=slots_free if live else 0,
            heartbeat_age_s=heartbeat_age, registered_at=registration.registered_at,
            endpoint_id=request.endpoint_id, lost_cause=registration.lost_cause,
            cpu_percent=registration.cpu_percent, memory_bytes=registration.memory_bytes,
            clock_offset_s=_rounded(registration.clock_offset))

    def all(self) -> list[Registration]:
        return list(self._registrations.values())


def _rounded(offset: float | None) -> float | None:
    return None if offset is None else round(offset, 3)
