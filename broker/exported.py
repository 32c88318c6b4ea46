"""An exported credentials file: everything a process on another machine needs to join.

``clusterdeck credentials export`` writes one; ``clusterdeck taskmanager --credentials
FILE`` reads it. It replaces ``--broker mqtt://user:password@host``, which leaves the
password in the process's command line (``/proc/<pid>/cmdline``, ``ps``) for every user
of that machine to read. The file holds the broker URL as reached from elsewhere, the
cluster id, one login and, when the broker speaks TLS, the cluster's CA certificate
inline: a single file to copy, no CA file to keep next to it. A TaskManager's login is
its own (``identity``, its TaskManager id): each export hands out a new one.

It is JSON, written with mode 0600: it holds a password.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from clusterdeck.broker.acl import check_cluster_id
from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import known_connection, role_login
from clusterdeck.broker.credentials import ROLES, hand_out_taskmanager
from clusterdeck.broker.tls import SERVER_CERT_NAME, certificate_names, covers, tls_dir

FORMAT = "clusterdeck-credentials"
_FORMAT_VERSION = 1
STDIO = "-"
# A file is a few kilobytes (a CA of a few hundred bytes, one login); one read from another
# machine, or from standard input, is bounded well above that so a wrong file is not
# read whole into memory.
MAX_FILE_BYTES = 64 * 1024
_MAX_FIELD_CHARS = 256  # a URL, a user name, a password, an id


class ExportedCredentialsError(ValueError):
    """An exported credentials file is missing, unreadable or not one."""


@dataclass(frozen=True)
class ExportedCredentials:
    """One role's way into one cluster's broker; ``address`` carries login and CA."""

    cluster_id: str
    role: str
    address: BrokerAddress
    identity: str = ""  # who the login speaks as; the role's name when shared

    def __post_init__(self) -> None:
        if not self.identity:
            object.__setattr__(self, "identity", self.role)
        if self.address.username is None or self.address.password is None:
            raise ExportedCredentialsError("exported credentials need a username and a "
                                           "password")

    def to_json(self) -> str:
        data = {
            "format": FORMAT,
            "version": _FORMAT_VERSION,
            "cluster_id": self.cluster_id,
            "role": self.role,
            "identity": self.identity or self.role,
            "broker_url": self.address.without_credentials().url(),
            "username": self.address.username,
            "password": self.address.password,
            "ca_certificate": self.address.ca_pem,
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ExportedCredentials:
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ExportedCredentialsError(f"not a credentials file (not JSON: {error})"
                                           ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ExportedCredentialsError("not a clusterdeck credentials file (made by "
                                           "`clusterdeck credentials export`)")
        if data.get("version") != _FORMAT_VERSION:
            raise ExportedCredentialsError(f"credentials file version {data.get('version')!r}"
                                           f" is not {_FORMAT_VERSION}")
        try:
            role = _text(data, "role")
            if role not in ROLES:
                raise ExportedCredentialsError(f"the credentials file's role {role!r} is "
                                               f"none of {', '.join(ROLES)}")
            cluster_id = check_cluster_id(_text(data, "cluster_id"))
            address = BrokerAddress.parse(_text(data, "broker_url"))
            ca_pem = data.get("ca_certificate")
            if ca_pem is not None:
                if not address.tls:
                    raise ExportedCredentialsError("the credentials file has a CA "
                                                   "certificate but a plain mqtt:// URL")
                if not isinstance(ca_pem, str) or "BEGIN CERTIFICATE" not in ca_pem:
                    raise ExportedCredentialsError("the credentials file's ca_certificate "
                                                   "is not a PEM certificate")
                address = address.with_tls(ca_pem)
            address = address.with_credentials(_text(data, "username"),
                                               _text(data, "password"))
            identity = _text(data, "identity") if data.get("identity") else role
            return cls(cluster_id, role, address, identity)
        except KeyError as missing:
            raise ExportedCredentialsError(f"the credentials file lacks {missing}") from None
        except ExportedCredentialsError:
            raise
        except ValueError as error:
            raise ExportedCredentialsError(f"the credentials file is malformed: {error}"
                                           ) from None


def _text(data: dict, key: str) -> str:
    """The field ``key``: a non-empty string of bounded length (KeyError when absent)."""
    value = data[key]
    if not isinstance(value, str) or not value or len(value) > _MAX_FIELD_CHARS:
        raise ExportedCredentialsError(f"the credentials file's {key} is not a string of "
                                       f"1-{_MAX_FIELD_CHARS} characters")
    return value


def export(cluster_dir: Path, cluster_id: str, role: str, host: str) -> ExportedCredentials:
    """``role``'s login to this cluster's broker, reached as ``host`` from elsewhere.

    The port and TLS come from the running (or last) broker's ``broker.json``. With TLS
    the broker's certificate must name ``host``, or the other machine's hostname check
    would refuse it: that is an error here rather than a puzzle there.
    """
    kind, local = known_connection(cluster_dir, cluster_id)
    if kind == "external":
        raise ExportedCredentialsError("the cluster uses an external broker "
                                       "(broker.kind = external): its logins are not "
                                       "clusterdeck's to export")
    identity = hand_out_taskmanager(cluster_dir, cluster_id) if role == "taskmanager" \
        else role
    address = BrokerAddress(host, local.port,
                            *role_login(cluster_dir, cluster_id, role, identity))
    if local.tls:
        cert_file = tls_dir(cluster_dir) / SERVER_CERT_NAME
        names = certificate_names(cert_file)
        if not covers(names, host):
            raise ExportedCredentialsError(
                f"the broker's certificate does not name {host!r}, so a TaskManager "
                f"connecting to it would refuse the broker; use one of its names with "
                f"--host ({', '.join(names)}), or set broker.bind to that address and "
                "restart the cluster")
        address = address.with_tls(local.ca_pem)
    return ExportedCredentials(cluster_id, role, address, identity)


def write(credentials: ExportedCredentials, destination: str | Path,
          stdout: IO[str] | None = None) -> None:
    """Write ``credentials`` to ``destination`` (mode 0600, replaced whole), or to
    standard output when it is ``-``."""
    text = credentials.to_json()
    if str(destination) == STDIO:
        (stdout or sys.stdout).write(text)
        return
    path = Path(destination)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    # Created 0600 from the start: a password must never sit in a readable file, even
    # for the moment between writing and chmod.
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def read(source: str | Path, stdin: IO[str] | None = None) -> ExportedCredentials:
    """Read an exported file, or standard input when ``source`` is ``-``; one of more than
    MAX_FILE_BYTES is refused unread past that."""
    try:
        if str(source) == STDIO:
            text = (stdin or sys.stdin).read(MAX_FILE_BYTES + 1)
        else:
            with open(source, encoding="utf-8") as stream:
                text = stream.read(MAX_FILE_BYTES + 1)
    except (OSError, UnicodeDecodeError) as error:
        raise ExportedCredentialsError(f"cannot read the credentials file: {error}") from None
    if len(text) > MAX_FILE_BYTES:
        raise ExportedCredentialsError(f"not a credentials file (larger than "
                                       f"{MAX_FILE_BYTES // 1024} KiB)")
    return ExportedCredentials.from_json(text)


def readable_by_others(path: str | Path) -> bool:
    """True when users other than the owner may read ``path`` (its password)."""
    if str(path) == STDIO:
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRGRP | stat.S_IROTH))
