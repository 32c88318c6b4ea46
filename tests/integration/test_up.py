"""``clusterdeck up`` and ``clusterdeck status`` as a user runs them: real commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

import psutil
import pytest

from tests.integration.clusters import broker_kinds
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
NO_SPARK = ("-D", "spark.start=lazy")  # these clusters run no job: no JVM per TaskManager


def clusterdeck(*args: str) -> list[str]:
    return [sys.executable, "-m", "clusterdeck.core.cli", *args]


def status_json(cluster_id: str) -> dict | None:
    result = subprocess.run(clusterdeck("status", "--json", "--cluster", cluster_id),
                            capture_output=True, text=True, timeout=30)
    return json.loads(result.stdout) if result.returncode == 0 else None


@pytest.mark.parametrize("kind", broker_kinds())
def test_killing_the_supervisor_with_sigkill_leaves_no_cluster_process_alive(kind: str) -> None:
    cluster_id = f"orphans-{uuid.uuid4().hex[:6]}"
    up = subprocess.Popen(clusterdeck("up", "--cluster", cluster_id, "--taskmanagers", "2",
                                      "--slots", "1", "--broker", kind, *NO_SPARK),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True)
    children: list[psutil.Process] = []
    try:
        document = wait_for(lambda: (d := status_json(cluster_id)) and len(
            [t for t in d["taskmanagers"] if t["state"] == "registered"]) == 2 and d,
            60, "two registered TaskManagers")
        assert document["slots_free"] == 2
        children = psutil.Process(up.pid).children(recursive=True)
        assert len(children) >= 4  # broker, JobManager, two TaskManagers
        os.kill(up.pid, signal.SIGKILL)
        wait_for(lambda: not [c for c in children if c.is_running()
                              and c.status() != psutil.STATUS_ZOMBIE], 10,
                 "every child of the killed supervisor gone")
    finally:
        for process in [*children, psutil.Process(up.pid)] if up.poll() is None else children:
            if process.is_running():
                process.kill()
        up.wait(10)


def test_status_json_lists_each_taskmanager_with_the_documented_fields() -> None:
    cluster_id = f"status-{uuid.uuid4().hex[:6]}"
    up = subprocess.Popen(clusterdeck("up", "--cluster", cluster_id, "--taskmanagers", "1",
                                      "--slots", "3", "--broker", "amqtt", *NO_SPARK),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        document = wait_for(lambda: (d := status_json(cluster_id)) and d["taskmanagers"] and d,
                            60, "a TaskManager in the status")
        (taskmanager,) = document["taskmanagers"]
        assert {"id", "state", "host", "pid", "slots_total", "slots_free",
                "heartbeat_age_s"} <= set(taskmanager)
        assert taskmanager["id"] == "taskmanager-1"
        assert taskmanager["state"] == "registered"
        assert taskmanager["slots_total"] == 3
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(30) == 0


def test_status_of_a_cluster_that_is_not_running_says_so_with_its_exit_code() -> None:
    result = subprocess.run(clusterdeck("status", "--cluster", "never-started"),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 5
    assert "cluster unreachable" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_configuration_value_names_the_key() -> None:
    result = subprocess.run(clusterdeck("config", "show", "-D", "heartbeat.interval=soon"),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "heartbeat.interval" in result.stderr

