"""What the JobManager asks of a leader election, whatever the mode (docs/ha.md).

Flink's ``LeaderElectionDriver`` grants and revokes leadership; here a JobManager asks
once, blocks until it leads (a standby waits there), and gets a ``Leadership`` with the
epoch its fencing token carries (core/protocol/fencing.py). Leadership is never handed
back while the process runs: a leader that loses it exits (exit code 12) and its
supervisor starts it again as a standby, so no JobMaster of a stale leader lives on.
"""

from __future__ import annotations

import threading
from typing import Protocol


class Leadership:
    """Granted with an epoch; ``lost`` is set, from the driver's thread, the moment the
    driver can no longer vouch for it (``cause`` says why)."""

    def __init__(self, epoch: int, lost: threading.Event | None = None) -> None:
        self.epoch = epoch
        self.lost = lost or threading.Event()
        self.cause = ""

    def lose(self, cause: str) -> None:
        if not self.lost.is_set():
            self.cause = cause
            self.lost.set()


class LeaderElection(Protocol):
    """One per JobManager process; its methods run on the process's main thread."""

    mode: str

    def run_for_leadership(self, lost: threading.Event) -> Leadership:
        """Block until this process leads, then grant it a new epoch, higher than every
        earlier leader's. ``lost`` is the event the Leadership sets when it ends."""
        ...

    def standbys(self) -> tuple[str, ...]:
        """The JobManagers waiting to take over, each as ``pid N on host H``."""
        ...

    def close(self) -> None:
        """Revoke: let the next one lead (and end any session with a service)."""
        ...
