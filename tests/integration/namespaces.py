"""TaskManagers that share nothing with the JobManager but the broker, on one machine.

Each runs as its own OS process in a mount namespace of its own, set up as another
machine would be (``_SETUP`` does it inside the namespace, before the TaskManager runs):

1. ``unshare --mount --propagation private``: a private copy of the mount table, so
   nothing mounted below reaches this machine or the other TaskManagers;
2. a fresh tmpfs over each of the JobManager's clusterdeck folders (its home: config,
   data with the jobs' work dirs and the credentials, logs): the TaskManager sees them
   empty, and what it writes at the same paths (a job's work dir, as on another machine)
   lands on its own tmpfs;
3. a fresh tmpfs over a folder of its own, which holds its HOME, XDG folders, TMPDIR and
   working directory: its clusterdeck files go there through appdirs (CLUSTERDECK_HOME
   is not passed on), and the other TaskManagers see that folder empty;
4. what comes over standard input (a TaskManager's credentials file from ``clusterdeck
   credentials export``) is copied to ``$HOME/credentials.json`` (mode 0600, inside its
   tmpfs: on no shared disk), and the command is exec'd (same pid as the Popen):
   ``clusterdeck taskmanager --credentials FILE``, or any other (``start_in_namespace``:
   a standby JobManager of tests/integration/test_ha_machines.py).

Everything else (the test's input files and job files under pytest's tmp folder, the
venv, Java) stays visible to all, like a shared mount. The network is shared unless the
caller passes ``network``: the command that enters a network namespace of its own, on a
bridge (tests/integration/netns.py). On the shared network the broker (plain MQTT) and
the data services listen on loopback; ``taskmanager.data.tls = always`` gives a data
service the TLS it has beyond loopback.
Needs root and util-linux's ``unshare``; tests skip otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.config import paths
from tests.waiting import wait_for

CLI = [sys.executable, "-m", "clusterdeck.core.cli"]

# $1: the machine's own folder; $2: the mount options of the tmpfs over the folders
# to hide, which follow up to "--"; then the command. Runs as root inside the new
# namespace; `set -e`: a failed mount ends it before the command could write into a
# folder it shares.
_SETUP = r'''
set -eu
own=$1; elsewhere=$2; shift 2
while [ "$1" != "--" ]; do
    mkdir -p "$1"
    mount -t tmpfs -o "$elsewhere" clusterdeck-elsewhere "$1"
    shift
done
shift
mkdir -p "$own"
mount -t tmpfs -o mode=0700 clusterdeck-own "$own"
mkdir -p "$HOME" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_CACHE_HOME" "$XDG_STATE_HOME" \
    "$TMPDIR"
umask 077
cat > "$HOME/credentials.json"
cd "$HOME"
exec "$@" < /dev/null
'''


def skip_unless_namespaces() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mount namespaces need root and unshare (util-linux)")


@dataclass
class NamespacedTaskManager:
    """One TaskManager in its own mount namespace: ``id`` is its login's name, ``own``
    the folder (on this machine's paths) its tmpfs covers."""

    id: str
    process: subprocess.Popen[bytes]
    log: Path
    own: Path
    mount_namespace: str = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def sees(self, path: str | os.PathLike[str]) -> Path:
        """``path`` as this TaskManager sees it (through /proc/<pid>/root: its mounts)."""
        return Path(f"/proc/{self.pid}/root") / os.fspath(path).lstrip("/")

    def kill(self) -> None:
        """kill -9 of its process group, then of anything else left in its namespace (so
        the namespace, and its tmpfs, go away with it)."""
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        for pid in _processes_in(self.mount_namespace):
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(10)

    def output(self) -> str:
        return f"--- {self.id} ---\n" + self.log.read_text(errors="replace")[-4000:]


def jobmanager_folders() -> list[Path]:
    """Where clusterdeck keeps its files on this machine (core/config/paths.py): one
    CLUSTERDECK_HOME, as in tests, else appdirs' three folders."""
    home = os.environ.get(paths.HOME_ENV)
    return [Path(home)] if home else [paths.config_dir(), paths.data_dir(), paths.log_dir()]


def export_credentials(cluster: LocalCluster, host: str = "127.0.0.1") -> str:
    """A new TaskManager login, as ``clusterdeck credentials export`` writes it, naming the
    broker by ``host``."""
    done = subprocess.run(
        [*CLI, "--cluster", cluster.cluster_id, "credentials", "export", "--role",
         "taskmanager", "--host", host, "-o", "-"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def machine_environment(own: Path) -> dict[str, str]:
    """This process's environment as another machine's user would have it: no
    CLUSTERDECK_HOME, and HOME, XDG folders and TMPDIR of its own under ``own``."""
    env = {k: v for k, v in os.environ.items() if k != paths.HOME_ENV and k != "PWD"}
    env.update(HOME=str(own / "home"), XDG_CONFIG_HOME=str(own / "config"),
               XDG_DATA_HOME=str(own / "data"), XDG_CACHE_HOME=str(own / "cache"),
               XDG_STATE_HOME=str(own / "state"), TMPDIR=str(own / "tmp"))
    return env


def start_taskmanager(cluster: LocalCluster, own: Path, log: Path,
                      config: Mapping[str, object], *, writable_elsewhere: bool = True,
                      network: Sequence[str] = (), broker_host: str = "127.0.0.1"
                      ) -> NamespacedTaskManager:
    """One namespaced TaskManager; with ``writable_elsewhere`` False its machine has the
    JobManager's folder paths but may not write there (read-only), as user bob's
    machine has /home but no /home/alice he could create. ``network``: the command that
    enters its network namespace (tests/integration/netns.py; none: this machine's), in
    which it reaches the broker at ``broker_host``."""
    credentials = export_credentials(cluster, broker_host)
    settings = [arg for key, value in config.items() for arg in ("-D", f"{key}={value}")]
    return start_in_namespace(
        json.loads(credentials)["identity"],
        [*CLI, "taskmanager", *settings, "--credentials", str(credentials_path(own))],
        own, log, stdin=credentials, writable_elsewhere=writable_elsewhere, network=network)


def credentials_path(own: Path) -> Path:
    """Where ``_SETUP`` puts what the machine of folder ``own`` got on standard input."""
    return Path(machine_environment(own)["HOME"]) / "credentials.json"


def start_in_namespace(name: str, command: Sequence[str], own: Path, log: Path, *,
                       stdin: str = "", writable_elsewhere: bool = True,
                       network: Sequence[str] = ()) -> NamespacedTaskManager:
    """Run ``command`` (a clusterdeck command) as ``name`` on a "machine" of its own, set
    up by ``_SETUP``: the JobManager's folders hidden, HOME and the rest under ``own``,
    ``stdin`` in ``credentials_path(own)``. Returns once it is in its own namespace;
    killed here if it never gets there."""
    elsewhere = "mode=0700" if writable_elsewhere else "ro,mode=0755"
    hidden = [str(folder) for folder in jobmanager_folders()]
    own.mkdir(mode=0o700, parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*network, "unshare", "--mount", "--propagation", "private", "sh", "-c", _SETUP,
             f"namespaced-{name}", str(own), elsewhere, *hidden, "--", *command],
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            env=machine_environment(own), start_new_session=True)
    started = NamespacedTaskManager(name, process, log, own)
    try:
        assert process.stdin is not None
        with process.stdin:
            process.stdin.write(stdin.encode())
        ours = _mount_namespace(os.getpid())
        started.mount_namespace = wait_for(
            lambda: _namespace_if_entered(started, ours), 30,
            f"{name} in a mount namespace of its own")
    except BaseException:
        started.kill()  # not yet in the caller's hands, so not in its cleanup
        raise
    return started


def _namespace_if_entered(taskmanager: NamespacedTaskManager, ours: str) -> str:
    if taskmanager.process.poll() is not None:
        raise AssertionError(f"{taskmanager.id} ended at once:\n{taskmanager.output()}")
    namespace = _mount_namespace(taskmanager.pid)
    return namespace if namespace not in ("", ours) else ""


def _mount_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return ""


def _processes_in(namespace: str) -> list[int]:
    if not namespace:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _mount_namespace(int(entry)) == namespace:
            found.append(int(entry))
    return found


@contextmanager
def namespaced_taskmanagers(cluster: LocalCluster, count: int, folder: Path,
                            config: Mapping[str, object], *,
                            overrides: Sequence[Mapping[str, object]] = (),
                            writable_elsewhere: bool = True,
                            networks: Sequence[Sequence[str]] = (),
                            broker_host: str = "127.0.0.1"
                            ) -> Iterator[list[NamespacedTaskManager]]:
    """Start ``count`` namespaced TaskManagers of ``cluster`` with ``config`` (as ``-D``),
    the n-th also with ``overrides[n]`` when given, on the network ``networks[n]`` enters
    when given; their own folders and logs in ``folder``. All are killed on exit, whatever
    happened. ``writable_elsewhere``, ``broker_host``: see ``start_taskmanager``."""
    skip_unless_namespaces()
    started: list[NamespacedTaskManager] = []
    try:
        for index in range(count):
            extra = overrides[index] if index < len(overrides) else {}
            started.append(start_taskmanager(cluster, folder / f"machine-{index}",
                                             folder / f"taskmanager-{index}.log",
                                             {**config, **extra},
                                             writable_elsewhere=writable_elsewhere,
                                             network=networks[index] if networks else (),
                                             broker_host=broker_host))
        yield started
    finally:
        for taskmanager in started:
            taskmanager.kill()


def wait_registered(watcher: Any, taskmanagers: Sequence[NamespacedTaskManager]) -> None:
    """Until every one of ``taskmanagers`` registered; else fail with what they printed."""
    try:
        watcher.wait_registered([t.id for t in taskmanagers], timeout=90)
    except AssertionError:
        raise AssertionError("\n".join(t.output() for t in taskmanagers)) from None
