"""One supervisor or JobManager per cluster: an exclusive lock on the cluster's folder.

Two JobManagers of one cluster would both recover the same unfinished jobs and run them
twice, and would share one MQTT client id and knock each other off the broker. So whoever
runs a cluster's JobManager — the supervisor of ``clusterdeck up``/``run`` or of the
desktop app, or a JobManager started on its own — first takes an exclusive ``flock`` on
``<cluster dir>/cluster.lock``, without waiting, and holds it for its whole life.

A flock belongs to the open file, so it ends with its process however that ends: a
crashed holder never leaves a stale lock. The file is opened close-on-exec, so no child
keeps it alive, and it is never deleted (deleting a lock file lets a later process lock a
new file of the same name while the old one is still held).

The holder writes who it is into the file, so the process that finds the lock taken can
say by whom. A supervisor's JobManager cannot take the lock its parent holds: the
supervisor hands it on by putting the token it wrote into the child's environment
(``HANDOVER_ENV``). A JobManager that finds that token in the file runs under its
parent's lock, after a crash and a restart too, since the token lives as long as the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from clusterdeck.broker.credentials import ensure_private_dir

LOCK_FILE = "cluster.lock"
HANDOVER_ENV = "CLUSTERDECK_CLUSTER_LOCK"
"""Set by a supervisor for its JobManager: the token of the lock it holds for it."""

_ROLE_NAMES = {"supervisor": "supervisor", "jobmanager": "JobManager"}
# The holder writes its line right after it got the lock; a reader that comes in between
# (or sees the previous holder's line) waits this long for it.
_READ_PATIENCE = 1.0


@dataclass(frozen=True)
class LockHolder:
    """Who holds a cluster's lock, as its holder wrote it into the lock file."""

    pid: int
    host: str
    role: str            # "supervisor" (up, run, the desktop app) or "jobmanager"
    started_at: float    # epoch seconds
    command: str         # the holder's command line
    token: str           # what a supervisor hands on to its JobManager

    def describe(self) -> str:
        """``supervisor pid 123 on host h since 2024-05-01 10:15:02 (started by `…`)``."""
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        return (f"{_ROLE_NAMES.get(self.role, self.role)} pid {self.pid} on host "
                f"{self.host} since {since} (started by `{self.command}`)")


class ClusterLockedError(RuntimeError):
    """Another supervisor or JobManager holds the cluster's lock: the cluster runs."""

    def __init__(self, cluster_id: str, path: Path, holder: LockHolder | None) -> None:
        self.cluster_id = cluster_id
        self.path = path
        self.holder = holder
        who = holder.describe() if holder else f"another process holds {path}"
        super().__init__(f"cluster {cluster_id} is already running: {who}")


class ClusterLock:
    """A cluster's lock held by this process, or by its supervisor for it (``inherited``).

    Release it with ``release()`` or by leaving the ``with`` block; the end of the process
    releases it as well.
    """

    def __init__(self, cluster_id: str, path: Path, holder: LockHolder,
                 fd: int | None) -> None:
        self.cluster_id = cluster_id
        self.path = path
        self.holder = holder
        self.inherited = fd is None
        """Held by the supervisor that started this process, not by this process."""
        self._fd = fd

    def handover_env(self) -> dict[str, str]:
        """The environment that lets a JobManager child run under this lock."""
        return {HANDOVER_ENV: self.holder.token}

    def release(self) -> None:
        """Let the lock go (closing the file ends the flock); a second call does nothing."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> ClusterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_path(cluster_dir: Path) -> Path:
    return Path(cluster_dir) / LOCK_FILE


def acquire(cluster_dir: Path, cluster_id: str, role: str, *, accept_handover: bool = False,
            command: str | None = None) -> ClusterLock:
    """Take the cluster's lock for this process as ``role``, or raise ClusterLockedError.

    Never waits for the holder. ``accept_handover``: for a JobManager only; when the
    lock is held under the token in ``HANDOVER_ENV``, run under it. ``command`` is what
    the message of a later loser names (default: this process's command line). Nothing
    in the cluster's folder changes unless the lock is taken.
    """
    path = lock_path(ensure_private_dir(Path(cluster_dir)))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = read_holder(cluster_dir)
        handed = os.environ.get(HANDOVER_ENV)
        if accept_handover and holder is not None and handed and handed == holder.token:
            return ClusterLock(cluster_id, path, holder, None)
        raise ClusterLockedError(cluster_id, path, holder) from None
    except BaseException:
        os.close(fd)
        raise
    holder = LockHolder(os.getpid(), socket.gethostname(), role, time.time(),
                        command or shlex.join(sys.orig_argv), uuid.uuid4().hex)
    line = (json.dumps(asdict(holder)) + "\n").encode()
    # Written over the previous holder's line, then cut to length: a reader sees one
    # whole line first, whatever it reads in between.
    os.pwrite(fd, line, 0)
    os.ftruncate(fd, len(line))
    return ClusterLock(cluster_id, path, holder, fd)


def read_holder(cluster_dir: Path) -> LockHolder | None:
    """Who the lock file names, while someone holds it; None when it names nobody alive
    within a moment (a holder that has not written its line yet, an unreadable file)."""
    path = lock_path(cluster_dir)
    deadline = time.monotonic() + _READ_PATIENCE
    while True:
        holder = _parse(path)
        if holder is not None and _plausible(holder):
            return holder
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def _parse(path: Path) -> LockHolder | None:
    try:
        first_line = path.read_text(encoding="utf-8").partition("\n")[0]
        return LockHolder(**json.loads(first_line))
    except (OSError, ValueError, TypeError):
        return None


def _plausible(holder: LockHolder) -> bool:
    """False for the line of a previous holder that is gone (same host only)."""
    if holder.host != socket.gethostname():
        return True
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True
