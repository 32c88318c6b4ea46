"""The ZooKeeper server ``clusterdeck up --ha zookeeper`` runs when no quorum is given.

A standalone server (the system's package, installed by scripts/setup.sh) with its
``zoo.cfg`` and data in ``<cluster dir>/zookeeper/``, on loopback and a free port, run by
the supervisor like any other child (restarted when it dies, stopped with the cluster).
Its tickTime is 0.5 s, so it grants sessions down to 1 s: the default
``ha.zookeeper.session-timeout`` of 2 s is what a killed leader's successor waits.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import time
from pathlib import Path

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_MS = 500
# Debian's package, then the lib/ folder of an unpacked release (ZOOKEEPER_HOME).
_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/lib/*.jar")


class ZooKeeperMissingError(RuntimeError):
    """No ZooKeeper server on this machine: install it (scripts/setup.sh) or set
    ha.zookeeper.quorum."""


def classpath() -> str:
    home = os.environ.get("ZOOKEEPER_HOME")
    patterns = ((f"{home}/lib/*.jar", f"{home}/*.jar") if home else ()) + _JARS
    for pattern in patterns:
        jars = sorted(glob.glob(pattern))
        if jars:
            return os.pathsep.join(jars)
    raise ZooKeeperMissingError(
        "no ZooKeeper server found (the system package `zookeeper`, or ZOOKEEPER_HOME): "
        "install it with scripts/setup.sh, or give ha.zookeeper.quorum")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_config(directory: Path, port: int) -> Path:
    """``zoo.cfg`` of a standalone server with its data under ``directory``."""
    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / "zoo.cfg"
    path.write_text(f"tickTime={TICK_MS}\ninitLimit=10\nsyncLimit=5\n"
                    f"minSessionTimeout={2 * TICK_MS}\ndataDir={data}\n"
                    f"clientPort={port}\nclientPortAddress=127.0.0.1\n"
                    "admin.enableServer=false\n", encoding="utf-8")
    return path


def server_argv(config_path: Path) -> tuple[str, ...]:
    java = shutil.which("java") or "java"
    return (java, "-Xmx256m", "-cp", classpath(), MAIN_CLASS, str(config_path))


def wait_serving(port: int, timeout: float) -> None:
    """Until the server accepts connections on ``port``; TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the local ZooKeeper server did not listen on port "
                                   f"{port} within {timeout:g} s") from None
            time.sleep(0.1)
