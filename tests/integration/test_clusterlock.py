"""One JobManager per cluster, with real commands: a second ``up`` (or ``run``, or a
``jobmanager`` of its own) of a running cluster is refused at once, names the holder,
overwrites nothing, and the running cluster keeps its JobManager and runs jobs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.core.config import paths
from clusterdeck.core.node import exitcodes
from tests.integration.test_up import clusterdeck, status_json
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
FAST = ("-D", "spark.start=lazy", "-D", "heartbeat.interval=0.2",
        "-D", "supervisor.restart-backoff=0.1", "-D", "supervisor.shutdown-grace=3")
# What a second start must leave as the running cluster wrote it.
CLUSTER_FILES = ("broker.json", "credentials.json", "run/config.toml", "cluster.lock")


def registered(cluster_id: str) -> dict | None:
    """The status once a JobManager leads and taskmanager-1 is registered with it."""
    document = status_json(cluster_id)
    if document and any(t["state"] == "registered" for t in document["taskmanagers"]):
        return document
    return None


@contextlib.contextmanager
def cluster_up(cluster_id: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``clusterdeck up`` with one TaskManager in its own process group, running until the
    block ends; stopped with Ctrl-C, the whole group killed if that does not end it."""
    with log.open("wb") as output:
        up = subprocess.Popen(clusterdeck("up", "--cluster", cluster_id, "--taskmanagers",
                                          "1", "--slots", "1", *FAST),
                              stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield up
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            try:
                up.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(up.pid, signal.SIGKILL)
                up.wait(10)


def snapshot(cluster_id: str) -> dict[str, bytes]:
    folder = paths.cluster_dir(cluster_id)
    return {name: (folder / name).read_bytes() for name in CLUSTER_FILES}


def test_a_second_up_is_refused_at_once_and_the_first_cluster_keeps_running_jobs(
        tmp_path: Path) -> None:
    cluster_id = f"lock-{uuid.uuid4().hex[:6]}"
    with cluster_up(cluster_id, tmp_path / "up.log") as up:
        before = wait_for(lambda: registered(cluster_id), 60, "a registered TaskManager")
        files = snapshot(cluster_id)

        started = time.monotonic()
        second = subprocess.run(
            clusterdeck("up", "--cluster", cluster_id, "--taskmanagers", "2", "--slots", "3",
                        *FAST, "-D", "rpc.ask-timeout=7"),
            capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started

        assert second.returncode == exitcodes.LOCKED, second.stderr
        assert f"cluster {cluster_id} is already running: supervisor pid {up.pid} on host " \
               in second.stderr
        assert "(started by `" in second.stderr and " up --cluster " in second.stderr
        assert "Traceback" not in second.stderr
        assert second.stdout == ""
        assert took < 15, f"the refusal took {took:.1f} s"
        assert snapshot(cluster_id) == files

        job = tmp_path / "doubles.py"
        job.write_text("def build(env):\n    env.set_job_name('after-a-refused-up')\n"
                       "    env.from_collection([1, 2, 3]).map(lambda x: x * 2).collect()\n")
        submit = subprocess.run(clusterdeck("submit", str(job), "--cluster", cluster_id),
                                capture_output=True, text=True, timeout=300)
        assert submit.returncode == exitcodes.OK, submit.stderr
        assert "FINISHED" in submit.stderr
        assert sorted(submit.stdout.split()) == ["2", "4", "6"]
        assert status_json(cluster_id)["jobmanager_pid"] == before["jobmanager_pid"]
        assert up.poll() is None


def test_run_and_a_jobmanager_of_their_own_are_refused_while_the_cluster_runs(
        tmp_path: Path) -> None:
    cluster_id = f"lock-{uuid.uuid4().hex[:6]}"
    job = tmp_path / "never.py"
    job.write_text("def build(env):\n    env.from_collection([1]).collect()\n")
    with cluster_up(cluster_id, tmp_path / "up.log") as up:
        before = wait_for(lambda: registered(cluster_id), 60, "a registered TaskManager")
        files = snapshot(cluster_id)
        for command in (("run", str(job)), ("jobmanager",)):
            refused = subprocess.run(clusterdeck(*command, "--cluster", cluster_id, *FAST),
                                     capture_output=True, text=True, timeout=60)
            assert refused.returncode == exitcodes.LOCKED, (command, refused.stderr)
            assert f"supervisor pid {up.pid}" in refused.stderr
            assert "Traceback" not in refused.stderr
        assert snapshot(cluster_id) == files
        assert status_json(cluster_id)["jobmanager_pid"] == before["jobmanager_pid"]


def test_a_restarted_jobmanager_runs_under_the_handed_on_lock_and_stop_frees_it(
        tmp_path: Path) -> None:
    cluster_id = f"lock-{uuid.uuid4().hex[:6]}"
    with cluster_up(cluster_id, tmp_path / "up.log") as up:
        first = wait_for(lambda: registered(cluster_id), 60, "a registered TaskManager")
        os.kill(first["jobmanager_pid"], signal.SIGKILL)
        wait_for(lambda: (d := registered(cluster_id))
                 and d["jobmanager_pid"] != first["jobmanager_pid"], 60,
                 "a restarted JobManager leading")
        jobmanager_log = paths.cluster_log_dir(cluster_id) / "jobmanager.log"
        assert jobmanager_log.read_text().count("running under the cluster lock of our "
                                                f"supervisor pid {up.pid}") == 2
        up.send_signal(signal.SIGINT)
        assert up.wait(30) == exitcodes.OK
    again = subprocess.run(clusterdeck("up", "--check", "--cluster", cluster_id,
                                       "--taskmanagers", "1", "--slots", "1", *FAST),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == exitcodes.OK, again.stderr
