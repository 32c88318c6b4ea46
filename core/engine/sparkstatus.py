"""An attempt's Spark work, from what Spark's status API says to the bounded ``SparkWork``
its TaskManager reports (``clusterdeck.core.protocol.sparkwork``).

Pure: ``SparkWorkBook`` takes the JSON of Spark's UI REST API (``/jobs/<id>``,
``/stages/<id>``, ``.../taskList?status=FAILED``) as ``sparkwatch.py`` fetches it and
keeps what the attempt's Spark jobs did; ``work()`` makes the report: the newest
``JOBS_KEPT`` jobs (running ones first), the newest ``STAGES_KEPT`` stage attempts (active
ones first), the last ``FAILED_TASKS_KEPT`` failed tasks, the rest summed up. Each
stage's parents come from the edges of the job's RDD graph that cross stages
(``stage_parents``). What it keeps grows with the attempt's Spark jobs and stages, never
with its tasks.
Used by one thread at a time (``sparkwatch.SparkWatch`` holds its lock).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from clusterdeck.core.protocol.sparkwork import (
    ERROR_KEPT,
    FAILED_TASKS_KEPT,
    JOBS_KEPT,
    MOST,
    NAME_KEPT,
    PARENTS_KEPT,
    STAGES_KEPT,
    SUMMARY_KEPT,
    SparkJob,
    SparkJobStatus,
    SparkStage,
    SparkStageStatus,
    SparkTaskFailure,
    SparkTotals,
    SparkWork,
)

# UNKNOWN: Spark no longer keeps the job (``spark.ui.retainedJobs``); it is not asked again.
_FINAL_JOB = (SparkJobStatus.SUCCEEDED, SparkJobStatus.FAILED, SparkJobStatus.UNKNOWN)
_FINAL_STAGE = (SparkStageStatus.COMPLETE, SparkStageStatus.FAILED, SparkStageStatus.SKIPPED)
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*)$")
RddEdge = tuple[int, int]  # (parent RDD id, child RDD id), as Spark's operation graph has them


@dataclass(frozen=True)
class StageEdges:
    """One stage in its job's RDD graph: ``rdds``, the RDDs it runs that an edge touches
    (a stage of one RDD and no edge has none: it is found as nobody's parent), and
    ``incoming``, the edges from its parent stages' RDDs (the shuffles it reads)."""

    rdds: frozenset[int]
    incoming: frozenset[RddEdge]


@dataclass
class _Stage:
    stage: SparkStage
    failed_seen: int = 0  # failed tasks already fetched

    @property
    def final(self) -> bool:
        return self.stage.status in _FINAL_STAGE


class SparkWorkBook:
    """What one attempt's Spark jobs did, as far as Spark said."""

    def __init__(self, attempt_id: str) -> None:
        self.attempt_id = attempt_id
        self.jobs: dict[int, SparkJob] = {}
        self.stages: dict[tuple[int, int], _Stage] = {}  # (stage id, attempt)
        self.failed: deque[SparkTaskFailure] = deque(maxlen=FAILED_TASKS_KEPT)
        self.parents: dict[int, tuple[int, ...]] = {}  # by stage id
        self._graphed: set[int] = set()  # jobs whose stages' parents are all known

    # -- what to ask Spark next ------------------------------------------------------------------

    def jobs_to_ask(self, group_job_ids: list[int]) -> list[int]:
        """The attempt's jobs Spark may still change: new ones and those not ended."""
        return [job_id for job_id in group_job_ids
                if job_id not in self.jobs or self.jobs[job_id].status not in _FINAL_JOB]

    def stages_to_ask(self, job_ids: list[int]) -> list[int]:
        """Stages of ``job_ids`` (those just asked) not known to have ended."""
        wanted: list[int] = []
        for job_id in job_ids:
            for stage_id in self.jobs[job_id].stage_ids if job_id in self.jobs else ():
                ended = [s.final for (sid, _), s in self.stages.items() if sid == stage_id]
                if (not ended or not all(ended)) and stage_id not in wanted:
                    wanted.append(stage_id)
        return wanted

    def failures_to_ask(self) -> list[tuple[int, int, int]]:
        """Stage attempts with failed tasks not fetched yet: (stage id, attempt, failed)."""
        return [(*key, kept.stage.failed) for key, kept in self.stages.items()
                if kept.stage.failed > kept.failed_seen]

    def graphs_to_ask(self) -> list[int]:
        """Jobs whose stages' parents are not known yet (asked once a job has stages)."""
        return [job_id for job_id, job in self.jobs.items()
                if job.stage_ids and job_id not in self._graphed]

    def running(self, job_id: int) -> bool:
        job = self.jobs.get(job_id)
        return job is not None and job.status is SparkJobStatus.RUNNING

    def knows_stage(self, stage_id: int) -> bool:
        return any(sid == stage_id for sid, _ in self.stages)

    # -- what Spark said ---------------------------------------------------------------------------

    def counts_seen(self, stage_id: int, attempt: int, tasks: int, running: int, done: int,
                    failed: int) -> bool:
        """The status tracker's counts of a stage attempt known to run; False (ask the
        REST API) when they say more than counts changed: another attempt, a task failed,
        all tasks done, or a stage not known to run."""
        kept = self.stages.get((stage_id, attempt))
        if kept is None or kept.stage.status is not SparkStageStatus.ACTIVE or \
                tasks != kept.stage.tasks or failed != kept.stage.failed or done >= tasks:
            return False
        running = min(_count(running), tasks)
        kept.stage = replace(kept.stage, running=running,
                             done=min(_count(done), tasks - running))
        return True

    def job_seen(self, data: dict[str, Any]) -> None:
        job_id = _count(data.get("jobId"))
        self.jobs[job_id] = SparkJob(
            job_id, _text(data.get("name"), NAME_KEPT), _text(data.get("description"),
                                                              NAME_KEPT),
            _enum(SparkJobStatus, data.get("status"), SparkJobStatus.UNKNOWN),
            tuple(_count(s) for s in data.get("stageIds") or ())[:STAGES_KEPT * 4])

    def stage_seen(self, data: dict[str, Any]) -> None:
        """One attempt of a stage, as ``/stages/<id>`` lists them."""
        stage_id, attempt = _count(data.get("stageId")), _count(data.get("attemptId"))
        tasks = _count(data.get("numTasks"))
        running = min(_count(data.get("numActiveTasks")), tasks)
        stage = SparkStage(
            stage_id, attempt, self._job_of(stage_id), _text(data.get("name"), NAME_KEPT),
            _enum(SparkStageStatus, data.get("status"), SparkStageStatus.PENDING), tasks,
            running=running, done=min(_count(data.get("numCompleteTasks")), tasks - running),
            failed=_count(data.get("numFailedTasks")),
            input_bytes=_count(data.get("inputBytes")),
            input_records=_count(data.get("inputRecords")),
            shuffle_read_bytes=_count(data.get("shuffleReadBytes")),
            shuffle_read_records=_count(data.get("shuffleReadRecords")),
            shuffle_write_bytes=_count(data.get("shuffleWriteBytes")),
            shuffle_write_records=_count(data.get("shuffleWriteRecords")))
        kept = self.stages.get((stage_id, attempt))
        self.stages[(stage_id, attempt)] = _Stage(stage, kept.failed_seen if kept else 0)

    def failures_seen(self, stage_id: int, attempt: int, tasks: list[dict[str, Any]]) -> None:
        """The stage attempt's failed tasks, as ``taskList?status=FAILED`` gives them."""
        kept = self.stages[(stage_id, attempt)]
        known = {(f.stage_id, f.stage_attempt, f.task_id, f.attempt) for f in self.failed}
        for task in sorted(tasks, key=lambda t: _count(t.get("taskId"))):
            failure = SparkTaskFailure(
                stage_id, attempt, _count(task.get("taskId")), _count(task.get("index")),
                _count(task.get("attempt")), _text(task.get("executorId"), NAME_KEPT),
                summary_of(str(task.get("errorMessage") or "")),
                _text(task.get("errorMessage"), ERROR_KEPT))
            if (stage_id, attempt, failure.task_id, failure.attempt) not in known:
                self.failed.append(failure)
        kept.failed_seen = kept.stage.failed

    def graph_seen(self, job_id: int, edges: Mapping[int, StageEdges]) -> None:
        """The job's operation graph, by stage id (Spark writes it when the job starts;
        asked again while it lacks some of the job's stages and the job runs on)."""
        self.parents.update(stage_parents(edges))
        job = self.jobs[job_id]
        if set(job.stage_ids) <= set(edges) or job.status in _FINAL_JOB:
            self._graphed.add(job_id)

    def graph_unavailable(self, job_id: int) -> None:
        """Spark gave no graph of the job: its stages stay without parents."""
        self._graphed.add(job_id)

    def _job_of(self, stage_id: int) -> int:
        return max((job.job_id for job in self.jobs.values() if stage_id in job.stage_ids),
                   default=0)

    # -- the report --------------------------------------------------------------------------------

    def work(self) -> SparkWork:
        """The report: bounded, whatever the attempt ran."""
        jobs = sorted(self.jobs.values(), key=lambda j: (j.status is SparkJobStatus.RUNNING,
                                                         j.job_id))[-JOBS_KEPT:]
        stages = sorted((replace(kept.stage, parent_ids=self.parents.get(sid, ()))
                         for (sid, _), kept in self.stages.items()),
                        key=lambda s: (s.status is SparkStageStatus.ACTIVE, s.stage_id,
                                       s.attempt))[-STAGES_KEPT:]
        listed = {(s.stage_id, s.attempt) for s in stages}
        left = [kept.stage for key, kept in self.stages.items() if key not in listed]
        earlier = SparkTotals(
            jobs=len(self.jobs) - len(jobs), stages=len(left),
            stages_done=sum(1 for s in left if s.status.done),
            tasks=_bounded(sum(s.tasks for s in left)),
            tasks_done=_bounded(sum(s.done for s in left)),
            tasks_failed=_bounded(sum(s.failed for s in left)))
        return SparkWork(self.attempt_id, tuple(sorted(jobs, key=lambda j: j.job_id)),
                         tuple(sorted(stages, key=lambda s: (s.stage_id, s.attempt))),
                         tuple(self.failed), earlier)


def stage_parents(edges: Mapping[int, StageEdges]) -> dict[int, tuple[int, ...]]:
    """Each stage's parents in one job's graph: the stages an edge into it leaves from
    (the first ``PARENTS_KEPT`` by id). Spark's REST API and status tracker have no
    parent ids; this is how its UI draws a job's DAG."""
    runs: dict[int, set[int]] = {}  # the stages each RDD runs in
    for stage_id, stage in edges.items():
        for rdd in stage.rdds:
            runs.setdefault(rdd, set()).add(stage_id)
    parents: dict[int, tuple[int, ...]] = {}
    for stage_id, stage in edges.items():
        found = {parent for rdd, _ in stage.incoming for parent in runs.get(rdd, ())}
        parents[stage_id] = tuple(sorted(found - {stage_id}))[:PARENTS_KEPT]
    return parents


def summary_of(error: str) -> str:
    """Spark's error in one line: a Python task's exception line (the last of its
    traceback: ``ValueError: bad record 3``), else the first line (a JVM exception)."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    python = [line for line in lines if _EXCEPTION_LINE.match(line)
              and not line.startswith(("org.", "java.", "scala."))]
    if "Traceback (most recent call last)" in error and python:
        return python[-1][:SUMMARY_KEPT]
    return (lines[0] if lines else "")[:SUMMARY_KEPT]


def _count(value: Any) -> int:
    """A count or id from Spark's JSON, kept within what the report may carry."""
    return min(max(value, 0), MOST - 1) if isinstance(value, int) else 0


def _bounded(value: int) -> int:
    return min(value, MOST - 1)


def _text(value: Any, most: int) -> str:
    return str(value or "")[:most]


def _enum(kind: Any, value: Any, default: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        return default


def spark_cause(work: SparkWork) -> str | None:
    """What failed in Spark, for a script that failed: the last failed stage (its name is
    Spark's call site, the action and the script's line) and its last failed task with
    Spark's error; None when no stage failed."""
    stage = work.latest_failed_stage()
    if stage is None:
        return None
    where = f"Spark stage {stage.stage_id}.{stage.attempt} ({stage.name}) failed"
    task = next((t for t in reversed(work.failed_tasks)
                 if (t.stage_id, t.stage_attempt) == (stage.stage_id, stage.attempt)), None)
    if task is None:
        return where
    return (f"{where}: task {task.index}.{task.attempt} (TID {task.task_id}) on executor "
            f"{task.executor}, after {stage.failed} failed task attempt(s): {task.summary}")


def with_spark_cause(message: str, work: SparkWork) -> str:
    """A failed script's message named by what failed in Spark (``spark_cause``), the
    message kept when the cause does not already say it."""
    cause = spark_cause(work)
    if cause is None:
        return message
    return cause if message in cause else f"{cause} ({message})"
