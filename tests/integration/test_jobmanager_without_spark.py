"""``python -m clusterdeck.core.cli jobmanager`` runs without Spark: the JobManager plans
splits and prepares sinks with the job API, so neither pyspark nor py4j is imported by the
time it serves. A real broker, a real JobManager process; the process itself reports the
modules it holds (the import contract checks the code, this checks the process)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import ClusterClient
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from tests.integration.test_broker import CLUSTER, REPO, RunningBroker, start_broker, stop
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

# Runs the command line as ``python -m`` does, and writes the names in ``sys.modules`` to
# ANSWER once the test creates ASK (a thread of its own: the main thread runs the CLI).
PROBE = """
import os, runpy, sys, threading, time
from pathlib import Path

ask, answer = Path(sys.argv[1]), Path(sys.argv[2])

def report_modules_when_asked():
    while not ask.exists():
        time.sleep(0.02)
    partial = answer.with_name(answer.name + ".partial")
    partial.write_text("\\n".join(sorted(dict(sys.modules))), encoding="utf-8")
    os.replace(partial, answer)

threading.Thread(target=report_modules_when_asked, daemon=True).start()
sys.argv = ["clusterdeck", *sys.argv[3:]]
runpy.run_module("clusterdeck.core.cli", run_name="__main__", alter_sys=True)
"""


@pytest.fixture
def broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningBroker]:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    running = start_broker("amqtt", tmp_path)
    try:
        yield running
    finally:
        stop(running)


def modules_of_serving_jobmanager(broker: RunningBroker, folder: Path) -> set[str]:
    """Start the JobManager under the probe, wait until its Dispatcher answers, and return
    the modules the process holds then."""
    ask, answer = folder / "ask", folder / "modules.txt"
    log = folder / "jobmanager.log"
    env = {**os.environ, paths.HOME_ENV: str(broker.home)}
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-c", PROBE, str(ask), str(answer),
             "jobmanager", "-D", f"cluster.id={CLUSTER}"],
            cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        with ClusterClient(Config({"cluster.id": CLUSTER}), connect_timeout=30) as client:
            client.cluster_overview(timeout=30)
        assert process.poll() is None, log.read_text(errors="replace")
        ask.touch()
        wait_for(answer.exists, 15, "the JobManager's list of modules")
        return set(answer.read_text(encoding="utf-8").split())
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_a_serving_jobmanager_has_not_imported_spark(broker, tmp_path) -> None:
    modules = modules_of_serving_jobmanager(broker, tmp_path)
    assert "clusterdeck.core.jobmanager.dispatcher" in modules  # the probe saw the real thing
    spark = sorted(name for name in modules if name.split(".")[0] in ("pyspark", "py4j"))
    assert spark == []
