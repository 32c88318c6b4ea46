"""``ha.mode = local``: standby JobManagers on one machine wait on a lock file.

Every JobManager of the cluster opens ``<ha.storage-dir>/leader.lock`` and blocks in
``flock``; the kernel grants it to one, and to the next the moment the holder's process
ends, however it ends (SIGKILL too): takeover needs no timeout and no other service. The
winner bumps the counter in ``leader.epoch`` while it holds the lock, so epochs only grow.
A waiting JobManager leaves a file ``standbys/<pid>`` naming itself, so the leader can
list it (``clusterdeck status``).

The supervisor's own lock stays ``cluster.lock`` (one ``clusterdeck up`` per cluster); the
JobManagers compete on this second file, so that the supervisor need not hand its lock on.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
from pathlib import Path

from clusterdeck.core.ha.election import Leadership
from clusterdeck.core.ha.identity import MAX_STANDBYS, own_identity, parse_identity

log = logging.getLogger(__name__)

LOCK_FILE = "leader.lock"
EPOCH_FILE = "leader.epoch"
STANDBY_DIR = "standbys"


class EpochFileError(RuntimeError):
    """The epoch file is unreadable: starting again from 0 would let a stale leader in."""


class LocalElection:
    mode = "local"

    def __init__(self, storage_dir: Path) -> None:
        self._dir = Path(storage_dir)
        self._fd: int | None = None
        self._standby_file = self._dir / STANDBY_DIR / str(os.getpid())

    def run_for_leadership(self, lost: threading.Event) -> Leadership:
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._standby_file.parent.mkdir(exist_ok=True, mode=0o700)
        self._standby_file.write_text(own_identity(), encoding="utf-8")
        fd = os.open(self._dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a standby blocks here
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._standby_file.unlink(missing_ok=True)
        return Leadership(bump_epoch(self._dir / EPOCH_FILE), lost)

    def standbys(self) -> tuple[str, ...]:
        found = []
        try:
            files = sorted((self._dir / STANDBY_DIR).iterdir())
        except OSError:
            return ()
        for path in files[:MAX_STANDBYS * 4]:
            try:
                identity = path.read_text(encoding="utf-8")[:300]
            except OSError:
                continue
            parsed = parse_identity(identity)
            if parsed is not None and _alive(*parsed):
                found.append(identity.strip())
        return tuple(found[:MAX_STANDBYS])

    def close(self) -> None:
        self._standby_file.unlink(missing_ok=True)
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def bump_epoch(path: Path) -> int:
    """Read the last epoch, write the next one durably (a new file renamed over the old),
    return it. Called only under the leader lock."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        text = "0"
    except (OSError, ValueError) as error:
        raise EpochFileError(f"cannot read the leader epoch in {path}: {error}") from None
    if not text.isdigit() or len(text) > 18:
        raise EpochFileError(f"the leader epoch in {path} is not a number: {text[:40]!r}")
    epoch = int(text) + 1
    fresh = path.with_name(f".{path.name}.{os.getpid()}")
    with open(fresh, "w", encoding="ascii") as file:
        file.write(f"{epoch}\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(fresh, path)
    return epoch


def _alive(pid: int, host: str) -> bool:
    """A standby file of a process that is gone (killed while waiting) names nobody."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
