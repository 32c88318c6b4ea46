"""Generated per-cluster broker logins, kept in the cluster's private dir.

Every cluster gets its own random passwords the first time its broker starts, so a
process of one cluster (or any other local program) cannot join another cluster's
broker. The file is the single source: the broker builds its password file from it
and every local process reads its own login from it. What each login may do on the
broker is in broker/acl.py.

The jobmanager, client and observer roles have one login each. TaskManagers have one
login *each*, from a pool of ``TASKMANAGER_LOGINS`` named ``taskmanager-<n>``: a login
is a TaskManager's identity, so one TaskManager cannot act as another. Local
TaskManagers take them from the bottom (``taskmanager-1``...), logins handed to other
machines (``clusterdeck credentials export``) from the top, each recorded as handed out
so that it is never given twice.

A file written before a role or the pool existed gets what is missing added the next
time it is read, under an exclusive lock so that two processes doing it at once agree
on one password.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clusterdeck.broker import acl
from clusterdeck.broker.acl import check_cluster_id

# jobmanager: everything in the cluster; taskmanager: the login handed to other machines;
# client: submits and follows jobs; observer: reads the cluster's state and events only.
ROLES: tuple[str, ...] = ("jobmanager", "taskmanager", "client", "observer")
SHARED_ROLES: tuple[str, ...] = ("jobmanager", "client", "observer")  # one login each
TASKMANAGER_LOGINS = 64
FILE_NAME = "credentials.json"
LOCK_NAME = ".credentials.lock"
_FORMAT_VERSION = 2
_TASKMANAGER_NAME = re.compile(r"taskmanager-([1-9][0-9]{0,3})")


def taskmanager_name(index: int) -> str:
    """The name, service id and login of the pool's TaskManager ``index`` (from 1)."""
    return f"taskmanager-{index}"


def taskmanager_index(name: str) -> int | None:
    """``n`` of a pool name ``taskmanager-<n>``; None for any other name."""
    match = _TASKMANAGER_NAME.fullmatch(name)
    index = int(match.group(1)) if match else 0
    return index if 1 <= index <= TASKMANAGER_LOGINS else None


class CredentialsError(RuntimeError):
    """The credentials file is missing, unreadable or belongs to another cluster."""


@dataclass(frozen=True)
class Login(acl.Login):
    """One login to the broker with its password: the username, its role and the identity
    it speaks as on the wire (core/rpc/_topics.py)."""

    password: str = field(default="", repr=False)


@dataclass(frozen=True)
class Credentials:
    """The logins of one cluster: one per shared role (``logins``, role to (username,
    password)) and one per TaskManager of the pool (``taskmanagers``, name to password).
    ``exported`` names the TaskManager logins handed to other machines. Passwords never
    appear in repr."""

    cluster_id: str
    logins: Mapping[str, tuple[str, str]] = field(repr=False)
    taskmanagers: Mapping[str, str] = field(default_factory=dict, repr=False)
    exported: Mapping[str, str] = field(default_factory=dict)  # name: when (UTC)

    def __post_init__(self) -> None:
        missing = [role for role in SHARED_ROLES if role not in self.logins]
        if missing or not self.taskmanagers:
            raise CredentialsError(f"credentials of cluster {self.cluster_id!r} lack the "
                                   f"login(s) of {', '.join(missing or ['taskmanager'])}")

    def for_role(self, role: str, name: str | None = None) -> tuple[str, str]:
        """The (username, password) a process of ``role`` connects with; a TaskManager
        names its own login (``taskmanager-<n>``)."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r} (known: {', '.join(ROLES)})")
        if role != "taskmanager":
            return self.logins[role]
        if name is None or name not in self.taskmanagers:
            raise CredentialsError(
                f"a TaskManager of cluster {self.cluster_id!r} needs a login of its own: "
                f"its id must be taskmanager-1 ... taskmanager-{len(self.taskmanagers)}, "
                f"not {name!r} (on another machine: clusterdeck credentials export)")
        return username_for(self.cluster_id, name), self.taskmanagers[name]

    def all_logins(self) -> list[Login]:
        """Every login the broker must accept, with what each may speak as."""
        logins = [Login(self.logins[role][0], role, role, self.logins[role][1])
                  for role in SHARED_ROLES]
        logins += [Login(username_for(self.cluster_id, name), "taskmanager", name, password)
                   for name, password in self.taskmanagers.items()]
        return logins

    def usernames(self) -> list[str]:
        return [login.username for login in self.all_logins()]

    def items(self) -> list[tuple[str, str]]:
        """Every (username, password) pair: what the broker must accept."""
        return [(login.username, login.password) for login in self.all_logins()]


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` readable by its owner only: it holds credentials."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def username_for(cluster_id: str, identity: str) -> str:
    return f"cd-{cluster_id}-{identity}"


def generate(cluster_id: str, roles: tuple[str, ...] = SHARED_ROLES
             ) -> dict[str, tuple[str, str]]:
    """Fresh random logins of ``roles`` for ``cluster_id``."""
    check_cluster_id(cluster_id)
    return {role: (username_for(cluster_id, role), secrets.token_urlsafe(24)) for role in roles}


def generate_taskmanagers(names: list[str]) -> dict[str, str]:
    return {name: secrets.token_urlsafe(24) for name in names}


def identity_of(cluster_id: str, username: str) -> str | None:
    """The TaskManager name a username of this cluster's pool stands for, else None."""
    prefix = username_for(cluster_id, "")
    name = username[len(prefix):] if username.startswith(prefix) else ""
    return name if taskmanager_index(name) else None


def _pool() -> list[str]:
    return [taskmanager_name(index) for index in range(1, TASKMANAGER_LOGINS + 1)]


def credentials_file(cluster_dir: Path) -> Path:
    return Path(cluster_dir) / FILE_NAME


def load(cluster_dir: Path, cluster_id: str) -> Credentials:
    """Read the credentials of an existing cluster; CredentialsError when there are none.

    Logins of roles the file predates are added to it first (see the module docstring);
    the broker accepts them from its next start."""
    path = credentials_file(cluster_dir)
    credentials = _read_logins(path, cluster_id)
    if _lacks_logins(credentials):
        credentials = _add_missing_logins(path, cluster_id)
    return credentials


def _lacks_logins(credentials: Credentials) -> bool:
    return (any(role not in credentials.logins for role in SHARED_ROLES)
            or any(name not in credentials.taskmanagers for name in _pool()))


def _read_logins(path: Path, cluster_id: str, complete: bool = True) -> Credentials:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CredentialsError(f"cluster {cluster_id!r} has no credentials yet: its broker "
                               "has never been started") from None
    except (OSError, ValueError) as error:
        raise CredentialsError(f"cannot read the credentials of cluster {cluster_id!r}: "
                               f"{error}") from None
    return _from_json(data, cluster_id)


@contextlib.contextmanager
def _locked(path: Path):  # type: ignore[no-untyped-def]
    with open(path.with_name(LOCK_NAME), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield


def _add_missing_logins(path: Path, cluster_id: str) -> Credentials:
    """Add the logins of missing roles and pool names, keeping every existing one; under
    an exclusive lock, re-reading first, so a racing process's additions are kept."""
    with _locked(path):
        old = _read_logins(path, cluster_id, complete=False)
        logins = dict(old.logins)
        logins.update(generate(cluster_id, tuple(r for r in SHARED_ROLES if r not in logins)))
        taskmanagers = dict(old.taskmanagers)
        taskmanagers.update(generate_taskmanagers(
            [name for name in _pool() if name not in taskmanagers]))
        credentials = Credentials(cluster_id, logins, taskmanagers, old.exported)
        _write_private(path, credentials, replace=True)
        return credentials


def hand_out_taskmanager(cluster_dir: Path, cluster_id: str) -> str:
    """A TaskManager login never handed out before, from the top of the pool, recorded
    as handed out: for a TaskManager on another machine, or one started by hand."""
    path = credentials_file(cluster_dir)
    load(cluster_dir, cluster_id)  # completes the pool first
    with _locked(path):
        credentials = _read_logins(path, cluster_id)
        free = [name for name in reversed(_pool()) if name not in credentials.exported]
        if not free:
            raise CredentialsError(
                f"all {TASKMANAGER_LOGINS} TaskManager logins of cluster {cluster_id!r} "
                "have been handed out")
        exported = {**credentials.exported,
                    free[0]: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        _write_private(path, Credentials(cluster_id, credentials.logins,
                                         credentials.taskmanagers, exported), replace=True)
        return free[0]


def load_or_create(cluster_dir: Path, cluster_id: str) -> Credentials:
    """The cluster's credentials, generated and saved (mode 0600) on first use.

    Creation is atomic and never overwrites: when two processes race, both end up with
    the logins of whichever wrote first.
    """
    check_cluster_id(cluster_id)
    directory = ensure_private_dir(Path(cluster_dir))
    path = credentials_file(directory)
    if not path.exists():
        _write_private(path, Credentials(cluster_id, generate(cluster_id),
                                         generate_taskmanagers(_pool())), replace=False)
    path.chmod(0o600)
    return load(directory, cluster_id)


def _write_private(path: Path, credentials: Credentials, *, replace: bool) -> None:
    """Write a whole new file (mode 0600) beside ``path``, then put it in place: with
    ``replace`` over the old one, else only if there is none (the first writer wins)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            json.dump(_to_json(credentials), stream, indent=2)
            stream.write("\n")
            stream.flush()
            os.fsync(stream.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            with contextlib.suppress(FileExistsError):  # another process was first: keep its
                os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _to_json(credentials: Credentials) -> dict:
    return {
        "version": _FORMAT_VERSION,
        "cluster_id": credentials.cluster_id,
        "logins": {role: {"username": user, "password": password}
                   for role, (user, password) in credentials.logins.items()},
        "taskmanagers": dict(credentials.taskmanagers),
        "exported": dict(credentials.exported),
    }


def _from_json(data: object, cluster_id: str, complete: bool = True) -> Credentials:
    """Version 1 files had one login shared by every TaskManager: it is dropped (a
    TaskManager now has a login of its own) and the pool added by ``load``."""
    try:
        version = data["version"]  # type: ignore[index]
        if version not in (1, _FORMAT_VERSION):
            raise CredentialsError(f"credentials file version {version!r} is not "
                                   f"{_FORMAT_VERSION}")
        stored_id = data["cluster_id"]  # type: ignore[index]
        logins = {role: (str(entry["username"]), str(entry["password"]))
                  for role, entry in data["logins"].items()  # type: ignore[index]
                  if role in SHARED_ROLES}
        taskmanagers = {str(name): str(password) for name, password
                        in data.get("taskmanagers", {}).items()  # type: ignore[union-attr]
                        if taskmanager_index(str(name))}
        exported = {str(name): str(when) for name, when
                    in data.get("exported", {}).items()  # type: ignore[union-attr]
                    if taskmanager_index(str(name))}
    except (KeyError, TypeError, AttributeError):
        raise CredentialsError(f"the credentials file of cluster {cluster_id!r} is "
                               "malformed") from None
    if stored_id != cluster_id:
        raise CredentialsError(f"the credentials file belongs to cluster {stored_id!r}, "
                               f"not {cluster_id!r}")
    if not complete:
        return _Partial(cluster_id, logins, taskmanagers, exported)
    try:
        return Credentials(cluster_id, logins, taskmanagers, exported)
    except CredentialsError:
        return _Partial(cluster_id, logins, taskmanagers, exported)


class _Partial(Credentials):
    """What an old or incomplete file holds, before ``load`` completes it."""

    def __post_init__(self) -> None:
        pass
