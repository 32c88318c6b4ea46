"""Generated per-cluster broker logins, one per role, kept in the cluster's private dir.

Every cluster gets its own random passwords the first time its broker starts, so a
process of one cluster (or any other local program) cannot join another cluster's
broker. The file is the single source: the broker builds its password file from it
and every local client reads its own role's login from it. What each role may do on
the broker is in broker/acl.py.

A file written before a role existed (``observer`` came later) gets the missing logins
added the next time it is read, under an exclusive lock so that two processes doing it at
once agree on one password.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clusterdeck.broker.acl import check_cluster_id

# jobmanager: everything in the cluster; taskmanager: the login handed to other machines;
# client: submits and follows jobs; observer: reads the cluster's state and events only.
ROLES: tuple[str, ...] = ("jobmanager", "taskmanager", "client", "observer")
FILE_NAME = "credentials.json"
LOCK_NAME = ".credentials.lock"
_FORMAT_VERSION = 1


class CredentialsError(RuntimeError):
    """The credentials file is missing, unreadable or belongs to another cluster."""


@dataclass(frozen=True)
class Credentials:
    """One (username, password) per role of one cluster; passwords never appear in repr."""

    cluster_id: str
    logins: Mapping[str, tuple[str, str]] = field(repr=False)

    def __post_init__(self) -> None:
        missing = [role for role in ROLES if role not in self.logins]
        if missing:
            raise CredentialsError(f"credentials of cluster {self.cluster_id!r} lack the "
                                   f"role(s) {', '.join(missing)}")

    def for_role(self, role: str) -> tuple[str, str]:
        """The (username, password) a process of ``role`` connects with."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r} (known: {', '.join(ROLES)})")
        return self.logins[role]

    def usernames(self) -> list[str]:
        return [self.logins[role][0] for role in ROLES]

    def items(self) -> list[tuple[str, str]]:
        """Every (username, password) pair, in role order: what the broker must accept."""
        return [self.logins[role] for role in ROLES]


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` readable by its owner only: it holds credentials."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def username_for(cluster_id: str, role: str) -> str:
    return f"cd-{cluster_id}-{role}"


def generate(cluster_id: str, roles: tuple[str, ...] = ROLES) -> dict[str, tuple[str, str]]:
    """Fresh random logins of ``roles`` for ``cluster_id``."""
    check_cluster_id(cluster_id)
    return {role: (username_for(cluster_id, role), secrets.token_urlsafe(24)) for role in roles}


def credentials_file(cluster_dir: Path) -> Path:
    return Path(cluster_dir) / FILE_NAME


def load(cluster_dir: Path, cluster_id: str) -> Credentials:
    """Read the credentials of an existing cluster; CredentialsError when there are none.

    Logins of roles the file predates are added to it first (see the module docstring);
    the broker accepts them from its next start."""
    path = credentials_file(cluster_dir)
    logins = _read_logins(path, cluster_id)
    if any(role not in logins for role in ROLES):
        logins = _add_missing_roles(path, cluster_id)
    return Credentials(cluster_id, logins)


def _read_logins(path: Path, cluster_id: str) -> dict[str, tuple[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CredentialsError(f"cluster {cluster_id!r} has no credentials yet: its broker "
                               "has never been started") from None
    except (OSError, ValueError) as error:
        raise CredentialsError(f"cannot read the credentials of cluster {cluster_id!r}: "
                               f"{error}") from None
    return _from_json(data, cluster_id)


def _add_missing_roles(path: Path, cluster_id: str) -> dict[str, tuple[str, str]]:
    """Add the logins of missing roles, keeping every existing one; under an exclusive
    lock, re-reading first, so a racing process's additions are kept, not replaced."""
    with open(path.with_name(LOCK_NAME), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        logins = _read_logins(path, cluster_id)
        missing = tuple(role for role in ROLES if role not in logins)
        if missing:
            logins.update(generate(cluster_id, missing))
            _write_private(path, Credentials(cluster_id, logins), replace=True)
        return logins


def load_or_create(cluster_dir: Path, cluster_id: str) -> Credentials:
    """The cluster's credentials, generated and saved (mode 0600) on first use.

    Creation is atomic and never overwrites: when two processes race, both end up with
    the logins of whichever wrote first.
    """
    check_cluster_id(cluster_id)
    directory = ensure_private_dir(Path(cluster_dir))
    path = credentials_file(directory)
    if not path.exists():
        _write_private(path, Credentials(cluster_id, generate(cluster_id)), replace=False)
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
    }


def _from_json(data: object, cluster_id: str) -> dict[str, tuple[str, str]]:
    try:
        if data["version"] != _FORMAT_VERSION:  # type: ignore[index]
            raise CredentialsError(f"credentials file version {data['version']!r} is not "  # type: ignore[index]
                                   f"{_FORMAT_VERSION}")
        stored_id = data["cluster_id"]  # type: ignore[index]
        logins = {role: (str(entry["username"]), str(entry["password"]))
                  for role, entry in data["logins"].items()}  # type: ignore[index]
    except (KeyError, TypeError, AttributeError):
        raise CredentialsError(f"the credentials file of cluster {cluster_id!r} is "
                               "malformed") from None
    if stored_id != cluster_id:
        raise CredentialsError(f"the credentials file belongs to cluster {stored_id!r}, "
                               f"not {cluster_id!r}")
    return logins
