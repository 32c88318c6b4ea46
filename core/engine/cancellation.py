"""Cancelling an attempt's Spark work: a Spark job group per attempt, and a flag.

Every Spark job an attempt starts runs in the job group named by its attempt id
(``interruptOnCancel=True``: Spark interrupts the executor threads, which stops the
Python workers too). ``cancel_subtask`` cancels the jobs running now and flags the
attempt, so it starts no further Spark job: ``cancelJobGroup`` alone only stops the
jobs that are active at that moment.

The job group is a thread-local property of the SparkContext (PySpark pins each Python
thread to a JVM thread), so ``attempt_scope`` is entered on the attempt's slot thread.
``cancel_subtask`` may be called from any thread but an endpoint's main thread: it is a
Py4J call, which blocks for as long as the JVM does not answer (a TaskManager's task
calls it on a thread of its own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_cancelled: set[str] = set()


def cancel_subtask(spark: Any, attempt_id: str) -> None:
    """Stop the attempt's running Spark jobs and keep it from starting new ones.
    ``spark``: a SparkSession or a SparkContext."""
    with _lock:
        _cancelled.add(attempt_id)
    spark_context = getattr(spark, "sparkContext", spark)
    scala_context = spark_context._jsc.sc()
    if hasattr(scala_context, "cancelJobGroupAndFutureJobs"):   # Spark 4: later jobs too
        scala_context.cancelJobGroupAndFutureJobs(attempt_id)
    else:
        spark_context.cancelJobGroup(attempt_id)


def is_cancelled(attempt_id: str) -> bool:
    with _lock:
        return attempt_id in _cancelled


class JobGroup:
    """An attempt's Spark job group, set on its slot thread when the attempt first
    touches Spark (``enter``): an attempt with nothing to read makes no Py4J call at all,
    and a thread's first Py4J call costs it a connection of its own to the JVM."""

    KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")

    def __init__(self, spark_context: Any, attempt_id: str, description: str) -> None:
        self.spark_context = spark_context
        self.attempt_id = attempt_id
        self.description = description
        self.entered = False
        self.used = False  # entered at least once: this thread made Py4J calls

    def enter(self) -> None:
        if not self.entered:
            self.used = True
            self.spark_context.setJobGroup(self.attempt_id, self.description,
                                           interruptOnCancel=True)
            self.entered = True

    def leave(self) -> None:
        if self.entered:
            for key in self.KEYS:
                self.spark_context.setLocalProperty(key, None)
            self.entered = False


@contextmanager
def attempt_scope(spark_context: Any, attempt_id: str, description: str, *,
                  lazy: bool = False) -> Iterator[tuple[Callable[[], bool], JobGroup]]:
    """Run this thread's Spark jobs in the attempt's job group; yields the check
    "was this attempt cancelled?" and the group, entered now or (``lazy``) by the first
    Spark work. The flag is forgotten when the scope ends."""
    group = JobGroup(spark_context, attempt_id, description)
    if not lazy:
        group.enter()
    try:
        yield (lambda: is_cancelled(attempt_id)), group
    finally:
        group.leave()
        with _lock:
            _cancelled.discard(attempt_id)
