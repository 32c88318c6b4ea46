"""How a JobManager names itself to the other contenders: ``pid N on host H``."""

from __future__ import annotations

import os
import re
import socket

_IDENTITY = re.compile(r"pid ([0-9]{1,10}) on host (\S{1,255})")
MAX_STANDBYS = 32  # listed in the cluster overview; more would not help a reader


def own_identity() -> str:
    return f"pid {os.getpid()} on host {socket.gethostname()}"


def parse_identity(text: str) -> tuple[int, str] | None:
    """The pid and host of an identity read from a file or a znode; None if malformed."""
    match = _IDENTITY.fullmatch(text.strip())
    return (int(match.group(1)), match.group(2)) if match else None
