"""A PySpark script's own Spark work: its Spark jobs, their stages and its failed tasks,
as its TaskManager follows them (``SparkWorkReport``) and as the job's snapshot shows them.

A script may run 100,000 Spark tasks in hundreds of Spark jobs; what travels is bounded
whatever it runs: the newest ``JOBS_KEPT`` Spark jobs (the running ones first), the
newest ``STAGES_KEPT`` stages, the last ``FAILED_TASKS_KEPT`` failed tasks, and the rest
summed up in ``earlier``. Each report is the attempt's whole (bounded) Spark work, not a
change: a lost report costs nothing, the next one says it all. ``check_spark_work``
refuses what no honest TaskManager sends (the codec has checked the types already).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from clusterdeck.core.rpc import message

JOBS_KEPT = 16  # Spark jobs listed in one report; older finished ones are summed up
STAGES_KEPT = 32  # stages listed; the active ones first
PARENTS_KEPT = 8  # parent stages of one stage (a join of more shuffles lists its first 8)
FAILED_TASKS_KEPT = 8  # the last failed tasks, with Spark's error
NAME_KEPT = 200  # characters of a job's or a stage's name (Spark's call site) or description
ERROR_KEPT = 2000  # characters of a failed task's error as Spark gives it
SUMMARY_KEPT = 300  # characters of its one-line summary
REPORT_INTERVAL = 0.5  # seconds between two reports of one attempt, at least
MOST = 2**62  # larger counts and byte totals are refused as hostile


class SparkJobStatus(StrEnum):
    """Spark's JobExecutionStatus."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"


class SparkStageStatus(StrEnum):
    """Spark's StageStatus."""

    ACTIVE = "ACTIVE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    PENDING = "PENDING"
    SKIPPED = "SKIPPED"

    @property
    def done(self) -> bool:
        """Counts as done in the job's progress: it ran, or Spark had its output already."""
        return self in (SparkStageStatus.COMPLETE, SparkStageStatus.SKIPPED)


@dataclass(frozen=True)
class SparkJob:
    """One Spark job of the script. ``name``: Spark's call site, the action and the script
    line that called it (``count at wordcount.py:12``); ``description``: what the script
    set with ``setJobDescription``, else its job group's."""

    job_id: int
    name: str
    description: str
    status: SparkJobStatus
    stage_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class SparkStage:
    """One attempt of one stage (``attempt`` > 0: Spark ran it again, after a fetch
    failure or a lost executor). Tasks: ``tasks`` in all, ``running`` now, ``done``,
    ``failed`` (attempts of tasks that failed, retried or not). ``parent_ids``: the stages
    whose shuffle output it reads, Spark's edges of the job's DAG (empty: none, or not
    known)."""

    stage_id: int
    attempt: int
    job_id: int
    name: str
    status: SparkStageStatus
    tasks: int
    running: int = 0
    done: int = 0
    failed: int = 0
    input_bytes: int = 0
    input_records: int = 0
    shuffle_read_bytes: int = 0
    shuffle_read_records: int = 0
    shuffle_write_bytes: int = 0
    shuffle_write_records: int = 0
    parent_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class SparkTaskFailure:
    """One failed attempt of a Spark task: ``index`` is the task's partition in its
    stage, ``attempt`` which try of it failed (Spark retries up to
    ``spark.task.maxFailures``); ``summary`` Spark's error in one line (for a Python
    task its exception, ``ValueError: bad record``), ``error`` as Spark gave it."""

    stage_id: int
    stage_attempt: int
    task_id: int
    index: int
    attempt: int
    executor: str
    summary: str
    error: str = ""


@dataclass(frozen=True)
class SparkTotals:
    """What a report does not list, summed up: Spark jobs, stages (and of them done), tasks
    (and of them done and failed)."""

    jobs: int = 0
    stages: int = 0
    stages_done: int = 0
    tasks: int = 0
    tasks_done: int = 0
    tasks_failed: int = 0


@dataclass(frozen=True)
class SparkWork:
    """An attempt's Spark work so far: ``jobs`` oldest first, ``stages`` by id,
    ``failed_tasks`` oldest first; ``earlier`` what is not listed; ``reports``: how many
    reports its TaskManager sent so far (this one included)."""

    attempt_id: str
    jobs: tuple[SparkJob, ...] = ()
    stages: tuple[SparkStage, ...] = ()
    failed_tasks: tuple[SparkTaskFailure, ...] = ()
    earlier: SparkTotals = field(default_factory=SparkTotals)
    reports: int = 0

    def stage_progress(self) -> tuple[int, int]:
        """Stages done (or skipped) of the stages known: the script's progress."""
        done = sum(1 for stage in self.stages if stage.status.done)
        return done + self.earlier.stages_done, len(self.stages) + self.earlier.stages

    def latest_failed_stage(self) -> SparkStage | None:
        return next((stage for stage in reversed(self.stages)
                     if stage.status is SparkStageStatus.FAILED), None)


@message
@dataclass(frozen=True)
class SparkWorkReport:
    """TaskExecutor -> JobMaster (tell), at most every ``REPORT_INTERVAL`` per attempt while
    a PySpark script runs and its Spark work changed, and once when it ends (before its
    final state): the attempt's Spark work as it is now."""

    job_id: str
    work: SparkWork


def check_spark_work(work: SparkWork) -> None:
    """ValueError for a report no honest TaskManager sends: more than the bounds above,
    negative or absurd numbers, task counts that do not add up."""
    if len(work.jobs) > JOBS_KEPT or len(work.stages) > STAGES_KEPT or \
            len(work.failed_tasks) > FAILED_TASKS_KEPT:
        raise ValueError("more Spark jobs, stages or failed tasks than a report may list")
    numbers = [work.reports, *vars(work.earlier).values()]
    for job in work.jobs:
        _check_text(NAME_KEPT, job.name, job.description)
        numbers += [job.job_id, *job.stage_ids]
        if len(job.stage_ids) > STAGES_KEPT * 4:
            raise ValueError(f"Spark job {job.job_id} lists too many stages")
    for stage in work.stages:
        _check_text(NAME_KEPT, stage.name)
        numbers += [v for v in vars(stage).values() if isinstance(v, int)]
        numbers += stage.parent_ids
        if len(stage.parent_ids) > PARENTS_KEPT:
            raise ValueError(f"Spark stage {stage.stage_id} lists too many parent stages")
        if stage.running + stage.done > stage.tasks:
            raise ValueError(f"Spark stage {stage.stage_id}: more tasks running and done "
                             "than it has")
    for task in work.failed_tasks:
        _check_text(NAME_KEPT, task.executor)
        _check_text(SUMMARY_KEPT, task.summary)
        if len(task.error) > ERROR_KEPT:
            raise ValueError("a failed Spark task's error is too long")
        numbers += [task.stage_id, task.stage_attempt, task.task_id, task.index, task.attempt]
    if any(not 0 <= number < MOST for number in numbers):
        raise ValueError("a Spark count or id out of range")


def _check_text(most: int, *texts: str) -> None:
    if any(len(text) > most for text in texts):
        raise ValueError("a Spark name, description or summary is too long")
