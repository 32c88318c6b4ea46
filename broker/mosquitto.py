"""Run Eclipse Mosquitto as the cluster's broker: its files, then an exec into it.

Mosquitto run as root drops to user ``mosquitto`` after reading its config, and a
process that changes its uid loses its parent-death signal (PR_SET_PDEATHSIG): the
supervisor's guarantee that children die with it would silently stop holding for the
broker. ``user root`` keeps a root-run Mosquitto (verified on 2.0.11: the process
stays uid 0 and still dies with its parent); run as anyone else it never switches
user. Either way it runs as whoever wrote its files, so 0600 files are readable.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

from clusterdeck.broker.acl import cluster_topic_filter
from clusterdeck.broker.credentials import Credentials
from clusterdeck.broker.limits import BrokerLimits

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
    return find_binary("mosquitto") is not None and find_binary("mosquitto_passwd") is not None


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
                limits: BrokerLimits, as_root: bool | None = None) -> str:
    """The mosquitto.conf of one cluster broker."""
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
    """Each user of the cluster may read and write under its cluster's topics only."""
    topics = cluster_topic_filter(credentials.cluster_id)
    blocks = [f"user {username}\ntopic readwrite {topics}\n"
              for username in credentials.usernames()]
    return "\n".join(blocks)


def write_password_file(path: Path, credentials: Credentials,
                        passwd_binary: Path | None = None) -> None:
    """Hash every login into ``path`` with mosquitto_passwd, replacing the file whole."""
    binary = passwd_binary or find_binary("mosquitto_passwd")
    if binary is None:
        raise MosquittoError("mosquitto_passwd is not installed")
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        for username, password in credentials.items():
            result = subprocess.run([str(binary), "-b", str(temporary), username, password],
                                    capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise MosquittoError(f"mosquitto_passwd failed for {username}: "
                                     f"{(result.stderr or result.stdout).strip()}")
        temporary.chmod(0o600)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _write_private(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.replace(temporary, path)


def write_files(broker_dir: Path, *, host: str, port: int, credentials: Credentials,
                limits: BrokerLimits) -> Path:
    """Write the config, password and ACL files into ``broker_dir``; return the config."""
    password_file = broker_dir / PASSWORD_NAME
    acl_file = broker_dir / ACL_NAME
    conf_file = broker_dir / CONF_NAME
    write_password_file(password_file, credentials)
    _write_private(acl_file, acl_text(credentials))
    _write_private(conf_file, config_text(host=host, port=port, password_file=password_file,
                                          acl_file=acl_file, limits=limits))
    return conf_file


def exec_mosquitto(conf_file: Path) -> NoReturn:
    """Replace this process by Mosquitto, so the supervised pid is the broker itself."""
    binary = find_binary("mosquitto")
    if binary is None:
        raise MosquittoError("mosquitto is not installed")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, [str(binary), "-c", str(conf_file)])
