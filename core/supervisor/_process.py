"""What the supervisor runs and what it reports: a spec goes in, a status and snapshots come out.

The supervisor knows nothing about MQTT or which roles exist; a spec is a generic command
line with a name (unique, also the log file's name) and a free-text role for display.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class ProcessStatus(enum.Enum):
    """Where a supervised process is in its life; the one status a view shows."""

    STARTING = "starting"      # being spawned
    RUNNING = "running"        # spawned and not yet seen to exit (also while being stopped)
    RESTARTING = "restarting"  # exited unasked; waiting for its backoff before the restart
    FAILED = "failed"          # restarted too often within the window: left down
    STOPPED = "stopped"        # never started, stopped on request, or exited with restart off


@dataclass(frozen=True)
class ProcessSpec:
    """How to run one process.

    ``env`` is added to the supervisor's own environment; ``restart`` says whether an exit
    the supervisor did not ask for is followed by a restart (per the restart policy) or
    simply leaves the process STOPPED.
    """

    name: str
    role: str
    argv: tuple[str, ...]
    env: Mapping[str, str] | None = field(default=None, hash=False)
    cwd: str | None = None
    restart: bool = True

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"process name {self.name!r} must be letters, digits, '.', '_' "
                             "or '-' (it names the log file)")
        argv = tuple(os.fspath(arg) for arg in self.argv)
        if not argv:
            raise ValueError(f"process {self.name!r} has an empty argv")
        object.__setattr__(self, "argv", argv)
        if self.env is not None:
            object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        if self.cwd is not None:
            object.__setattr__(self, "cwd", os.fspath(self.cwd))


@dataclass(frozen=True)
class ProcessInfo:
    """An immutable snapshot of one supervised process, safe to hand to any thread.

    ``pid`` is None while no process is alive; ``started_at`` (``time.time()``) is the
    last spawn, kept after an exit; ``restarts`` counts the policy's restarts since the
    process was last started on request; ``last_exit_code`` follows ``subprocess``: a
    negative number is the signal that ended the process.
    """

    name: str
    role: str
    pid: int | None
    status: ProcessStatus
    started_at: float | None
    restarts: int
    last_exit_code: int | None
    log_path: Path
