"""Presence and leadership: the retained messages that say who is up and where the leader is.

Every process publishes its ``Presence`` (the ``offline`` one is its last will); the
JobManager retains ``LeaderInfo`` so a TaskManager or client finds its endpoints and token;
a record of a lower epoch than one already seen is refused (core/protocol/fencing.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from clusterdeck.core.rpc import message


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
    epoch: int = 0  # the epoch its fencing token carries (core/protocol/fencing.py)
    ha_mode: str = "none"
