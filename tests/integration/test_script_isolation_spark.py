"""One PySpark script leaves nothing behind for the next, on a real Spark in this process:
what sessions keep apart, and what the isolation cleans after it (``scriptisolation``).

The session's one SparkSession (local[2], tests/conftest.py) serves the module.
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from clusterdeck.core.engine.script import Submission, run_pyspark_script
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def script_file(folder: Path, source: str) -> Path:
    path = folder / "script.py"
    path.write_text(textwrap.dedent(source))
    return path


SESSION_STATE = """
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    print([t.name for t in spark.catalog.listTables() if t.isTemporary],
          spark.conf.get("spark.sql.caseSensitive"), spark.catalog.currentDatabase(),
          spark.catalog.functionExists("plus_one"))
    spark.range(3).createOrReplaceTempView("mine")
    spark.conf.set("spark.sql.caseSensitive", "true")
    spark.sql("USE isolation_db")
    spark.udf.register("plus_one", lambda x: x + 1, "long")
"""


def test_temp_views_sql_settings_the_database_and_functions_stay_in_the_scripts_session(
        spark, tmp_path):
    spark.sql("CREATE DATABASE IF NOT EXISTS isolation_db")
    path = script_file(tmp_path, SESSION_STATE)
    runs = [run_pyspark_script(spark, path, [], f"session-{n}") for n in (1, 2)]
    assert [run.stdout for run in runs] == ["[] false default False\n"] * 2
    assert [run.exit_code for run in runs] == [0, 0]
    assert spark.catalog.currentDatabase() == "default"


LEAVES_EVERYTHING = """
    import sys
    import types
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    sc = spark.sparkContext
    spark.range(11).createGlobalTempView("by_method")
    spark.sql("CREATE GLOBAL TEMPORARY VIEW by_sql AS SELECT 1 AS one")
    frame = spark.range(13).cache()
    frame.count()
    numbers = sc.parallelize(range(17)).persist()
    numbers.count()
    spark.range(19).createOrReplaceTempView("tabled")
    spark.catalog.cacheTable("tabled")
    spark.sql("CACHE TABLE by_cache_sql AS SELECT id FROM range(23)")
    shared = sc.broadcast([1, 2, 3])
    probe = sys.modules.setdefault("isolation_probe", types.SimpleNamespace())
    probe.broadcast, probe.rdd_id = shared, numbers.id()
    print(sorted(t.name for t in spark.catalog.listTables("global_temp")
                 if t.database == "global_temp"))
    raise RuntimeError("failing after all that")
"""


def test_global_views_caches_and_broadcasts_of_a_failed_script_are_gone_after_it(
        spark, tmp_path):
    spark.range(5).createOrReplaceGlobalTempView("the_test_s_own")
    path = script_file(tmp_path, LEAVES_EVERYTHING)
    result = run_pyspark_script(spark, path, [], "leaves-everything")
    assert result.exit_code == 1 and "failing after all that" in result.stderr
    assert result.stdout == "['by_method', 'by_sql', 'the_test_s_own']\n"
    global_views = sorted(t.name for t in spark.catalog.listTables("global_temp")
                          if t.database == "global_temp")
    assert global_views == ["the_test_s_own"]
    probe = sys.modules.pop("isolation_probe")
    assert probe.rdd_id not in spark.sparkContext._jsc.getPersistentRDDs()
    assert not probe.broadcast._jbroadcast.isValid()
    for rows in (13, 19, 23):
        spark.range(rows).createOrReplaceTempView("same_plan")
        assert not spark.catalog.isCached("same_plan"), f"range({rows}) is still cached"
    spark.catalog.dropGlobalTempView("the_test_s_own")


def test_a_global_view_made_with_sql_beside_another_script_is_left_for_lack_of_an_owner(
        spark, tmp_path):
    """While two scripts run, a view made with SQL text cannot be told apart: it stays."""
    inside, release = tmp_path / "inside", threading.Event()
    waiting = script_file(tmp_path, f"""
        import pathlib
        import pyspark
        pathlib.Path({str(inside)!r}).touch()
        import sys
        sys.modules["isolation_release"].wait(60)
    """)
    sys.modules["isolation_release"] = release
    other = threading.Thread(target=run_pyspark_script, args=(spark, waiting, [], "waiting"))
    other.start()
    try:
        wait_for(inside.exists, 60, "the other script running")
        (tmp_path / "sql").mkdir()
        sql = script_file(tmp_path / "sql", """
            from pyspark.sql import SparkSession
            spark = SparkSession.builder.getOrCreate()
            spark.sql("CREATE GLOBAL TEMPORARY VIEW beside AS SELECT 1 AS one")
            spark.range(1).createGlobalTempView("recorded")
        """)
        assert run_pyspark_script(spark, sql, [], "beside").exit_code == 0
    finally:
        release.set()
        other.join(timeout=60)
        del sys.modules["isolation_release"]
    names = [t.name for t in spark.catalog.listTables("global_temp")
             if t.database == "global_temp"]
    assert names == ["beside"]
    spark.catalog.dropGlobalTempView("beside")


def test_a_script_that_changes_directory_moves_neither_the_process_nor_the_next_script(
        spark, tmp_path):
    (tmp_path / "sub").mkdir()
    path = script_file(tmp_path, """
        import os
        import pyspark
        print(os.getcwd())
        os.chdir("sub")
    """)
    process_cwd = os.getcwd()
    runs = [run_pyspark_script(spark, path, [], f"chdir-{n}", Submission(cwd=str(tmp_path)))
            for n in (1, 2)]
    assert [run.stdout for run in runs] == [f"{tmp_path}\n"] * 2
    assert os.getcwd() == process_cwd
    unplaced = script_file(tmp_path, f"""
        import os
        import pyspark
        os.chdir({str(tmp_path / "sub")!r})
    """)
    assert run_pyspark_script(spark, unplaced, [], "chdir-unplaced").exit_code == 0
    assert os.getcwd() == process_cwd


STOPS_ITS_STREAMS_AND_CONTEXT = """
    import threading
    from pyspark import SparkContext
    from pyspark.streaming import StreamingContext
    sc = SparkContext(appName="queue")
    ssc = StreamingContext(sc, 0.5)
    stream = ssc.queueStream([sc.parallelize(range(10))])
    counted = threading.Event()

    def count(rdd):
        print("batch", rdd.count())
        counted.set()
    stream.foreachRDD(count)
    ssc.start()
    assert counted.wait(60), "no batch counted within 60 s"
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    print("stopped")
"""


def test_a_script_stopping_its_streaming_context_with_spark_leaves_spark_running(
        spark, tmp_path):
    """Spark's streaming examples end with ssc.stop(stopSparkContext=True): through the JVM
    that would stop the TaskManager's SparkContext, and every later task would fail."""
    run = run_pyspark_script(spark, script_file(tmp_path, STOPS_ITS_STREAMS_AND_CONTEXT), [],
                             "streaming-stop")
    assert run.exit_code == 0, run.stderr
    assert run.stdout.endswith("stopped\n"), run.stdout
    assert "batch 10\n" in run.stdout, run.stdout  # printed on Py4J's callback thread
    assert not spark.sparkContext._jsc.sc().isStopped()
    assert spark.range(5).count() == 5
