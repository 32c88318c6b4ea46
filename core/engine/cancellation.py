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


@contextmanager
def attempt_scope(spark_context: Any, attempt_id: str,
                  description: str) -> Iterator[Callable[[], bool]]:
    """Run this thread's Spark jobs in the attempt's job group; yields the check
    "was this attempt cancelled?". The flag is forgotten when the scope ends."""
    spark_context.setJobGroup(attempt_id, description, interruptOnCancel=True)
    try:
        yield lambda: is_cancelled(attempt_id)
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            spark_context.setLocalProperty(key, None)
        with _lock:
            _cancelled.discard(attempt_id)
