"""The TaskManager's one SparkSession: started once, shared by every slot thread."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from clusterdeck.core.config.settings import Config

log = logging.getLogger(__name__)


def spark_master(config: Config) -> str:
    return config["spark.master"] or f"local[{config['taskmanager.slots']}]"


def start_spark(config: Config, resource_id: str, scratch: Path) -> Any:
    """Blocking (seconds): run it on a worker thread, never on an endpoint's main thread."""
    from pyspark.sql import SparkSession

    scratch.mkdir(parents=True, exist_ok=True)
    # Spark's Python workers must run the same interpreter as this process.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = spark_master(config)
    if master.startswith("local"):
        # A local Spark needs no network interface; without this it looks one up and warns.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder.master(master)
               .appName(f"clusterdeck-{resource_id}")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(max(2, config["taskmanager.slots"])))
               .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={scratch}")
               .getOrCreate())
    session.sparkContext.setLogLevel("WARN")
    log.info("SparkSession started (master %s, Spark %s)", master, session.version)
    return session
