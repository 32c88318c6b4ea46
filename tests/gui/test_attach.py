"""``clusterdeck gui --attach ID`` against a cluster started by ``clusterdeck up``: the
window shows its TaskManagers and a job that was already running, and can cancel it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.app import _begin, build_parser
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.session import SessionMode, attach_config
from tests.gui.windowdriver import job_status, leave
from tests.integration.clusters import ClusterWatcher
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
SLOW = ("import time\n\n\ndef build(env):\n    env.set_job_name('slow')\n"
        "    env.from_range(0, 2).map(lambda x: time.sleep(600) or x).collect()\n")


def watcher_of(cluster_id: str) -> ClusterWatcher | None:
    try:
        return ClusterWatcher(attach_config(cluster_id))
    except Exception:  # the broker or its credentials are not there yet
        return None


@pytest.fixture(scope="module")
def up_cluster():
    """A cluster run by ``clusterdeck up`` in its own process group, stopped at the end."""
    cluster_id = f"gui-attach-{uuid.uuid4().hex[:6]}"
    up = subprocess.Popen(
        [sys.executable, "-m", "clusterdeck.core.cli", "up", "--cluster", cluster_id,
         "--taskmanagers", "1", "--slots", "2", "-D", "spark.start=eager",
         "-D", "heartbeat.interval=0.2",
         "-D", "supervisor.shutdown-grace=3"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    watcher = None
    try:
        watcher = wait_for(lambda: watcher_of(cluster_id), 60, "the cluster's broker")
        watcher.wait_registered(["taskmanager-1"], timeout=60)
        yield cluster_id
    finally:
        if watcher is not None:
            watcher.close()
        up.send_signal(signal.SIGINT)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(up.pid, signal.SIGKILL)
            up.wait(10)


def test_an_attached_window_shows_the_taskmanagers_and_a_job_already_running(
        qtbot, up_cluster, tmp_path):
    job = tmp_path / "slow.py"
    job.write_text(SLOW)
    with JobClient(attach_config(up_cluster), connect_timeout=30) as client:
        job_id = client.submit(job)
        wait_for(lambda: any(j.job_id == job_id and j.status == JobStatus.RUNNING
                             for j in client.jobs().jobs), 30, "the job running")
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    _begin(window, build_parser().parse_args(["--attach", up_cluster]))
    try:
        qtbot.waitUntil(lambda: window.session.state.mode is SessionMode.ATTACHED,
                        timeout=30_000)
        qtbot.waitUntil(lambda: (row := window.model.row_named("taskmanager-1")) is not None
                        and row.registration == "registered", timeout=15_000)
        assert [row.name for row in window.model.rows()] == ["jobmanager", "taskmanager-1"]
        qtbot.waitUntil(lambda: job_status(window, job_id) == JobStatus.RUNNING, timeout=15_000)
        qtbot.waitUntil(lambda: window.jobs.current_job == job_id, timeout=5000)
        assert window.current_job == job_id
        assert len(window.jobs.graph.cells()) == 1
        assert window.actions.cancel_job.isEnabled()
        window.actions.cancel_job.trigger()
        qtbot.waitUntil(lambda: job_status(window, job_id) == JobStatus.CANCELED, timeout=60_000)
        assert not window.actions.cancel_job.isEnabled()
    finally:
        leave(window)
