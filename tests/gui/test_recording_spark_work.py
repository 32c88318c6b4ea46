"""Issue 37: the recorder keeps a PySpark script's Spark work, so its recording opened
offline, with the cluster it came from stopped, shows the Spark jobs and stages, joined by
Spark's edges, as the live window did."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.sparkwork import SparkStageStatus
from clusterdeck.core.recorder.export import describe, export
from clusterdeck.core.recorder.store import FILE_NAME
from clusterdeck.gui.controllers.mainwindow import MainWindow
from tests.integration.clusters import running_cluster, wait_result
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

SHUFFLE = """
    from pyspark import SparkContext

    sc = SparkContext.getOrCreate()
    pairs = sc.parallelize(range(100), 4).map(lambda x: (x % 3, 1)).reduceByKey(
        lambda a, b: a + b, 2)
    print(sorted(pairs.collect()))
    print(pairs.count())
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, str]:
    """A real cluster runs the script; its recording is exported and the cluster stops:
    (the exported file, the job's id)."""
    folder = tmp_path_factory.mktemp("spark-work")
    script = folder / "shuffle.py"
    script.write_text(textwrap.dedent(SHUFFLE))
    target = folder / "spark-work.cdrec"
    with running_cluster("auto", **{"taskmanager.count": 1, "spark.start": "eager"}) as (
            cluster, _), JobClient(cluster.config, connect_timeout=30) as client:
        job_id = client.submit(script, cwd=str(folder))
        result = wait_result(client, job_id, 300)
        assert result.status is p.JobStatus.FINISHED, result
        recording = paths.cluster_dir(cluster.cluster_id) / FILE_NAME
        wait_for(lambda: job_id in {j.job_id for j in describe(recording).jobs}, 30,
                 "the script's result in the recording")
        export(recording, target, [job_id])
    return target, job_id


def test_a_recording_opened_offline_shows_the_scripts_spark_jobs_and_stages(
        qtbot, recorded) -> None:
    path, job_id = recorded
    window = MainWindow()
    qtbot.addWidget(window)
    window.recordings.open(path)
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith(
        f"Recording {path.name}"), timeout=30_000)
    assert not window.session.state.active
    window.choose_job(job_id)
    spark = window.jobs.spark
    qtbot.waitUntil(lambda: len(spark.nodes) == 4, timeout=10_000)
    assert "2 Spark jobs" in spark.summary.text()
    stages = sorted((node.stage for node in spark.nodes.values()),
                    key=lambda s: (s.stage_id, s.attempt))
    # collect: the reduceByKey's map stage, then the result stage reading its shuffle;
    # count: the map stage again, skipped (its output is there), then its result stage.
    assert [s.status for s in stages] == [SparkStageStatus.COMPLETE, SparkStageStatus.COMPLETE,
                                          SparkStageStatus.SKIPPED, SparkStageStatus.COMPLETE]
    assert "reduceByKey at" in stages[0].name and str(path.parent) in stages[0].name
    assert set(spark.edges) == {(stages[0].stage_id, stages[1].stage_id),
                                (stages[2].stage_id, stages[3].stage_id)}
