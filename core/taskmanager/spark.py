"""The TaskManager's one SparkSession: started once, shared by every slot thread, and
started again in the same process when its JVM dies (``sparkhealth``)."""

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


def session_settings(config: Config, resource_id: str, scratch: Path) -> dict[str, str]:
    """Every property the TaskManager's SparkSession is built with: the TaskManager's own
    defaults, then the cluster's ``spark.*`` properties, which win — they are what the
    user asked for, and none of the defaults is needed for a task to run. The one merge:
    ``spark.driver.extraJavaOptions`` keeps the TaskManager's Derby home in front of the
    user's options, so that Derby's files stay in the scratch dir unless the user's own
    ``-Dderby.system.home`` (later on the line, so it wins) moves them."""
    derby_home = f"-Dderby.system.home={scratch}"
    own = {"spark.master": spark_master(config),
           "spark.app.name": f"clusterdeck-{resource_id}",
           # Spark's UI, for the window's Open Spark UI: on a free port (two TaskManagers
           # share a machine), bound to 127.0.0.1 with a local master (SPARK_LOCAL_IP), and
           # nobody kills jobs from it. spark.ui.enabled = false turns it off.
           "spark.ui.enabled": "true",
           "spark.ui.port": "0",
           "spark.ui.killEnabled": "false",
           "spark.ui.showConsoleProgress": "false",
           "spark.sql.shuffle.partitions": str(max(2, config["taskmanager.slots"])),
           "spark.sql.warehouse.dir": str(scratch / "warehouse"),
           "spark.driver.extraJavaOptions": derby_home}
    users = config.spark_properties()
    if "spark.driver.extraJavaOptions" in users:
        users["spark.driver.extraJavaOptions"] = (
            f"{derby_home} {users['spark.driver.extraJavaOptions']}")
    return {**own, **users}


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
    builder = SparkSession.builder
    for key, value in session_settings(config, resource_id, scratch).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    log.info("SparkSession started (master %s, Spark %s)", master, session.version)
    return session


def restart_spark(dead: Any, config: Config, resource_id: str, scratch: Path) -> Any:
    """Blocking (seconds), on a worker thread: a new SparkSession in place of ``dead``, whose
    JVM has died. PySpark keeps its gateway, JVM view, active context and sessions in class
    attributes and would hand the dead ones back, so they are forgotten first; the dead
    session's own threads (its accumulator server, Py4J's callback server) are stopped."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession, SQLContext

    context = dead.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.shutdown()
        server.server_close()
    with SparkContext._lock:
        gateway = SparkContext._gateway
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
        context._jsc = None  # SparkContext.stop() would call the dead JVM through it
    if gateway is not None:
        # Its shutdown command meets closed sockets at once (logged, not raised); what
        # it frees is this process's: the connections and the callback server's thread.
        gateway.shutdown()
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None
    log.info("forgot the dead SparkSession; starting a new one")
    return start_spark(config, resource_id, scratch)
