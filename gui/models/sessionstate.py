"""The session as the window shows it: its mode and what it may do. Immutable values the
session (gui/session.py) replaces on every change and the views read. Any thread."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SessionMode(StrEnum):
    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"        # a local cluster under our supervisor
    ATTACHING = "attaching"
    ATTACHED = "attached"      # somebody else's cluster, watched through a client only
    STOPPING = "stopping"


@dataclass(frozen=True)
class SessionState:
    """What the window shows about the session; immutable, replaced on every change."""

    mode: SessionMode = SessionMode.IDLE
    cluster_id: str = ""
    broker_kind: str = ""
    supervised: bool = False   # our supervisor runs the processes (restart/kill work)
    owned: bool = False        # closing the window must decide the cluster's fate
    error: str = ""

    @property
    def active(self) -> bool:
        return self.mode is not SessionMode.IDLE
