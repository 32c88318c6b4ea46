"""A process under a supervisor whose broker is gone for good exits, so that its
supervisor starts it again, instead of staying alive and serving no one. (One started by
hand keeps reconnecting: tests/integration/test_network_cuts.py.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clusterdeck.core.node import exitcodes
from clusterdeck.core.supervisor import RESTARTS_ENV
from tests.integration.test_broker import CLUSTER, REPO, start_broker, stop
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def test_a_taskmanager_whose_broker_stays_gone_exits_with_the_disconnected_code(
        tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    broker = start_broker("amqtt", home)
    log = tmp_path / "taskmanager.log"
    with log.open("wb") as output:
        taskmanager = subprocess.Popen(
            [sys.executable, "-m", "clusterdeck.core.cli", "taskmanager", "--id", "taskmanager-1",
             "-D", f"cluster.id={CLUSTER}", "-D", "broker.reconnect-timeout=2",
             "-D", "spark.start=lazy"],
            cwd=REPO, env={**os.environ, "CLUSTERDECK_HOME": str(home),
                           RESTARTS_ENV: "0"},  # as its supervisor starts it
            stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "TaskManager taskmanager-1 started" in log.read_text(errors="replace")
                 or taskmanager.poll() is not None, 60, "the TaskManager connected")
        assert taskmanager.poll() is None, log.read_text(errors="replace")
        stop(broker)  # kill -9, and nobody starts it again
        code = wait_for(lambda: taskmanager.poll(), 60, "the TaskManager to exit")
        text = log.read_text(errors="replace")
        assert code == exitcodes.DISCONNECTED, text
        assert "broker.reconnect-timeout" in text
    finally:
        if taskmanager.poll() is None:
            taskmanager.kill()
        taskmanager.wait(timeout=10)
        stop(broker)
