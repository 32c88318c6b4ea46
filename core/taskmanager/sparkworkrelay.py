"""A running PySpark script's Spark jobs, stages and failed tasks, reported to its JobMaster.

Every ``REPORT_INTERVAL`` while scripts run, each script's Spark work is asked of Spark
(``engine.sparkwatch``) on one thread of its own (one Py4J connection, and the main thread
never waits for the JVM); what changed goes to the script's JobMaster as a
``SparkWorkReport``, bounded (``protocol.sparkwork``): at most two reports a second per
attempt, whatever Spark runs. A script's last report (polled on its slot thread when it
ends) goes before its final state, so the job's last snapshot has Spark's final counts.

Main thread of the TaskExecutor only (``Endpoint``), but for the polls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.gateways import JobMasterGateway
from clusterdeck.core.protocol.sparkwork import REPORT_INTERVAL, SparkWork
from clusterdeck.core.taskmanager.endpoint import Endpoint
from clusterdeck.core.taskmanager.tasks import Task

log = logging.getLogger(__name__)


class SparkWorkRelay:
    """``running()``: the tasks running now."""

    def __init__(self, endpoint: Endpoint, running: Callable[[], Collection[Task]]) -> None:
        self._endpoint = endpoint
        self._running = running
        self._ticking = False
        self._polling: set[str] = set()  # attempts whose poll is under way
        self._sent: dict[str, SparkWork] = {}  # the last report of each running script
        self._poller = ThreadPoolExecutor(1, thread_name_prefix="spark-work")

    def stop(self) -> None:
        self._poller.shutdown(wait=False, cancel_futures=True)

    def tick_soon(self) -> None:
        """A task began: the ticks run (again) while scripts run."""
        if not self._ticking and any(t.spark_watch for t in self._running()):
            self._ticking = True
            self._endpoint.schedule(REPORT_INTERVAL, self._tick)

    def last_of(self, task: Task) -> None:
        """``task`` ended: its last Spark work goes now, if it changed."""
        if task.final_spark_work is not None:
            self._send(task, task.final_spark_work)
        self._sent.pop(task.attempt_id, None)

    def _tick(self) -> None:
        self._ticking = False
        for task in self._running():
            if task.spark_watch is not None and task.alive and task.spark_ready and \
                    task.attempt_id not in self._polling:
                self._polling.add(task.attempt_id)
                future = self._poller.submit(task.spark_watch.poll)
                self._endpoint.on_main_thread(
                    future, lambda work, error, t=task: self._polled(t, work, error))
        self.tick_soon()

    def _polled(self, task: Task, work: SparkWork | None, error: BaseException | None) -> None:
        self._polling.discard(task.attempt_id)
        if error is not None:  # poll logs Spark's errors itself: this is a bug of ours
            log.error("following the Spark jobs of %s", task.attempt_id, exc_info=error)
        elif work is not None and task.alive:  # an ended task's last report went already
            self._send(task, work)

    def _send(self, task: Task, work: SparkWork) -> None:
        last = self._sent.get(task.attempt_id)
        if last is not None and _same_but_count(last, work):
            return
        work = replace(work, reports=(last.reports if last else 0) + 1)
        self._sent[task.attempt_id] = work
        deployment = task.deployment
        jobmaster = self._endpoint.rpc_service.gateway(
            JobMasterGateway, deployment.jobmaster, deployment.fencing_token)
        jobmaster.spark_work_report(p.SparkWorkReport(deployment.job_id, work))


def _same_but_count(before: SparkWork, now: SparkWork) -> bool:
    return (before.jobs, before.stages, before.failed_tasks, before.earlier) == \
        (now.jobs, now.stages, now.failed_tasks, now.earlier)
