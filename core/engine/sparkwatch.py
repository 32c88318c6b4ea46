"""Following one attempt's Spark jobs while its PySpark script runs: its job group's jobs,
their stages and failed tasks (``sparkstatus.SparkWorkBook`` keeps and bounds them).

Which Spark jobs are the attempt's comes from the status tracker
(``getJobIdsForGroup(<attempt id>)``, one Py4J call); what they are from Spark's UI REST
API on the TaskManager's own SparkContext (``/api/v1/applications/<app>/jobs/<id>``,
``/stages/<id>``, ``.../taskList?status=FAILED``): the status tracker alone has neither the
call site (the script's line), nor input and shuffle bytes, nor the failed tasks' errors.
Measured on a 2-core machine: a poll through the status tracker 3 ms, through the REST API
18 ms with one running job and stage (40 ms and more on a loaded machine); so only what
may still change is asked (jobs not ended, their stages not ended, failed tasks not
fetched yet), and while a stage runs on its counts come from the status tracker, its
bytes and records from the REST API every ``DETAIL_INTERVAL`` seconds. Without a UI
(``spark.ui.enabled = false``) the status tracker's numbers are used, without bytes,
call sites or errors.

Neither the REST API nor the status tracker has a stage's parents. They come from what
Spark's UI draws a job's DAG with: the application status store's operation graph of
the job (``AppStatusStore.operationGraphForJob``, through Py4J; written when the job
starts), once per job, a few Py4J calls per stage. It is Spark's internal API (public
in the bytecode only): a Spark without it, or a job it no longer keeps, gives stages
without parents, and a warning.

``poll`` runs on the TaskManager's Spark-work thread while the script runs, and once more
on the slot thread when it ends; a lock keeps the two apart. Never on an endpoint's main
thread: both are blocking calls to the JVM.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from clusterdeck.core.engine.sparkstatus import RddEdge, SparkWorkBook, StageEdges
from clusterdeck.core.protocol.sparkwork import FAILED_TASKS_KEPT, SparkWork

log = logging.getLogger(__name__)
# Seconds for one answer of the Spark UI (in the same JVM): its REST API starts on the first
# request, which took over 5 s on a busy 2-core machine.
HTTP_TIMEOUT = 30.0
# Seconds between two polls that ask the REST API for all; the others ask it only for what
# the status tracker says changed beyond its counts (a stage or job ended, a task failed).
# A running stage's bytes and records are that old at most. Every 2 s, the REST calls were
# a fifth of following's cost to a script of 20,000 tiny tasks (docs/benchmarks.md, 24).
DETAIL_INTERVAL = 5.0
_OWN_UI = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
_EDGE = re.compile(r"RDDOperationEdge\((\d+),(\d+)\)")
_STAGE_CLUSTER = re.compile(r"stage_(\d+)")


class SparkWatch:
    """``context()``: the TaskManager's SparkContext (waited for by the caller);
    ``clock()``: monotonic seconds."""

    def __init__(self, context: Callable[[], Any], attempt_id: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._context = context
        self._book = SparkWorkBook(attempt_id)
        self._lock = threading.Lock()
        self._clock = clock
        self._api: str | None = None
        self._detail_due = -math.inf
        self._graph_warned = False

    def poll(self) -> SparkWork:
        """The attempt's Spark work now; what Spark did not answer stays as last seen."""
        with self._lock:
            try:
                self._ask_spark()
            except Exception as error:  # a JVM going down: the report says what was seen
                log.warning("following the Spark jobs of %s: %s", self._book.attempt_id, error)
            return self._book.work()

    def _ask_spark(self) -> None:
        context = self._context()
        tracker = context.statusTracker()
        group_jobs = sorted(tracker.getJobIdsForGroup(self._book.attempt_id))
        asked = self._book.jobs_to_ask(group_jobs)
        api = self._rest_api(context)
        if api is None:
            self._from_tracker(tracker, asked)
            self._ask_graphs(context)
            return
        now = self._clock()
        detail = now >= self._detail_due
        if detail:
            self._detail_due = now + DETAIL_INTERVAL
        for job_id in asked:
            if detail or not self._book.running(job_id) or \
                    getattr(tracker.getJobInfo(job_id), "status", None) != "RUNNING":
                self._book.job_seen(_get(f"{api}/jobs/{job_id}") or {"jobId": job_id})
        self._ask_graphs(context)
        for stage_id in self._book.stages_to_ask(asked):
            if not detail and self._counted(tracker, stage_id):
                continue
            for attempt in _get(f"{api}/stages/{stage_id}?details=false") or ():
                self._book.stage_seen(attempt)
        for stage_id, attempt, failed in self._book.failures_to_ask():
            # The last ones: Spark lists a stage's failed tasks by task id, oldest first.
            self._book.failures_seen(stage_id, attempt, _get(
                f"{api}/stages/{stage_id}/{attempt}/taskList?status=FAILED"
                f"&offset={max(0, failed - FAILED_TASKS_KEPT)}&length={FAILED_TASKS_KEPT}")
                or [])

    def _ask_graphs(self, context: Any) -> None:
        for job_id in self._book.graphs_to_ask():
            try:
                self._book.graph_seen(job_id, stage_edges(context, job_id))
            except Exception as error:  # another Spark's internals, a job it no longer keeps
                self._book.graph_unavailable(job_id)
                if not self._graph_warned:
                    self._graph_warned = True
                    log.warning("no parent stages for Spark job %d of %s: %s", job_id,
                                self._book.attempt_id, error)

    def _counted(self, tracker: Any, stage_id: int) -> bool:
        """The stage's task counts from the status tracker when nothing else of it can have
        changed (it runs on, or is not submitted yet): no REST call this poll."""
        info = tracker.getStageInfo(stage_id)
        if info is None:
            return not self._book.knows_stage(stage_id)
        return self._book.counts_seen(stage_id, info.currentAttemptId, info.numTasks,
                                      info.numActiveTasks, info.numCompletedTasks,
                                      info.numFailedTasks)

    def _rest_api(self, context: Any) -> str | None:
        if self._api is None:
            url = context.uiWebUrl
            if not url:
                return None
            self._api = f"{url}/api/v1/applications/{quote(context.applicationId, safe='')}"
        return self._api

    def _from_tracker(self, tracker: Any, asked: list[int]) -> None:
        for job_id in asked:
            job = tracker.getJobInfo(job_id)
            self._book.job_seen({"jobId": job_id} if job is None else {
                "jobId": job_id, "status": job.status, "stageIds": list(job.stageIds)})
        for stage_id in self._book.stages_to_ask(asked):
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                self._book.stage_seen({
                    "stageId": stage_id, "attemptId": stage.currentAttemptId,
                    "name": stage.name, "numTasks": stage.numTasks,
                    "numActiveTasks": stage.numActiveTasks,
                    "numCompleteTasks": stage.numCompletedTasks,
                    "numFailedTasks": stage.numFailedTasks,
                    "status": _tracked_status(stage)})


def start_rest_api(context: Any) -> None:
    """Spark's UI starts its REST API at the first request: 1.4 s, and 2 s of the JVM's
    CPU, on a 2-core machine (measured with Spark 4.3; the next requests take 5-15 ms).
    Asked once as Spark starts, on a thread of its own, it is paid there and not by the
    first followed script. A failure here is only logged: the first poll asks again and
    reports what it finds."""
    url = context.uiWebUrl
    if not url:
        return

    def ask() -> None:
        try:
            _get(f"{url}/api/v1/version")
        except Exception as error:  # the polls meet it again and say so on the attempt
            log.warning("Spark's UI REST API did not answer as Spark started: %s", error)
    threading.Thread(target=ask, name="spark-rest-start", daemon=True).start()


def stage_edges(context: Any, job_id: int) -> dict[int, StageEdges]:
    """The job's operation graph as Spark's status store keeps it, by stage id: one
    ``RDDOperationGraph`` per stage, its root cluster named ``stage_<id>``, its edges
    inside the stage and into it from other stages' RDDs (read from their ``toString``:
    one Py4J call a list)."""
    graphs = context._jsc.sc().statusStore().operationGraphForJob(job_id)
    found: dict[int, StageEdges] = {}
    for index in range(graphs.size()):
        graph = graphs.apply(index)
        stage = _STAGE_CLUSTER.fullmatch(graph.rootCluster().id())
        if stage is not None:
            inside, incoming = _edges(graph.edges()), _edges(graph.incomingEdges())
            rdds = {rdd for edge in inside for rdd in edge} | {rdd for _, rdd in incoming}
            found[int(stage.group(1))] = StageEdges(frozenset(rdds), incoming)
    return found


def _edges(edges: Any) -> frozenset[RddEdge]:
    return frozenset((int(a), int(b)) for a, b in _EDGE.findall(edges.toString()))


def _tracked_status(stage: Any) -> str:
    """The status tracker has no stage status: all tasks done is COMPLETE."""
    if stage.numTasks and stage.numCompletedTasks >= stage.numTasks:
        return "COMPLETE"
    return "ACTIVE" if stage.numActiveTasks else "PENDING"


def _get(url: str) -> Any:
    """Spark's answer; None for what its UI no longer keeps (``spark.ui.retainedJobs``)."""
    try:
        with _OWN_UI.open(url, timeout=HTTP_TIMEOUT) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
