"""A standby JobManager on another "machine" takes over (docs/ha.md, "A standby on another
machine").

Machine one is ``clusterdeck up --ha zookeeper`` run as its own process: its supervisor
(a LocalCluster in that process) runs the broker, ZooKeeper, one JobManager and two
TaskManagers. Machine two is a JobManager in a mount namespace of its own
(tests/integration/namespaces.py): machine one's clusterdeck folders hidden under tmpfs,
its own HOME; it shares only the broker, ZooKeeper and ``ha.storage-dir`` (a folder under
pytest's tmp path, as an NFS mount would be). Machine one's supervisor is stopped with
SIGSTOP, so it cannot start its JobManager again, and that JobManager is killed with
SIGKILL mid-job: machine two must lead, recover the job from the shared folder and finish
it exactly, for the ``clusterdeck submit`` that submitted it. Resumed, machine one's
supervisor starts its JobManager again, which stands by.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import pytest

from clusterdeck.broker.connection import connection_file
from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.ha import zkserver
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import RpcError
from tests.integration.clusters import FAST_HEARTBEATS, QUICK_RESTARTS
from tests.integration.namespaces import (
    CLI,
    NamespacedTaskManager,
    credentials_path,
    skip_unless_namespaces,
    start_in_namespace,
)
from tests.integration.test_ha import EXPECTED_SUMS, SLOW_SUMS, TAKEOVER_BOUND
from tests.integration.test_up import clusterdeck
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

SETTINGS = {**FAST_HEARTBEATS, **QUICK_RESTARTS, "restart-strategy.fixed-delay.attempts": 5}


def defines(settings: dict[str, object]) -> list[str]:
    return [arg for key, value in settings.items() for arg in ("-D", f"{key}={value}")]


@contextmanager
def first_machine(cluster_id: str, shared: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``clusterdeck up`` of one JobManager and two TaskManagers with ha.mode zookeeper and
    ``shared`` as ha.storage-dir, its supervisor a process of its own (one the test can
    stop); afterwards it is resumed (SIGCONT) and stopped with SIGINT, killed with every
    child if that does not end it within a minute, whatever happened."""
    with log.open("wb") as out:
        up = subprocess.Popen(
            clusterdeck("up", "--cluster", cluster_id, "--ha", "zookeeper", "--jobmanagers",
                        "1", "--taskmanagers", "2", "--slots", "2",
                        *defines({**SETTINGS, "ha.storage-dir": shared})),
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield up
    finally:
        children = []
        with suppress(psutil.Error, ProcessLookupError):
            children = psutil.Process(up.pid).children(recursive=True)
            os.kill(up.pid, signal.SIGCONT)
            up.send_signal(signal.SIGINT)
        with suppress(subprocess.TimeoutExpired):
            up.wait(60)
        for process in [*children, *([psutil.Process(up.pid)] if up.poll() is None else [])]:
            with suppress(psutil.Error):
                process.kill()
        up.wait(10)


def supervised(up: subprocess.Popen[bytes], role: str) -> psutil.Process | None:
    """The supervisor's child running ``role`` (its command line names it, or the
    program it became: mosquitto, ZooKeeper's Java main class), if any."""
    became = {"broker": "mosquitto", "zookeeper": zkserver.MAIN_CLASS}.get(role)
    for child in psutil.Process(up.pid).children():
        with suppress(psutil.Error):
            argv = child.cmdline()
            if role in argv or (became and any(arg.endswith(became) for arg in argv)):
                return child
    return None


def jobmanager_login(cluster_id: str) -> str:
    """Machine one's JobManager login, broker address and CA, as ``credentials export
    --role jobmanager`` writes them for a standby on another machine (docs/ha.md)."""
    done = subprocess.run([*CLI, "--cluster", cluster_id, "credentials", "export", "--role",
                           "jobmanager", "--host", "127.0.0.1", "-o", "-"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["role"] == "jobmanager"
    return done.stdout


def zookeeper_quorum(cluster_dir: Path) -> str:
    """The client address of machine one's ZooKeeper server, from its zoo.cfg."""
    config = (cluster_dir / "zookeeper" / "zoo.cfg").read_text()
    port = re.search(r"^clientPort=(\d+)$", config, re.MULTILINE)
    assert port, config
    return f"127.0.0.1:{port.group(1)}"


def leader(client: JobClient) -> p.LeaderInfo:
    return client.leader(30)


def overview(client: JobClient) -> p.ClusterOverview | None:
    try:
        return client.cluster_overview(timeout=2.0)
    except RpcError:  # no leader answering yet
        return None


def test_a_standby_on_another_machine_takes_over_and_finishes_the_job(tmp_path: Path) -> None:
    skip_unless_namespaces()
    cluster_id = f"machines-{uuid.uuid4().hex[:6]}"
    cluster_dir = paths.cluster_dir(cluster_id)
    shared = tmp_path / "shared"  # on both machines, as an NFS mount would be
    shared.mkdir()
    standby: NamespacedTaskManager | None = None
    submit: subprocess.Popen[bytes] | None = None
    with first_machine(cluster_id, shared, tmp_path / "up.log") as up:
        wait_for(lambda: connection_file(cluster_dir).is_file() or up.poll() is not None,
                 60, "machine one's broker started")
        client = JobClient(Config({"cluster.id": cluster_id}), connect_timeout=60)
        try:
            first = wait_for(lambda: (o := overview(client)) and len(
                [t for t in o.taskmanagers if t.state is p.TaskManagerState.REGISTERED]) == 2
                and o, 90, "machine one's leader with two registered TaskManagers")
            old = leader(client)
            jobmanager = supervised(up, "jobmanager")
            assert jobmanager is not None and old.pid == jobmanager.pid
            assert old.ha_mode == "zookeeper" and first.leader_epoch == old.epoch >= 1

            machine_two = tmp_path / "machine-2"
            standby = start_in_namespace(
                "jobmanager-elsewhere",
                [*CLI, "jobmanager", "--ha", "zookeeper", "--credentials",
                 str(credentials_path(machine_two)),
                 *defines({**SETTINGS, "ha.zookeeper.quorum": zookeeper_quorum(cluster_dir),
                           "ha.storage-dir": shared})],
                machine_two, tmp_path / "jobmanager-elsewhere.log",
                stdin=jobmanager_login(cluster_id))
            wait_for(lambda: "standing by" in standby.log.read_text(errors="replace"), 60,
                     "machine two's JobManager standing by")
            # Machine two cannot read machine one's cluster folder: logins, run
            # configuration, recording, its job store had it none of its own.
            assert (cluster_dir / "credentials.json").exists()
            assert not standby.sees(cluster_dir / "credentials.json").exists()
            assert standby.sees(shared).is_dir()
            host = socket.gethostname()  # one host: the machines differ in their mounts
            wait_for(lambda: (o := overview(client)) and o.standbys == (
                f"pid {standby.pid} on host {host}",), 60, "machine two's JobManager standing by")

            marks = tmp_path / "marks.txt"
            job_file = tmp_path / "slow_sums.py"
            job_file.write_text(SLOW_SUMS.format(marks=str(marks)))
            output = tmp_path / "submit.out"
            with output.open("wb") as sink:
                submit = subprocess.Popen(clusterdeck("submit", "--cluster", cluster_id,
                                                      str(job_file)),
                                          stdout=sink, stderr=sink)
            wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 4, 180,
                     "the job's first records mapped")

            # Machine one goes dark for its JobManager: the supervisor stopped (no
            # restart), the broker and ZooKeeper, processes of their own, keep serving.
            broker, zookeeper = supervised(up, "broker"), supervised(up, "zookeeper")
            assert broker and zookeeper
            assert {broker.pid, zookeeper.pid, jobmanager.pid}.isdisjoint({up.pid})
            os.kill(up.pid, signal.SIGSTOP)
            killed_at = time.monotonic()
            jobmanager.kill()
            new = wait_for(lambda: (lead := leader(client)).epoch > old.epoch and lead, 30,
                           "a new leader")
            takeover = time.monotonic() - killed_at
            print(f"\nmachine two leads at epoch {new.epoch} after {takeover:.3f} s")
            assert (new.pid, new.host) == (standby.pid, host)
            assert takeover < TAKEOVER_BOUND["zookeeper"], f"takeover took {takeover:.3f} s"
            assert all(process.status() != psutil.STATUS_STOPPED
                       for process in (broker, zookeeper))

            # The submitting command follows the new leader on its own and exits 0.
            assert submit.wait(240) == 0, output.read_text()
            submitted = re.search(r"job (\S+) submitted", output.read_text())
            assert submitted, output.read_text()
            job_id = submitted.group(1)
            result = client.result(job_id)
            assert result.status == JobStatus.FINISHED, result.root_cause
            assert dict(collected_rows(result)) == EXPECTED_SUMS
            # Recovered from the shared folder, the only place machine two has it from.
            assert f"recovering job {job_id}" in standby.log.read_text(errors="replace")
            assert (shared / "jobs" / job_id).is_dir()
            assert psutil.Process(up.pid).status() == psutil.STATUS_STOPPED

            # Resumed, machine one's supervisor starts its JobManager again: a standby.
            os.kill(up.pid, signal.SIGCONT)
            again = wait_for(lambda: (j := supervised(up, "jobmanager")) is not None
                             and j.pid != jobmanager.pid and j, 60,
                             "machine one's JobManager restarted")
            wait_for(lambda: (o := overview(client)) and o.leader_epoch == new.epoch
                     and o.standbys == (f"pid {again.pid} on host {host}",), 60,
                     "machine one's JobManager standing by")
            with JobClient(Config({"cluster.id": cluster_id}), connect_timeout=30) as late:
                assert (leader(late).epoch, leader(late).pid) == (new.epoch, standby.pid)
        except BaseException:
            if standby is not None:
                print(standby.output())
            raise
        finally:
            if submit is not None and submit.poll() is None:
                submit.kill()
                submit.wait(10)
            if standby is not None:
                standby.kill()
            client.close()
