"""What a TaskManager builds its SparkSession with: its own defaults, and the cluster's
``spark.*`` properties, which win over them."""

from __future__ import annotations

from pathlib import Path

from clusterdeck.core.config.settings import Config
from clusterdeck.core.taskmanager.spark import session_settings

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
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.warehouse.dir": str(SCRATCH / "warehouse"),
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
