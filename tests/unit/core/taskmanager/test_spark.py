"""What a TaskManager builds its SparkSession with: its own defaults, and the cluster's
``spark.*`` properties, which win over them; and the session's life (``SparkHost``): its
start, its JVM's death, its restart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes
from clusterdeck.core.taskmanager.spark import SparkHost, restart_spark, session_settings
from clusterdeck.core.taskmanager.sparkhealth import JvmExit, SparkJvm
from tests.unit.core.taskmanager.helpers import FakeEndpoint

SCRATCH = Path("/scratch/taskmanager-1")


def test_without_spark_properties_the_taskmanagers_defaults_apply() -> None:
    settings = session_settings(Config({"taskmanager.slots": 3}), "taskmanager-1", SCRATCH)
    assert settings == {
        "spark.master": "local[3]",
        "spark.app.name": "clusterdeck-taskmanager-1",
        "spark.ui.enabled": "true",
        "spark.ui.port": "0",
        "spark.ui.killEnabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.warehouse.dir": str(SCRATCH / "warehouse"),
        "spark.executorEnv.CLUSTERDECK_WORKER_MARKS": str(SCRATCH / "worker-marks"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={SCRATCH}",
    }


def test_the_clusters_spark_properties_are_added_and_win_over_the_defaults() -> None:
    config = Config({"spark.master": "spark://head:7077", "spark.ui.enabled": False,
                     "spark.sql.shuffle.partitions": 7, "spark.clusterdeck.probe": "hello",
                     "spark.app.name": "lab"})
    settings = session_settings(config, "taskmanager-2", SCRATCH)
    assert settings["spark.master"] == "spark://head:7077"
    assert settings["spark.ui.enabled"] == "false"
    assert settings["spark.sql.shuffle.partitions"] == "7"
    assert settings["spark.clusterdeck.probe"] == "hello"
    assert settings["spark.app.name"] == "lab"
    assert "spark.start" not in settings


def test_the_users_driver_java_options_come_after_the_taskmanagers_derby_home() -> None:
    config = Config({"spark.driver.extraJavaOptions": "-Xss4m -Dderby.system.home=/mine"})
    settings = session_settings(config, "taskmanager-1", SCRATCH)
    assert settings["spark.driver.extraJavaOptions"] == (
        f"-Dderby.system.home={SCRATCH} -Xss4m -Dderby.system.home=/mine")


class DyingJvm:
    """A SparkJvm stand-in that runs until told it died."""

    def __init__(self) -> None:
        self.ended: JvmExit | None = None

    def exit(self) -> JvmExit | None:
        return self.ended


def host_with_jvm(endpoint: FakeEndpoint, lost: list[JvmExit],
                  monkeypatch: pytest.MonkeyPatch) -> tuple[SparkHost, DyingJvm, object]:
    """A host whose first session started, its JVM watched."""
    jvm, session = DyingJvm(), object()
    monkeypatch.setattr(SparkJvm, "of", classmethod(lambda _cls, _spark: jvm))
    host = SparkHost(endpoint, Config({}), "taskmanager-1", SCRATCH, lost.append)
    started = host.session()
    (_start, _args, future), = endpoint.workers
    endpoint.workers.clear()
    future.set_result(session)
    endpoint.drain()
    assert host.ready and started.result() is session and host.started() is session
    return host, jvm, session


def test_a_first_start_that_failed_is_tried_again_at_the_next_deployment() -> None:
    endpoint = FakeEndpoint()
    host = SparkHost(endpoint, Config({}), "taskmanager-1", SCRATCH, lambda _ended: None)
    failed = host.session()
    assert host.session() is failed  # one start at a time
    endpoint.workers[0][2].set_exception(RuntimeError("no java"))
    endpoint.drain()

    assert not host.ready and host.started() is None
    assert host.session() is not failed
    assert len(endpoint.workers) == 2


def test_a_dead_jvm_fails_the_attempts_then_a_new_session_starts_in_place_of_the_dead(
        monkeypatch) -> None:
    endpoint, lost = FakeEndpoint(), []
    host, jvm, dead = host_with_jvm(endpoint, lost, monkeypatch)

    host.check()
    assert lost == [] and endpoint.workers == []  # it runs: nothing to do
    jvm.ended = JvmExit(4242, -9)
    host.check()

    assert lost == [JvmExit(4242, -9)]
    (restart, args, _future), = endpoint.workers
    assert restart is restart_spark and args[0] is dead  # it forgets the dead one first
    assert not host.ready  # the ResourceManager prefers other TaskManagers meanwhile


def test_a_spark_that_cannot_start_again_after_its_jvm_died_exits_the_process(
        monkeypatch) -> None:
    endpoint = FakeEndpoint()
    host, jvm, _ = host_with_jvm(endpoint, [], monkeypatch)
    jvm.ended = JvmExit(4242, 1)
    host.check()
    endpoint.workers[0][2].set_exception(RuntimeError("no java"))
    endpoint.drain()

    (_delay, fn, args), = endpoint.timers
    assert fn is os._exit and args == (exitcodes.SPARK_LOST,)


def test_the_clusters_settings_apply_under_the_taskmanagers_own_before_the_start() -> None:
    endpoint = FakeEndpoint()
    host = SparkHost(endpoint, Config({"spark.executor.memory": "2g"}), "taskmanager-1",
                     SCRATCH, lambda _ended: None)
    host.start_when_registered = True

    host.take_cluster_settings({"spark.executor.memory": "8g", "spark.sql.ansi.enabled": "true"})

    assert host.config.spark_properties() == {"spark.executor.memory": "2g",
                                              "spark.sql.ansi.enabled": "true"}
    (_start, args, _future), = endpoint.workers  # the eager start waited for them
    assert args[0] is host.config
    host.take_cluster_settings({})  # registered again: no second start
    assert len(endpoint.workers) == 1
