"""A PySpark script's vertex opens into its Spark jobs and stages: nodes with progress
bars, retried stages marked, failed tasks red; the failure inspector names the Spark stage
and task that failed, with Spark's error."""

from __future__ import annotations

from dataclasses import replace

from clusterdeck.core.protocol.failures import FailureRecord, TaskFailure
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import JobProgress
from clusterdeck.core.protocol.sparkwork import (
    SparkJob,
    SparkJobStatus,
    SparkStage,
    SparkStageStatus,
    SparkTaskFailure,
    SparkWork,
)
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.views.failuresview import FailuresView
from clusterdeck.gui.views.jobsview import JobsView
from clusterdeck.gui.views.sparkworkview import FAILED, NODE_WIDTH, SparkWorkView, short_call_site
from tests.gui.jobsnapshots import mixed_word_count

JOB = "3892b72ea8554705"
COUNT = SparkStage(0, 0, 0, "count at three.py:8", SparkStageStatus.COMPLETE, 4, done=4)
MAP = SparkStage(1, 0, 1, "reduceByKey at three.py:13", SparkStageStatus.COMPLETE, 4, done=4)
REDUCE = SparkStage(2, 1, 1, "collect at three.py:13", SparkStageStatus.ACTIVE, 3,
                    running=1, done=1, failed=2, parent_ids=(1,))
WORK = SparkWork(
    "job-1/source#0/a0",
    (SparkJob(0, "count at three.py:8", "", SparkJobStatus.SUCCEEDED, (0,)),
     SparkJob(1, "collect at three.py:13", "", SparkJobStatus.RUNNING, (1, 2))),
    (COUNT, MAP, REDUCE),
    (SparkTaskFailure(2, 0, 9, 1, 0, "driver", "ValueError: bad record 7"),))


def test_each_stage_is_a_node_with_its_bar_retries_marked_and_failures_red(qtbot):
    view = SparkWorkView()
    qtbot.addWidget(view)
    view.show_work(WORK)
    assert set(view.nodes) == {(0, 0), (1, 0), (2, 1)}
    count, reduce = view.nodes[(0, 0)], view.nodes[(2, 1)]
    assert count.bar.rect().width() == NODE_WIDTH - 12  # all four tasks done
    assert 0 < reduce.bar.rect().width() < count.bar.rect().width()
    texts = [child.text() for child in reduce.childItems() if hasattr(child, "text")]
    assert "Stage 2 (retry 1): ACTIVE" in texts and "(1 + 1) / 3 tasks, 2 failed" in texts
    assert reduce.failed and reduce.pen().color() == FAILED and not count.failed
    assert view.nodes[(1, 0)].x() == reduce.x() != count.x()  # one column per Spark job
    assert set(view.edges) == {(1, 2)}
    assert view.failures.count() == 1
    assert view.failures.item(0).foreground().color() == FAILED
    assert "2 Spark jobs, 2 of 3 stages done" in view.summary.text()


def test_the_scripts_vertex_opens_into_its_spark_stages_drawn_live(qtbot):
    _, snapshot = mixed_word_count()
    script = replace(snapshot, kind=JobKind.PYSPARK_SCRIPT, spark=(WORK,))
    jobs = JobsView()
    qtbot.addWidget(jobs)
    jobs.set_job("job-1", script)
    assert jobs.details.currentWidget() is jobs.spark
    assert set(jobs.spark.nodes) == {(0, 0), (1, 0), (2, 1)}
    done = replace(REDUCE, status=SparkStageStatus.COMPLETE, running=0, done=3)
    jobs.set_job("job-1", replace(script, spark=(replace(WORK, stages=(COUNT, MAP, done)),)))
    assert jobs.spark.nodes[(2, 1)].bar.rect().width() == NODE_WIDTH - 12


def test_a_running_scripts_bar_counts_spark_stages_and_a_finished_ones_subtasks(qtbot):
    _, snapshot = mixed_word_count()
    running = replace(snapshot, kind=JobKind.PYSPARK_SCRIPT, status=JobStatus.RUNNING,
                      progress=JobProgress(2, 3, spark_stages=True), spark=(WORK,))
    jobs = JobsView()
    qtbot.addWidget(jobs)
    jobs.set_job("job-1", running)
    assert jobs.progress.text() == "2 / 3 Spark stages done"
    jobs.set_job("job-1", replace(running, status=JobStatus.FINISHED, progress=JobProgress(1, 1)))
    assert jobs.progress.text() == "1 / 1 subtasks finished"


def test_a_job_without_spark_work_says_so(qtbot):
    _, snapshot = mixed_word_count()
    jobs = JobsView()
    qtbot.addWidget(jobs)
    jobs.set_job("job-1", snapshot)
    assert jobs.spark.nodes == {} and "No Spark work" in jobs.spark.summary.text()


def test_the_failure_inspector_names_the_spark_stage_task_and_sparks_error(qtbot):
    spark_error = ("org.apache.spark.api.python.PythonException: Traceback (most recent "
                   "call last):\n"
                   f'  File "/home/u/jobs/{JOB}/failing.py", line 6, in check\n'
                   '    raise ValueError(f"bad record {record}")\nValueError: bad record 7\n')
    work = SparkWork(
        f"{JOB}/source#0/a0", (SparkJob(0, "count at failing.py:10", "",
                                        SparkJobStatus.FAILED, (2,)),),
        (SparkStage(2, 0, 0, "count at failing.py:10", SparkStageStatus.FAILED, 2, done=1,
                    failed=2),),
        (SparkTaskFailure(2, 0, 1, 1, 0, "driver", "ValueError: bad record 7", spark_error),
         SparkTaskFailure(2, 0, 2, 1, 1, "driver", "ValueError: bad record 7", spark_error)))
    cause = ("Spark stage 2.0 (count at failing.py:10) failed: task 1.1 (TID 2) on executor "
             "driver, after 2 failed task attempt(s): ValueError: bad record 7")
    root = FailureRecord(f"{JOB}/source#0/a0", "source", 0, 0, "tm-1",
                         TaskFailure("PythonException", cause), 1000.0)
    _, snapshot = mixed_word_count()
    view = FailuresView()
    qtbot.addWidget(view)
    view.show()
    view.show_job(JOB)
    view.set_snapshot(JOB, replace(snapshot, root_cause=root, failures=(root,), spark=(work,)))
    text = view.detail.toPlainText()
    assert f"PythonException: {cause}" in text
    assert "Spark tasks that failed" in text
    assert "Stage 2.0 (count at failing.py:10), task 1.1 (TID 2) on executor driver: " \
        "ValueError: bad record 7" in text
    assert 'raise ValueError(f"bad record {record}")' in text  # Spark's own error, in full


def test_stages_are_joined_by_sparks_edges_not_by_their_order(qtbot):
    # Job 3 joins two shuffles: stages 4 and 5 both feed 6, and 5 is not 6's only parent.
    left = SparkStage(4, 0, 3, "map at join.py:5", SparkStageStatus.COMPLETE, 2, done=2)
    right = SparkStage(5, 0, 3, "map at join.py:6", SparkStageStatus.COMPLETE, 2, done=2)
    joined = SparkStage(6, 0, 3, "count at join.py:7", SparkStageStatus.ACTIVE, 2,
                        running=1, parent_ids=(4, 5))
    after = SparkStage(7, 0, 4, "count at join.py:9", SparkStageStatus.PENDING, 2,
                       parent_ids=(6,))
    view = SparkWorkView()
    qtbot.addWidget(view)
    view.show_work(SparkWork("a", (SparkJob(3, "count at join.py:7", "",
                                            SparkJobStatus.RUNNING, (4, 5, 6)),
                                   SparkJob(4, "count at join.py:9", "",
                                            SparkJobStatus.RUNNING, (7,))),
                             (left, right, joined, after)))
    assert set(view.edges) == {(4, 6), (5, 6), (6, 7)}
    assert all(edge.scene() is view.scene for edge in view.edges.values())
    around = view.edges[(4, 6)].path()  # passes stage 5 on its right, not through it
    assert around.boundingRect().right() > view.nodes[(5, 0)].sceneBoundingRect().right()
    across = view.edges[(6, 7)].path()  # to the next job's column
    assert across.pointAtPercent(1).x() == view.nodes[(7, 0)].x()


def test_a_report_without_parents_draws_no_edges(qtbot):
    view = SparkWorkView()
    qtbot.addWidget(view)
    view.show_work(replace(WORK, stages=(COUNT, MAP, replace(REDUCE, parent_ids=()))))
    assert view.edges == {} and len(view.nodes) == 3


def test_a_call_site_is_shown_by_its_file_name_and_line() -> None:
    assert short_call_site("collect at /home/ann/jobs/pagerank.py:68") == \
        "collect at pagerank.py:68"
    assert short_call_site("runJob at PythonRDD.scala:181") == "runJob at PythonRDD.scala:181"
    assert short_call_site("count at <stdin>:1") == "count at <stdin>:1"
