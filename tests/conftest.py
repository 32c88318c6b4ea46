"""Shared by every test: one isolated clusterdeck home for the session, no display, and
the one local SparkSession of the tests that run Spark in this process.

The home is set once, before any fixture runs: a cluster started by a module fixture
restarts its processes with the environment of that moment, so it must never change.
``CLUSTERDECK_TEST_KEEP_HOME=1`` keeps it (with the clusters' logs) after the session.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

os.environ["QT_QPA_PLATFORM"] = "offscreen"
_home = tempfile.mkdtemp(prefix="clusterdeck-test-home-")
os.environ["CLUSTERDECK_HOME"] = _home
if os.environ.get("CLUSTERDECK_TEST_KEEP_HOME") != "1":  # 1: keep its logs to read
    atexit.register(shutil.rmtree, _home, True)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession for every module that runs Spark in this process (a JVM:
    their tests are marked integration), started at the first one's first test and
    stopped at the end of the session: about five seconds a module against a session of
    its own each. Its tests leave no state in it (their scripts run isolated, as the
    TaskManagers run them). The Spark variables it needs are set only while it starts (the
    JVM and the driver read them then), so that clusters started later do not inherit
    them."""
    saved = {key: os.environ.get(key) for key in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")}
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # the workers' interpreter
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        from pyspark.sql import SparkSession

        session = (SparkSession.builder.master("local[2]").appName("clusterdeck-tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.default.parallelism", "2")
                   .getOrCreate())
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        session.sparkContext.setLogLevel("ERROR")
        yield session
    finally:
        session.stop()
