"""A TaskManager's live numbers (docs/metrics.md): what its attempts read and wrote so far
and its Spark JVM's heap, published on ``metrics/<taskmanager-id>`` for the window and the
recorder.

Once a second while attempts run, one message carries every running attempt's numbers
and the last numbers of those that ended since (``final``), in pieces of at most
METRICS_ATTEMPTS; when idle, the heap alone every IDLE_INTERVAL. QoS 0: a lost message
is followed by the next one, whose numbers are totals, not increments. Nothing here
starts Spark work: records so far are what Spark's accumulators already hold
(core/engine/tally.py); the heap is read by one Py4J call on a worker thread.

A streaming attempt's backpressure goes as its total so far, like ``busy``, not as a share
computed here: the window takes the share of each second from two messages it got (a
lost message, or a recording replayed, then costs nothing), and keeping no previous
value per attempt here keeps this side stateless. Its watermark goes as it is, the end
of event time as ``watermark_end`` (JSON has no infinity).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.taskmanager.tasks import Task, TaskOutcome

INTERVAL = 1.0        # seconds between two messages while attempts run
IDLE_INTERVAL = 5.0   # ... and while none does (the heap only)


class TaskMetrics:
    """The numbers of one TaskExecutor's attempts (its main thread only)."""

    def __init__(self, taskmanager_id: str) -> None:
        self.taskmanager_id = taskmanager_id
        self.heap: tuple[int, int] = (-1, -1)  # used, max; set from a worker's reading
        self.spark_ui = ""                       # its address, read with the heap
        # attempt id -> the pids of Spark's pooled Python workers running its records, as
        # read last on a worker (core/engine/workermarks.py)
        self.spark_workers: dict[str, list[int]] = {}
        self._began: dict[str, float] = {}     # attempt -> monotonic time it began
        self._ended: list[p.AttemptMetrics] = []

    def began(self, task: Task) -> None:
        self._began.setdefault(task.attempt_id, time.monotonic())

    def ended(self, task: Task, outcome: TaskOutcome) -> None:
        """Its last numbers go with the next message; a finished attempt's records are its
        result's, so the totals shown equal the job result's."""
        began = self._began.pop(task.attempt_id, None)
        busy = _busy(time.monotonic() - began, task) if began is not None else 0.0
        records_in, records_out, bytes_in, bytes_out = task.counts.now()
        if outcome.result is not None:
            records_in, records_out = outcome.result.records_in, outcome.result.records_out
        self._ended.append(_numbers(task, records_in, records_out, bytes_in, bytes_out,
                                    busy, final=True))

    @property
    def busy(self) -> bool:
        return bool(self._began or self._ended)

    def messages(self, running: Iterable[Task]) -> list[p.TaskManagerMetrics]:
        """What to publish now: every attempt that began and the ended ones, in pieces."""
        now = time.monotonic()
        attempts = [_numbers(task, *task.counts.now(),
                             _busy(now - self._began[task.attempt_id], task),
                             spark_workers=self.spark_workers.get(task.attempt_id, ()))
                    for task in running if task.attempt_id in self._began]
        return self._pieces(attempts + self._take_ended())

    def ended_messages(self) -> list[p.TaskManagerMetrics]:
        """The last numbers of the attempts that ended since, alone: sent with their ends."""
        ended = self._take_ended()
        return self._pieces(ended) if ended else []

    def _take_ended(self) -> list[p.AttemptMetrics]:
        ended, self._ended = self._ended, []
        return ended

    def _pieces(self, attempts: list[p.AttemptMetrics]) -> list[p.TaskManagerMetrics]:
        wall = time.time()
        used, most = self.heap
        pieces = [tuple(attempts[i:i + p.METRICS_ATTEMPTS])
                  for i in range(0, len(attempts), p.METRICS_ATTEMPTS)] or [()]
        if pieces == [()] and used < 0:
            return []  # nothing to say yet
        return [p.TaskManagerMetrics(self.taskmanager_id, wall, piece, used, most,
                                     self.spark_ui[:p.URL_LIMIT])
                for piece in pieces]


def _busy(running: float, task: Task) -> float:
    """Seconds the attempt worked: since it began, less what it spent waiting for work
    (a streaming task between its batches; a batch task never waits) and for its
    consumers (backpressure: as in Flink, a back-pressured task is not busy)."""
    return max(0.0, running - task.counts.idle - task.counts.backpressured)


def _numbers(task: Task, records_in: int, records_out: int, bytes_in: int, bytes_out: int,
             busy: float, final: bool = False,
             spark_workers: Iterable[int] = ()) -> p.AttemptMetrics:
    deployment = task.deployment
    watermark, watermark_end = _on_the_wire(task.counts.watermark)
    return p.AttemptMetrics(deployment.job_id, deployment.vertex_id, deployment.subtask,
                            deployment.attempt, task.attempt_id, records_in, records_out,
                            bytes_in, bytes_out, round(busy, 3), final,
                            round(task.counts.backpressured, 3), watermark, watermark_end,
                            () if final else _workers(task, spark_workers))


def _workers(task: Task, spark_workers: Iterable[int]) -> tuple[p.AttemptWorker, ...]:
    """Where the running attempt's code is now: what its vertex's flame graph samples."""
    held = [*task.counts.workers(), *((pid, 0) for pid in spark_workers)]
    return tuple(p.AttemptWorker(pid, thread) for pid, thread in held[:p.ATTEMPT_WORKERS])


def _on_the_wire(watermark: float | None) -> tuple[float | None, bool]:
    """(watermark, watermark_end): the end of event time as a flag, since JSON has no
    infinity (orjson would write null without a word)."""
    if watermark is None or math.isnan(watermark) or watermark == -math.inf:
        return None, False
    return (None, True) if watermark == math.inf else (watermark, False)


def jvm_numbers(spark: Any) -> tuple[int, int, str]:
    """A worker thread: the Spark JVM's heap in use and its most, in bytes, and its Spark
    UI's address ("" when disabled) (Py4J calls)."""
    context = spark.sparkContext
    runtime = context._jvm.java.lang.Runtime.getRuntime()
    total, free, most = runtime.totalMemory(), runtime.freeMemory(), runtime.maxMemory()
    return int(total) - int(free), int(most), context.uiWebUrl or ""
