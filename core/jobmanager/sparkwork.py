"""A PySpark script job's Spark work: the Spark jobs, stages and failed tasks of its
attempts, as their TaskManagers report them (``SparkWorkReport``), for the job's snapshot
and its progress.

Each report is an attempt's whole Spark work (bounded by its sender, checked here again:
``check_spark_work``), so only the newest of each attempt is kept, and only the last
``ATTEMPTS_KEPT`` attempts': a script retried a hundred times must not grow the snapshot.
A report older than the one kept (its ``reports`` count not higher) is dropped.

Main thread of the JobMaster only.
"""

from __future__ import annotations

from clusterdeck.core.protocol.sparkwork import SparkWork, check_spark_work
from clusterdeck.core.rpc import RefusedMessageError

ATTEMPTS_KEPT = 3


class ScriptSparkWork:
    def __init__(self) -> None:
        self._work: dict[str, SparkWork] = {}  # by attempt id, oldest attempt first

    def reported(self, work: SparkWork) -> bool:
        """Keep ``work`` if it is newer than what is kept; True when it was.
        RefusedMessageError for a report no honest TaskManager sends."""
        try:
            check_spark_work(work)
        except ValueError as error:
            raise RefusedMessageError(f"Spark work of {work.attempt_id}: {error}") from error
        kept = self._work.get(work.attempt_id)
        if kept is not None and kept.reports >= work.reports:
            return False
        self._work[work.attempt_id] = work
        while len(self._work) > ATTEMPTS_KEPT:
            del self._work[next(iter(self._work))]
        return True

    def snapshot(self) -> tuple[SparkWork, ...]:
        return tuple(self._work.values())

    def stage_progress(self) -> tuple[int, int] | None:
        """Stages done of the stages known, of the newest attempt that ran Spark jobs;
        None when none did."""
        for work in reversed(self._work.values()):
            done, total = work.stage_progress()
            if total:
                return done, total
        return None

    def progress(self, subtasks: tuple[int, int]) -> tuple[int, int]:
        """``stage_progress``, or ``subtasks`` (finished, total) when no attempt ran Spark
        jobs."""
        return self.stage_progress() or subtasks
