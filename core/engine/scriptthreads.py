"""A PySpark script's own threads and its own Spark jobs, as under spark-submit, where the
whole driver process is the script's.

* A thread the script starts runs as part of it: its Spark jobs in the attempt's job
  group (the SparkContext's local properties copied at ``start``, as PySpark's
  ``InheritableThread`` does; so cancelling the attempt stops them too), what it prints
  in the script's output, and ``getOrCreate()``/``stop()`` behave there as on the
  script's own thread (``script.py``'s shim).
* ``sc.statusTracker()`` on a script's threads sees the script's jobs only: without a
  group, ``getJobIdsForGroup()`` lists the jobs of the thread's job group (under
  spark-submit: every job of the application, which is the script's), and the active
  jobs and stages are the group's. Another script's jobs, or a TaskManager's dataflow
  tasks, on the same SparkContext stay out of sight (Spark's ``status_api_demo.py``).

Installed with the script shim (``patch``/``unpatch``, under its lock); active only on
threads that run a script or were started by one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pyspark import SparkContext
from pyspark.core.status import StatusTracker

from clusterdeck.core.engine.capture import bound_to_this_thread

_originals: dict[str, Any] = {}
JOB_GROUP = "spark.jobGroup.id"


def patch(session_of_thread: Callable[[], Any],
          set_session: Callable[[Any], None]) -> None:
    """Install the wrappers. ``session_of_thread``: the script's session on this thread
    (None off a script); ``set_session``: make a session this thread's script's."""
    _originals.update(start=threading.Thread.start,
                      group_jobs=StatusTracker.getJobIdsForGroup,
                      active_jobs=StatusTracker.getActiveJobsIds,
                      active_stages=StatusTracker.getActiveStageIds)

    def start(self: threading.Thread) -> None:
        session = session_of_thread()
        if session is not None:
            _run_as_script(self, session, set_session)
        _originals["start"](self)

    threading.Thread.start = start  # type: ignore[method-assign]
    StatusTracker.getJobIdsForGroup = _group_jobs  # type: ignore[method-assign]
    StatusTracker.getActiveJobsIds = _active_jobs  # type: ignore[method-assign]
    StatusTracker.getActiveStageIds = _active_stages  # type: ignore[method-assign]
    _originals["session_of_thread"] = session_of_thread


def unpatch() -> None:
    threading.Thread.start = _originals["start"]  # type: ignore[method-assign]
    StatusTracker.getJobIdsForGroup = _originals["group_jobs"]  # type: ignore[method-assign]
    StatusTracker.getActiveJobsIds = _originals["active_jobs"]  # type: ignore[method-assign]
    StatusTracker.getActiveStageIds = _originals["active_stages"]  # type: ignore[method-assign]
    _originals.clear()


def _run_as_script(thread: threading.Thread, session: Any,
                   set_session: Callable[[Any], None]) -> None:
    """Called on the script's thread as it starts ``thread``: the Spark properties are
    copied now (the JVM's inheritable properties are copied at start too)."""
    context = SparkContext._active_spark_context
    properties = context._jsc.sc().getLocalProperties().clone() if context else None
    run = bound_to_this_thread(thread.run)

    def as_script() -> None:
        if properties is not None and SparkContext._active_spark_context is context:
            context._jsc.sc().setLocalProperties(properties)  # type: ignore[union-attr]
        set_session(session)
        try:
            run()
        finally:
            set_session(None)

    thread.run = as_script  # type: ignore[method-assign]


def _own_group() -> str | None:
    """This thread's job group when it runs a script (or was started by one)."""
    if _originals["session_of_thread"]() is None:
        return None
    context = SparkContext._active_spark_context
    return context.getLocalProperty(JOB_GROUP) if context is not None else None


def _group_jobs(self: StatusTracker, jobGroup: str | None = None) -> list[int]:
    group = jobGroup if jobGroup is not None else _own_group()
    return _originals["group_jobs"](self, group)


def _active_jobs(self: StatusTracker) -> list[int]:
    active = _originals["active_jobs"](self)
    group = _own_group()
    if group is None:
        return active
    own = set(_originals["group_jobs"](self, group))
    return [job for job in active if job in own]


def _active_stages(self: StatusTracker) -> list[int]:
    active = _originals["active_stages"](self)
    group = _own_group()
    if group is None:
        return active
    stages: set[int] = set()
    for job in _active_jobs(self):
        info = self.getJobInfo(job)
        stages.update(info.stageIds if info is not None else ())
    return [stage for stage in active if stage in stages]
