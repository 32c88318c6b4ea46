"""Run Eclipse Mosquitto as the cluster's broker: its files, then an exec into it.

Mosquitto run as root drops to user ``mosquitto`` after reading its config, and a
process that changes its uid loses its parent-death signal (PR_SET_PDEATHSIG): the
supervisor's guarantee that children die with it would silently stop holding for the
broker. ``user root`` keeps a root-run Mosquitto (verified on 2.0.11: the process
stays uid 0 and still dies with its parent); run as anyone else it never switches
user. Either way it runs as whoever wrote its files, so 0600 files are readable.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pwd
import secrets
import shutil
import sys
from pathlib import Path
from typing import NoReturn

from clusterdeck.broker.acl import mosquitto_acl
from clusterdeck.broker.credentials import Credentials
from clusterdeck.broker.limits import BrokerLimits
from clusterdeck.broker.tls import TlsFiles

CONF_NAME = "mosquitto.conf"
PASSWORD_NAME = "mosquitto.passwd"
ACL_NAME = "mosquitto.acl"

_FALLBACK_DIRS = (Path("/usr/sbin"), Path("/usr/local/sbin"), Path("/usr/bin"),
                  Path("/usr/local/bin"))


class MosquittoError(RuntimeError):
    """Mosquitto or its tools are missing or refused their input."""


def find_binary(name: str = "mosquitto") -> Path | None:
    """The installed ``name``: on PATH, else in the sbin dirs PATH often lacks."""
    found = shutil.which(name)
    if found:
        return Path(found)
    for directory in _FALLBACK_DIRS:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def is_installed() -> bool:
    """Only the broker is needed: its password file is written here, not by
    mosquitto_passwd (which would put every password on a command line)."""
    return find_binary("mosquitto") is not None


_MOSQUITTO_HINTS = {
    "linux": "sudo apt install mosquitto (Debian/Ubuntu) or sudo dnf install mosquitto "
             "(Fedora)",
    "darwin": "brew install mosquitto",
    "win32": "the installer from mosquitto.org (add its folder to PATH)",
}


def check_mosquitto(installed: bool | None = None) -> str | None:
    """None when Mosquitto is there, else the notice for the amqtt fallback."""
    if is_installed() if installed is None else installed:
        return None
    platform = "linux" if sys.platform.startswith("linux") else sys.platform
    return ("Mosquitto is not installed; clusterdeck uses its built-in amqtt broker "
            "(slower, fine for a local cluster). For Mosquitto: "
            f"{_MOSQUITTO_HINTS.get(platform, 'see mosquitto.org')}.")


def config_text(*, host: str, port: int, password_file: Path, acl_file: Path,
                limits: BrokerLimits, as_root: bool | None = None,
                tls: TlsFiles | None = None) -> str:
    """The mosquitto.conf of one cluster broker; with ``tls`` its listener speaks TLS only."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    lines = [
        "# Written by clusterdeck for this cluster; rewritten at every broker start.",
        "per_listener_settings false",
    ]
    if as_root:
        lines.append("# stay root: switching user would drop the parent-death signal")
        lines.append(f"user {pwd.getpwuid(0).pw_name}")
    lines += [
        f"listener {port} {host}",
    ]
    if tls is not None:
        # These follow the listener line: they configure that listener. TLS 1.2 is the
        # oldest version still considered safe; no client certificate is asked for.
        lines += [
            f"cafile {tls.ca_file}",
            f"certfile {tls.cert_file}",
            f"keyfile {tls.key_file}",
            "tls_version tlsv1.2",
        ]
    lines += [
        "allow_anonymous false",
        f"password_file {password_file}",
        f"acl_file {acl_file}",
        "set_tcp_nodelay true",
        f"max_queued_messages {limits.max_queued_messages}",
        f"max_inflight_messages {limits.max_inflight_messages}",
        f"message_size_limit {limits.message_size_limit}",
        f"max_packet_size {limits.max_packet_size}",
        "persistence false",
        "log_dest stdout",
        "log_timestamp_format %Y-%m-%dT%H:%M:%S",
    ]
    return "\n".join(lines) + "\n"


def acl_text(credentials: Credentials) -> str:
    """Each login gets what broker/acl.py's table grants its role, and nothing else."""
    return mosquitto_acl(credentials.cluster_id, list(credentials.all_logins()))


# Mosquitto 2.0's own password hash ($7$): PBKDF2-HMAC-SHA512 over a 12-byte salt,
# 64 bytes out, salt and hash in standard base64 with padding; 101 iterations is
# mosquitto_passwd's default (src/password_mosq.h and security_default.c of 2.0.11,
# whose parser refuses any other salt or hash length).
PBKDF2_ITERATIONS = 101
_SALT_BYTES = 12
_HASH_BYTES = 64


def password_hash(password: str, *, salt: bytes | None = None,
                  iterations: int = PBKDF2_ITERATIONS) -> str:
    """``$7$<iterations>$<salt>$<hash>``, the form mosquitto_passwd writes."""
    salt = secrets.token_bytes(_SALT_BYTES) if salt is None else salt
    if len(salt) != _SALT_BYTES:
        raise ValueError(f"a Mosquitto salt has {_SALT_BYTES} bytes, not {len(salt)}")
    digest = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations,
                                 _HASH_BYTES)
    return (f"$7${iterations}${base64.b64encode(salt).decode('ascii')}"
            f"${base64.b64encode(digest).decode('ascii')}")


def write_password_file(path: Path, credentials: Credentials) -> None:
    """``username:$7$...`` for every login, mode 0600, replacing the file whole.

    Hashed here rather than by ``mosquitto_passwd -b``: that puts each password in the
    tool's command line, readable by every local user in /proc/<pid>/cmdline."""
    _write_private(path, "".join(f"{username}:{password_hash(password)}\n"
                                 for username, password in credentials.items()))


def _write_private(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.replace(temporary, path)


def write_files(broker_dir: Path, *, host: str, port: int, credentials: Credentials,
                limits: BrokerLimits, tls: TlsFiles | None = None) -> Path:
    """Write the config, password and ACL files into ``broker_dir``; return the config."""
    password_file = broker_dir / PASSWORD_NAME
    acl_file = broker_dir / ACL_NAME
    conf_file = broker_dir / CONF_NAME
    write_password_file(password_file, credentials)
    _write_private(acl_file, acl_text(credentials))
    _write_private(conf_file, config_text(host=host, port=port, password_file=password_file,
                                          acl_file=acl_file, limits=limits, tls=tls))
    return conf_file


def exec_mosquitto(conf_file: Path) -> NoReturn:
    """Replace this process by Mosquitto, so the supervised pid is the broker itself."""
    binary = find_binary("mosquitto")
    if binary is None:
        raise MosquittoError("mosquitto is not installed")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, [str(binary), "-c", str(conf_file)])
