"""Issue 14's isolation check on a real cluster: one TaskManager with one slot runs the
same script twice, and both runs print what a fresh ``spark-submit`` run prints, although
the first changed the working directory, an environment variable, a global temporary
view, the cache and a SQL setting of the TaskManager that runs the second."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.clusters import running_cluster

pytestmark = pytest.mark.integration

SCRIPT = """
    import os
    import helper
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("isolation").getOrCreate()
    frame = spark.range(29)
    frame.createOrReplaceTempView("numbers")
    print("cwd", os.getcwd())
    print("ISOLATION_MARK", os.environ.get("ISOLATION_MARK"))
    print("global views", sorted(table.name for table in spark.catalog.listTables("global_temp")
                                 if table.database == "global_temp"))
    print("cached", spark.catalog.isCached("numbers"))
    print("caseSensitive", spark.conf.get("spark.sql.caseSensitive"))
    print("helper loads", helper.load())
    print("hashes", hash("word2vec"),
          spark.sparkContext.parallelize([0], 1).map(lambda _: hash("word2vec")).first())

    os.chdir("elsewhere")
    os.environ["ISOLATION_MARK"] = "set by the first run"
    spark.range(3).createGlobalTempView("left_behind")
    frame.cache().count()
    spark.conf.set("spark.sql.caseSensitive", "true")
"""

HELPER = """
    loads = 0

    def load():
        global loads
        loads += 1
        return loads
"""


TRACKER = """
    import threading
    from pyspark import SparkContext

    sc = SparkContext(appName="tracker")
    sums = []
    worker = threading.Thread(target=lambda: sums.append(sc.parallelize(range(4), 2).sum()))
    worker.start()
    worker.join()
    tracker = sc.statusTracker()
    jobs = tracker.getJobIdsForGroup()
    print("jobs", [tracker.getJobInfo(job).status for job in jobs])
    print("active", tracker.getActiveJobsIds(), tracker.getActiveStageIds())
    print("sums", sums)
"""


@pytest.fixture(scope="module")
def one_slot() -> Iterator[str]:
    """A cluster of one TaskManager with one slot, started as a user starts it: with no
    PYTHONHASHSEED in its environment."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
        with running_cluster("auto", **{"taskmanager.count": 1, "taskmanager.slots": 1,
                                        "spark.start": "eager"}) as (cluster, _):
            yield cluster.cluster_id


def submit_twice(cluster_id: str, folder: Path, script: str) -> list[str]:
    runs = [subprocess.run([sys.executable, "-m", "clusterdeck.core.cli", "submit",
                            "--cluster", cluster_id, script],
                           capture_output=True, text=True, timeout=300, cwd=folder)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    return [run.stdout for run in runs]


def test_a_script_sees_only_its_own_spark_jobs_also_those_of_its_threads(
        tmp_path, one_slot) -> None:
    (tmp_path / "tracker.py").write_text(textwrap.dedent(TRACKER))
    fresh = "jobs ['SUCCEEDED']\nactive [] []\nsums [6]\n"  # what spark-submit prints
    assert submit_twice(one_slot, tmp_path, "tracker.py") == [fresh, fresh]


def test_a_script_run_twice_on_one_slot_prints_what_a_fresh_run_prints_both_times(
        tmp_path, one_slot) -> None:
    # The cluster started with no seed: the driver's and Spark's Python workers' string
    # hashes are still spark-submit's (PYTHONHASHSEED=0), as Spark ML needs.
    seeded = subprocess.run([sys.executable, "-c", "print(hash('word2vec'))"], text=True,
                            capture_output=True, env={"PYTHONHASHSEED": "0"}).stdout.strip()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "isolated.py").write_text(textwrap.dedent(SCRIPT))
    (tmp_path / "helper.py").write_text(textwrap.dedent(HELPER))
    fresh = (f"cwd {tmp_path}\nISOLATION_MARK None\nglobal views []\ncached False\n"
             f"caseSensitive false\nhelper loads 1\nhashes {seeded} {seeded}\n")
    assert submit_twice(one_slot, tmp_path, "isolated.py") == [fresh, fresh]
