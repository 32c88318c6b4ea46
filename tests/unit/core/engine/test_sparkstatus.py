"""From what Spark's status API says to the bounded report of an attempt's Spark work."""

from __future__ import annotations

from clusterdeck.core.engine.sparkstatus import (
    SparkWorkBook,
    StageEdges,
    spark_cause,
    stage_parents,
    summary_of,
)
from clusterdeck.core.protocol.sparkwork import (
    FAILED_TASKS_KEPT,
    JOBS_KEPT,
    PARENTS_KEPT,
    STAGES_KEPT,
    SparkJobStatus,
    SparkStageStatus,
    check_spark_work,
)

PYTHON_ERROR = (
    "org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was "
    "thrown from the Python worker: Traceback (most recent call last):\n"
    '  File "/jobs/wordcount.py", line 7, in check\n'
    "ValueError: bad record 7\n SQLSTATE: 38000\n"
    "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(x.scala:1)\n")


def job(job_id: int, status: str = "SUCCEEDED", stages: tuple[int, ...] = ()) -> dict:
    return {"jobId": job_id, "name": f"count at job.py:{job_id}", "description": "d",
            "status": status, "stageIds": list(stages or (job_id,))}


def stage(stage_id: int, status: str = "COMPLETE", tasks: int = 4, done: int = 4,
          failed: int = 0, attempt: int = 0, active: int = 0) -> dict:
    return {"stageId": stage_id, "attemptId": attempt, "name": f"count at job.py:{stage_id}",
            "status": status, "numTasks": tasks, "numActiveTasks": active,
            "numCompleteTasks": done, "numFailedTasks": failed, "shuffleWriteBytes": 10}


def failed_task(task_id: int, index: int, attempt: int) -> dict:
    return {"taskId": task_id, "index": index, "attempt": attempt, "executorId": "driver",
            "errorMessage": PYTHON_ERROR}


def test_a_python_tasks_error_is_summed_up_by_its_exception_line() -> None:
    assert summary_of(PYTHON_ERROR) == "ValueError: bad record 7"


def test_a_jvm_error_is_summed_up_by_its_first_line() -> None:
    assert summary_of("java.io.IOException: disk full\n\tat x.y(z)") == \
        "java.io.IOException: disk full"


def test_only_jobs_and_stages_that_may_still_change_are_asked_again() -> None:
    book = SparkWorkBook("job/v#0/a0")
    book.job_seen(job(0))
    book.job_seen(job(1, "RUNNING", (1, 2)))
    book.stage_seen(stage(1))
    book.stage_seen(stage(2, "ACTIVE", done=1, active=2))
    assert book.jobs_to_ask([0, 1, 2]) == [1, 2]
    assert book.stages_to_ask([1]) == [2]


def test_many_jobs_and_stages_are_bounded_and_the_rest_summed_up() -> None:
    book = SparkWorkBook("job/v#0/a0")
    for n in range(100):
        book.job_seen(job(n))
        book.stage_seen(stage(n))
    book.job_seen(job(100, "RUNNING"))
    book.stage_seen(stage(100, "ACTIVE", tasks=20_000, done=5, active=2))
    work = book.work()
    check_spark_work(work)
    assert len(work.jobs) == JOBS_KEPT and work.jobs[-1].status is SparkJobStatus.RUNNING
    assert len(work.stages) == STAGES_KEPT
    assert work.stages[-1].status is SparkStageStatus.ACTIVE  # the running one is kept
    assert work.earlier.jobs == 101 - JOBS_KEPT and work.earlier.stages == 101 - STAGES_KEPT
    assert sum(s.tasks for s in work.stages) + work.earlier.tasks == 100 * 4 + 20_000
    assert work.stage_progress() == (100, 101)


def test_the_last_failed_tasks_are_kept_each_once_and_name_the_cause() -> None:
    book = SparkWorkBook("job/v#0/a0")
    book.job_seen(job(0, "FAILED", (3,)))
    book.stage_seen(stage(3, "FAILED", tasks=2, done=1, failed=12))
    assert book.failures_to_ask() == [(3, 0, 12)]
    tasks = [failed_task(n, 1, n) for n in range(12)]
    book.failures_seen(3, 0, tasks)
    book.failures_seen(3, 0, tasks[-3:])  # asked again: nothing twice
    assert book.failures_to_ask() == []
    work = book.work()
    assert [t.task_id for t in work.failed_tasks] == list(range(12 - FAILED_TASKS_KEPT, 12))
    assert spark_cause(work) == (
        "Spark stage 3.0 (count at job.py:3) failed: task 1.11 (TID 11) on executor driver, "
        "after 12 failed task attempt(s): ValueError: bad record 7")


def test_a_retried_stage_is_listed_per_attempt() -> None:
    book = SparkWorkBook("job/v#0/a0")
    book.job_seen(job(0, "RUNNING", (5,)))
    book.stage_seen(stage(5, "FAILED", failed=1))
    book.stage_seen(stage(5, "ACTIVE", attempt=1, done=0, active=1))
    assert [(s.stage_id, s.attempt) for s in book.work().stages] == [(5, 0), (5, 1)]
    assert book.stages_to_ask([0]) == [5]


def test_hostile_numbers_and_texts_from_spark_are_clamped_not_passed_on() -> None:
    book = SparkWorkBook("job/v#0/a0")
    book.job_seen({"jobId": -4, "name": "x" * 10_000, "status": "NONSENSE",
                   "stageIds": list(range(10_000))})
    book.stage_seen({"stageId": 2**70, "numTasks": "many", "numActiveTasks": 3,
                     "status": "ACTIVE"})
    check_spark_work(book.work())
    assert book.work().jobs[0].status is SparkJobStatus.UNKNOWN


def test_a_job_spark_no_longer_keeps_is_not_asked_again() -> None:
    book = SparkWorkBook("job/v#0/a0")
    book.job_seen({"jobId": 3})  # what the watch notes for a job the UI forgot
    assert book.jobs_to_ask([3]) == []
    assert book.work().jobs[0].status is SparkJobStatus.UNKNOWN


def test_a_running_stages_counts_come_from_the_tracker_until_more_than_counts_changed() -> None:
    book = SparkWorkBook("job/v#0/a0")
    book.job_seen(job(0, "RUNNING", (1,)))
    book.stage_seen(stage(1, "ACTIVE", tasks=200, done=10, active=4))
    assert book.running(0) and book.knows_stage(1) and not book.knows_stage(2)
    assert book.counts_seen(1, 0, 200, 4, 120, 0)
    (kept,) = book.work().stages
    assert (kept.running, kept.done, kept.shuffle_write_bytes) == (4, 120, 10)
    assert not book.counts_seen(1, 0, 200, 0, 200, 0)  # all done: the REST API says how
    assert not book.counts_seen(1, 0, 200, 4, 120, 1)  # a task failed: which, and why
    assert not book.counts_seen(1, 1, 200, 4, 0, 0)  # Spark runs the stage again


def edges(rdds: tuple[int, ...] = (), incoming: tuple[tuple[int, int], ...] = ()
          ) -> StageEdges:
    return StageEdges(frozenset(rdds), frozenset(incoming))


def test_a_stages_parents_are_the_stages_its_incoming_edges_leave_from() -> None:
    # As Spark's graph of a join of two shuffles: stages 0 and 1 write, 2 reads both
    # (edges 2->3 and 7->8 come in), 3 reads 2.
    graph = {0: edges((5, 6, 7)), 1: edges((0, 1, 2)),
             2: edges((3, 4, 8, 9, 14), ((2, 3), (7, 8))), 3: edges((15, 16), ((14, 15),))}
    assert stage_parents(graph) == {0: (), 1: (), 2: (0, 1), 3: (2,)}


def test_a_join_of_many_shuffles_lists_its_first_parents_only() -> None:
    graph = {n: edges((n,)) for n in range(PARENTS_KEPT + 3)}
    graph[99] = edges((100,), tuple((n, 100) for n in range(PARENTS_KEPT + 3)))
    assert stage_parents(graph)[99] == tuple(range(PARENTS_KEPT))


def test_parents_go_into_the_report_and_a_graph_is_asked_until_it_has_all_stages() -> None:
    book = SparkWorkBook("a")
    book.job_seen(job(0, "RUNNING", (0, 1)))
    book.stage_seen(stage(0))
    book.stage_seen(stage(1, "ACTIVE", done=1, active=1))
    assert book.graphs_to_ask() == [0]
    book.graph_seen(0, {0: edges((1, 2))})  # written while the job started
    assert book.graphs_to_ask() == [0]
    book.graph_seen(0, {0: edges((1, 2)), 1: edges((3, 4), ((2, 3),))})
    assert book.graphs_to_ask() == []
    assert [(s.stage_id, s.parent_ids) for s in book.work().stages] == [(0, ()), (1, (0,))]
    check_spark_work(book.work())


def test_a_graph_lacking_stages_of_a_job_that_ended_is_not_asked_again() -> None:
    book = SparkWorkBook("a")
    book.job_seen(job(0, "SUCCEEDED", (0, 1)))  # Spark dropped stage 1 (retainedStages)
    book.graph_seen(0, {0: edges((1, 2))})
    book.job_seen(job(1, "RUNNING", (2,)))
    book.graph_unavailable(1)
    assert book.graphs_to_ask() == []
