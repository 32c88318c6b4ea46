"""TaskManagers that share nothing with the JobManager but the broker, on one machine.

Each runs as its own OS process inside its own mount namespace (``unshare --mount``),
where a fresh tmpfs covers the clusterdeck home: it sees none of the JobManager's
folders (job work dirs, credentials, logs) nor those of the other namespaced
TaskManagers, as on another machine, and joins with a credentials file made by
``credentials export`` as a user on another machine would. Files outside the home (the
test's inputs, its job files) stay visible to all, like a read-only shared mount. The
network is shared: the data services listen on loopback. Needs root and util-linux's
``unshare``; tests skip otherwise.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterdeck.broker import exported
from clusterdeck.core.client.localcluster import LocalCluster


def skip_unless_namespaces() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mount namespaces need root and unshare (util-linux)")


@dataclass
class NamespacedTaskManager:
    """One TaskManager in its own mount namespace: ``id`` is its login's name."""

    id: str
    process: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """kill -9 of its whole process group (the TaskManager and its Spark JVM)."""
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@contextmanager
def namespaced_taskmanagers(cluster: LocalCluster, count: int, folder: Path,
                            config: Mapping[str, object]
                            ) -> Iterator[list[NamespacedTaskManager]]:
    """Start ``count`` namespaced TaskManagers of ``cluster`` (``config`` as ``-D``), with
    their credentials files and logs in ``folder``; killed on exit, whatever happened."""
    skip_unless_namespaces()
    home = os.environ["CLUSTERDECK_HOME"]
    started: list[NamespacedTaskManager] = []
    try:
        for index in range(count):
            credentials = exported.export(cluster.cluster_dir, cluster.cluster_id,
                                          "taskmanager", "127.0.0.1")
            credentials_file = folder / f"taskmanager-{index}.json"
            exported.write(credentials, credentials_file)
            settings = [arg for key, value in config.items() for arg in ("-D", f"{key}={value}")]
            command = [sys.executable, "-m", "clusterdeck.core.cli", "taskmanager",
                       "--credentials", str(credentials_file), *settings]
            # The mount and exec happen inside the new namespace; the tmpfs hides the home
            # from this process only.
            script = 'mount -t tmpfs clusterdeck-tm "$1" && shift && exec "$@"'
            log = folder / f"taskmanager-{index}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                     "namespaced-taskmanager", home, *command],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True)
            started.append(NamespacedTaskManager(credentials.identity, process, log))
        yield started
    finally:
        for taskmanager in started:
            taskmanager.kill()
