"""Fitting a job's snapshot into one message.

A snapshot is retained so that a late observer can redraw the job at once, and, like every
message, it must stay under ``rpc.framesize``. A large job's full snapshot (every attempt
of every subtask, with tracebacks) does not: it is published reduced instead, first to the
current attempt of each subtask, then to per-vertex counts, and says so (``truncated``).
A script's Spark work shrinks with the attempts: to its newest attempt's, without the
failed tasks' full errors. A streaming job's checkpoint history goes first, before any of
the graph: it is the least of what the snapshot says, and the counts, the latest and the
restored checkpoint stay in every reduction. The chain of causes stays too (it is bounded,
``clusterdeck.core.protocol.causes``), its evidence's log lines cut with the failures'.
The events of the job carry every change in full either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace

from clusterdeck.core.protocol.causes import CauseChain
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.snapshots import (
    AttemptSnapshot,
    JobGraphSnapshot,
    Truncation,
    VertexSnapshot,
)
from clusterdeck.core.protocol.sparkwork import SparkWork

TRACEBACK_KEPT = 2000
FAILURES_KEPT = 20
LOG_LINES_KEPT = 5
LOST_PRODUCERS_KEPT = 20  # a consumer of thousands of producers may name them all


def reductions(snapshot: JobGraphSnapshot, first: int = 0
               ) -> Iterator[tuple[int, JobGraphSnapshot]]:
    """The snapshot, then ever smaller versions of it, from the ``first`` on, each with its
    level (what to start from next time); each is built only when asked for (a large
    job's first ones are bound not to fit). A level that would leave nothing out (a batch
    job has no checkpoint history to drop) is passed over: it would not fit either."""
    for level, reduce in enumerate(_REDUCTIONS[first:], start=first):
        reduced = reduce(snapshot)
        if reduced is not None:
            yield level, reduced


def _trim_failure(record: FailureRecord) -> FailureRecord:
    failure = record.failure
    return replace(record, failure=replace(
        failure, traceback=failure.traceback[-TRACEBACK_KEPT:],
        log_excerpt=failure.log_excerpt[-LOG_LINES_KEPT:],
        lost_producers=failure.lost_producers[:LOST_PRODUCERS_KEPT]))


def _trim_causes(chain: CauseChain | None, lines: int) -> CauseChain | None:
    if chain is None:
        return None
    return replace(chain, events=tuple(
        replace(event, log_lines=event.log_lines[-lines:] if lines
                else ()) for event in chain.events))


def _trim_attempt(attempt: AttemptSnapshot) -> AttemptSnapshot:
    return replace(attempt, failure=_trim_failure(attempt.failure) if attempt.failure else None)


def _without_history(snapshot: JobGraphSnapshot) -> JobGraphSnapshot:
    """The checkpoint summary without its history; the snapshot as it is without one."""
    stats = snapshot.checkpoints
    return replace(snapshot, checkpoints=replace(stats, history=())) \
        if stats is not None and stats.history else snapshot


def _checkpoint_history_dropped(snapshot: JobGraphSnapshot) -> JobGraphSnapshot | None:
    """None when there is no history to drop."""
    stats = snapshot.checkpoints
    if stats is None or not stats.history:
        return None
    return replace(_without_history(snapshot), truncated=Truncation.CHECKPOINTS)


def _current_attempts_only(snapshot: JobGraphSnapshot) -> JobGraphSnapshot:
    vertices = tuple(
        replace(vertex, subtasks=tuple(
            replace(subtask, attempts=tuple(_trim_attempt(a) for a in subtask.attempts[-1:]))
            for subtask in vertex.subtasks))
        for vertex in snapshot.vertices)
    root = snapshot.root_cause
    return replace(_without_history(snapshot), vertices=vertices,
                   failures=tuple(_trim_failure(f) for f in snapshot.failures[-FAILURES_KEPT:]),
                   root_cause=_trim_failure(root) if root else None,
                   truncated=Truncation.ATTEMPTS, spark=_newest_spark_work(snapshot),
                   causes=_trim_causes(snapshot.causes, 2))


def _counts_only(snapshot: JobGraphSnapshot) -> JobGraphSnapshot:
    root = snapshot.root_cause
    return replace(_without_history(snapshot),
                   vertices=tuple(_counted(vertex) for vertex in snapshot.vertices),
                   failures=(), root_cause=_trim_failure(root) if root else None,
                   truncated=Truncation.SUBTASKS, spark=_newest_spark_work(snapshot),
                   causes=_trim_causes(snapshot.causes, 0))


def _newest_spark_work(snapshot: JobGraphSnapshot) -> tuple[SparkWork, ...]:
    """A script's newest attempt's Spark work only, its failed tasks' errors cut to their
    summaries."""
    return tuple(replace(work, failed_tasks=tuple(replace(task, error="")
                                                  for task in work.failed_tasks))
                 for work in snapshot.spark[-1:])


def _counted(vertex: VertexSnapshot) -> VertexSnapshot:
    return replace(vertex, subtasks=(),
                   state_counts=dict(Counter(subtask.state for subtask in vertex.subtasks)))


_REDUCTIONS: tuple[Callable[[JobGraphSnapshot], JobGraphSnapshot | None], ...] = (
    lambda snapshot: snapshot, _checkpoint_history_dropped, _current_attempts_only,
    _counts_only)
