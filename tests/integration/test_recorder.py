"""The flight recorder in a real cluster started as a user starts it (``clusterdeck up``):
a failed job is recorded with its messages and logs, the recording survives a kill -9
of the supervisor, and the exported file is read with no cluster left."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.recorder.export import describe
from clusterdeck.core.recorder.store import FILE_NAME, connect, log_lines, messages
from clusterdeck.core.rpc import RpcError, decode
from tests.integration.clusters import wait_result
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def clusterdeck(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clusterdeck.core.cli", *args],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def recorded_types(recording: Path) -> set[str]:
    with connect(recording, readonly=True) as db:
        found = set()
        for message in messages(db):
            with contextlib.suppress(RpcError):  # a cleared retained topic
                found.add(type(decode(message.payload, 64 * 1024 * 1024).message).__name__)
        return found


def test_a_failed_job_is_recorded_survives_a_kill_of_the_supervisor_and_reads_offline(
        tmp_path):
    cluster_id = f"rec-{uuid.uuid4().hex[:6]}"
    up = subprocess.Popen([sys.executable, "-m", "clusterdeck.core.cli", "up", "--cluster",
                           cluster_id, "--taskmanagers", "1", "--slots", "2", "-D",
                           "spark.start=lazy", "-D", "restart-strategy.type=none"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    recording = paths.cluster_dir(cluster_id) / FILE_NAME
    children: list[psutil.Process] = []
    try:
        config = Config({"cluster.id": cluster_id})
        client = wait_for(lambda: _connected(config), 60, "the cluster answering")
        with client:
            job_id = client.submit(EXAMPLES / "failing_job.py")
            result = wait_result(client, job_id, 180)
        assert result.status is p.JobStatus.FAILED
        wait_for(lambda: recording.exists() and any(
            j.job_id == job_id for j in describe(recording).jobs), 30,
            "the job's result in the recording")
        children = psutil.Process(up.pid).children(recursive=True)
        os.kill(up.pid, signal.SIGKILL)
        wait_for(lambda: not [c for c in children if c.is_running()
                              and c.status() != psutil.STATUS_ZOMBIE], 20,
                 "every process of the cluster gone")

        exported = tmp_path / "failed-run.cdrec"
        done = clusterdeck("record", "export", "--cluster", cluster_id, job_id, "-o",
                           str(exported))
        assert done.returncode == 0, done.stderr
        shown = clusterdeck("record", "show", str(exported), cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert job_id in shown.stdout and "FAILED" in shown.stdout
        assert "ValueError: record 777 is bad" in shown.stdout
        assert "taskmanager-1: at most" in shown.stdout  # its CPU and memory were sampled
        assert {"SubmitTasks", "ExecutionStateEvents", "JobResult"} <= recorded_types(exported)
        with connect(exported, readonly=True) as db:
            lines = log_lines(db)
        assert any(x.process.startswith("taskmanager") and "record 777 is bad" in x.line
                   for x in lines), "the failing attempt's log lines"
    finally:
        for process in children + ([psutil.Process(up.pid)] if up.poll() is None else []):
            if process.is_running():
                process.kill()
        up.wait(10)


def _connected(config: Config) -> JobClient | None:
    try:
        return JobClient(config, connect_timeout=2)
    except Exception:
        return None
