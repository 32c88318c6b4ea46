"""``clusterdeck up`` and ``clusterdeck status`` as a user runs them: real commands."""

from __future__ import annotations

import json
import os
import signal
import socket
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
        # `clusterdeck status | head -2`: the reader goes away before status writes.
        status = subprocess.Popen(clusterdeck("status", "--cluster", cluster_id),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        status.stdout.close()
        _, stderr = status.communicate(timeout=30)
        assert status.returncode == 141, stderr
        assert stderr == b""
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


def test_a_closed_pipe_ends_a_command_quietly() -> None:
    command = subprocess.Popen(clusterdeck("config", "show"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    command.stdout.close()
    _, stderr = command.communicate(timeout=30)
    assert command.returncode == 141
    assert stderr == b""


def test_ctrl_c_while_a_process_waits_for_its_broker_ends_without_a_traceback(tmp_path) -> None:
    with socket.socket() as placeholder:  # a port where no broker listens
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    log = tmp_path / "taskmanager.log"
    with log.open("wb") as output:
        taskmanager = subprocess.Popen(
            clusterdeck("taskmanager", "--broker", f"mqtt://u:p@127.0.0.1:{port}"),
            stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: b"retrying" in log.read_bytes(), 60, "a retry of the broker")
        taskmanager.send_signal(signal.SIGINT)
        assert taskmanager.wait(30) == 1
    finally:
        if taskmanager.poll() is None:
            taskmanager.kill()
            taskmanager.wait(10)
    assert b"Traceback" not in log.read_bytes()


def test_the_window_without_a_display_says_how_to_get_one_and_exits_8() -> None:
    env = {key: value for key, value in os.environ.items()
           if key not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    result = subprocess.run([sys.executable, "-m", "clusterdeck.gui"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 8
    assert "no display" in result.stderr and "xvfb-run" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_submit_waiting_when_its_cluster_stops_exits_with_unreachable(tmp_path) -> None:
    cluster_id = f"gone-{uuid.uuid4().hex[:6]}"
    up = subprocess.Popen(clusterdeck("up", "--cluster", cluster_id, "--taskmanagers", "1",
                                      "--slots", "1", "--broker", "amqtt", *NO_SPARK),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    submit = None
    try:
        wait_for(lambda: (d := status_json(cluster_id)) and d["taskmanagers"], 60,
                 "a TaskManager in the status")
        script = tmp_path / "sleeper.py"
        script.write_text("import time\nimport pyspark  # a PySpark script, run as one task\n"
                          "time.sleep(600)\n")
        submit = subprocess.Popen(
            clusterdeck("submit", str(script), "--cluster", cluster_id,
                        "-D", "client.unreachable-timeout=3"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "RUNNING" in subprocess.run(
            clusterdeck("list", "--cluster", cluster_id), capture_output=True, text=True,
            timeout=30).stdout, 60, "the job RUNNING")
        up.send_signal(signal.SIGINT)
        assert up.wait(30) == 0
        _, stderr = submit.communicate(timeout=60)
        assert submit.returncode == 5, stderr
        assert "cluster unreachable" in stderr and "client.unreachable-timeout" in stderr
        assert "Traceback" not in stderr
    finally:
        for process in (submit, up):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)


def test_up_with_limits_starts_the_minimum_on_demand_and_status_shows_the_limits() -> None:
    cluster_id = f"elastic-{uuid.uuid4().hex[:6]}"
    up = subprocess.Popen(clusterdeck("up", "--cluster", cluster_id, "--min-taskmanagers", "1",
                                      "--max-taskmanagers", "2", "--idle-timeout", "5 s",
                                      "--broker", "amqtt", *NO_SPARK),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        document = wait_for(lambda: (d := status_json(cluster_id)) and d["taskmanagers"] and d,
                            60, "a TaskManager in the status")
        assert [t["id"] for t in document["taskmanagers"]] == ["taskmanager-1"]
        elastic = document["elastic"]
        assert (elastic["min_taskmanagers"], elastic["max_taskmanagers"]) == (1, 2)
        assert elastic["started"] == ["taskmanager-1"] and "fencing_token" not in elastic
        text = subprocess.run(clusterdeck("status", "--cluster", cluster_id),
                              capture_output=True, text=True, timeout=30).stdout
        assert "elastic: 1 to 2 TaskManagers; starting on demand: none" in text
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(30) == 0
