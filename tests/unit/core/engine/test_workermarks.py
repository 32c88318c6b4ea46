"""Spark's pooled Python workers say whose records they run (core/engine/workermarks.py):
a note per worker while a partition of an attempt's records runs, read back bounded on
the TaskManager."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from clusterdeck.core.engine import workermarks
from clusterdeck.core.engine.workermarks import MARKS_VARIABLE, marked, read_marks
from tests.waiting import wait_for


class Context:
    def __init__(self, attempt_id: str | None) -> None:
        self.attempt_id = attempt_id

    def getLocalProperty(self, key: str) -> str | None:
        return self.attempt_id if key == "spark.jobGroup.id" else None


@pytest.fixture
def worker(monkeypatch, tmp_path):
    """This process as a Spark worker of a TaskManager whose marks folder is tmp_path."""
    from pyspark.taskcontext import TaskContext
    context = Context("job/v#0/a0")
    monkeypatch.setenv(MARKS_VARIABLE, str(tmp_path))
    monkeypatch.setattr(TaskContext, "get", classmethod(lambda cls: context))
    monkeypatch.setattr(workermarks, "_held", [None, 0])
    return context


def test_a_partition_is_noted_while_its_records_are_read_and_not_after(worker, tmp_path):
    seen = []
    outer = marked(marked(iter([1, 2])))   # an operator's input and output in one stage
    for record in outer:
        seen.append((record, read_marks(tmp_path)))
    assert seen == [(1, {"job/v#0/a0": [os.getpid()]}), (2, {"job/v#0/a0": [os.getpid()]})]
    assert read_marks(tmp_path) == {}


def test_the_inner_mark_ending_first_does_not_end_the_note(worker, tmp_path):
    inner = marked(iter([1, 2, 3]))
    outer = marked(iter([sum(inner)]))   # a batch function: its input read whole first
    assert read_marks(tmp_path) == {"job/v#0/a0": [os.getpid()]}
    assert list(outer) == [6]
    assert read_marks(tmp_path) == {}


def test_a_failed_partitions_note_is_replaced_by_the_workers_next_attempt(worker, tmp_path):
    abandoned = marked(iter([1, 2]))
    next(abandoned)   # its task failed here
    worker.attempt_id = "job/v#1/a0"
    assert list(marked(iter([3]))) == [3]
    assert read_marks(tmp_path) == {}
    assert abandoned is not None


def test_without_a_folder_or_a_job_group_nothing_is_noted(worker, tmp_path, monkeypatch):
    worker.attempt_id = None
    records = iter([1])
    assert marked(records) is records
    monkeypatch.delenv(MARKS_VARIABLE)
    worker.attempt_id = "job/v#0/a0"
    assert list(marked(iter([1]))) == [1]
    assert list(tmp_path.iterdir()) == []


def test_notes_are_read_as_data_bounded_and_those_of_ended_processes_removed(tmp_path,
                                                                             monkeypatch):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    (tmp_path / ended.stdout.strip()).write_text("job/v#0/a0")
    (tmp_path / str(os.getpid())).write_bytes(b"x" * 10_000)
    (tmp_path / ".12").write_text("staged, not yet a note")
    (tmp_path / "junk").write_text("job/v#0/a0")
    (tmp_path / "0").write_text("job/v#0/a0")
    (tmp_path / ("9" * 30)).write_text("job/v#0/a0")   # no process has such a pid

    assert read_marks(tmp_path) == {"x" * workermarks.MAX_NOTE: [os.getpid()]}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".12", str(os.getpid()), "junk"]
    assert read_marks(tmp_path / "missing") == {}
    monkeypatch.setattr(workermarks, "MAX_MARKS", 2)
    assert sum(map(len, read_marks(tmp_path).values())) <= 2


@pytest.mark.integration
def test_a_real_spark_worker_notes_the_job_group_of_the_task_it_runs(spark, tmp_path):
    context = spark.sparkContext
    context.environment[MARKS_VARIABLE] = str(tmp_path)

    def slow(records):
        time.sleep(3)   # the worker's partition, long enough to be seen running
        return records

    def job() -> None:
        context.setJobGroup("job/v#0/a7", "marks")
        try:
            context.parallelize(range(4), 1).mapPartitions(marked).mapPartitions(
                slow).collect()
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)
    running = threading.Thread(target=job)
    try:
        running.start()
        marks = wait_for(lambda: read_marks(tmp_path), 60, "the worker's note")
        running.join(60)
    finally:
        del context.environment[MARKS_VARIABLE]
    [pid] = marks["job/v#0/a7"]
    assert pid != os.getpid()
    assert read_marks(tmp_path) == {}, "the note ended with its partition"
