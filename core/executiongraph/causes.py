"""Which event of a job's failover caused which: the chain of causes, as a pure linker.

The JobMaster tells it what happened, each time with the message that brought it (a
stimulus, as dask's worker state machine keeps): a TaskManager lost, the scheduler's
instructions and the failures they recorded, checkpoints aborted, subtasks restored.
Each becomes an event with an id, linked to the event that caused it:

* an attempt that failed because its TaskManager was lost, or whose partitions went
  with it, goes under that loss;
* a failure that names a lost TaskManager, or whose lost producers ran on one (a
  consumer's "partition not found", a streaming peer's closed connection), goes under
  that loss too, also when the loss is heard after it (within ``LATE_LOSS``): it is a
  side effect, and the loss is the job's real root cause;
* a restart goes under the first failure it restarts for, a checkpoint aborted by a
  failover under that restart, a restore under the restart that deployed it.

Pure: no clock (times are passed in), no network; the JobMaster calls it on its main
thread. Bounded as ``clusterdeck.core.protocol.causes`` says: when full, the oldest tree
goes first, never the one holding the job's first failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from clusterdeck.core.executiongraph import instructions as ins
from clusterdeck.core.protocol.causes import (
    DEPTH_KEPT,
    EVENTS_KEPT,
    LINES_KEPT,
    SIBLINGS_KEPT,
    CarriedBy,
    CauseChain,
    CauseEvent,
    CauseKind,
    EvidenceLine,
    cut,
)
from clusterdeck.core.protocol.failures import TASKMANAGER_LOST, FailureRecord
from clusterdeck.core.protocol.ids import parse_attempt_id, subtask_id
from clusterdeck.core.protocol.states import JobStatus

LATE_LOSS = 30.0
"""Seconds a failure may come before the loss of the TaskManager it names and still be
its side effect: a hung TaskManager is found by its heartbeats only after about 6.5 s
(``heartbeat.threshold``), while its peers' connections to it fail at once."""


class CauseLinker:
    def __init__(self, host_of: Callable[[str], str | None], process: str,
                 note: Callable[[str], None]) -> None:
        """``host_of(attempt_id)``: the TaskManager an attempt ran on, if known;
        ``process``: this JobManager's process, named in the evidence of its decisions;
        ``note(line)``: logs the line of a decision, as its evidence says."""
        self._host_of = host_of
        self._process = process
        self._note = note
        self._events: dict[int, CauseEvent] = {}
        self._next_id = 1
        self._dropped = 0
        self._failures_seen = 0
        self._first_failure: int | None = None  # the event of the job's first failure
        self._records: dict[int, FailureRecord] = {}
        self._by_attempt: dict[str, int] = {}  # a failed attempt's event (or its cause's)
        self._suspects: dict[int, frozenset[str]] = {}  # TaskManagers a failure implicates
        self._losses: dict[str, int] = {}  # TaskManager id -> its latest loss
        self._restart_of: dict[str, int] = {}  # subtask id -> the restart that last ran it
        self._restores: dict[tuple[int, int], int] = {}  # (restart, checkpoint) -> event
        self._batch_restarts: list[int] = []

    # -- what happened -------------------------------------------------------------------

    def taskmanager_lost(self, resource_id: str, cause: str, carried_by: CarriedBy) -> None:
        """A TaskManager was lost: a root, and the failures heard before that name it go
        under it."""
        summary = f"TaskManager {resource_id} lost: {cause}"
        loss = self._add(CauseKind.TASKMANAGER_LOST, carried_by.at, summary, None,
                         carried_by, self._decided(summary, carried_by.at),
                         taskmanager_id=resource_id)
        if loss is None:
            return
        self._losses[resource_id] = loss
        for event_id, suspects in list(self._suspects.items()):
            event = self._events.get(event_id)
            if (event is not None and event.cause_id is None and resource_id in suspects
                    and carried_by.at - event.at <= LATE_LOSS
                    and self._height(event_id) < DEPTH_KEPT):
                self._events[event_id] = replace(event, cause_id=loss)
                del self._suspects[event_id]

    def taskmanager_blocked(self, failure: FailureRecord, summary: str,
                            taskmanager_id: str) -> None:
        """The job gives ``taskmanager_id`` (the failure's own, or a producer's it could
        not reach) no new work a while (its blocklist): under the failure, once
        ``observe`` has seen it."""
        self._add(CauseKind.TASKMANAGER_BLOCKED, failure.timestamp, summary,
                  self._by_attempt.get(failure.attempt_id), None,
                  self._decided(summary, failure.timestamp),
                  taskmanager_id=taskmanager_id)

    def observe(self, instructions: Sequence[ins.Instruction],
                failures: Sequence[FailureRecord], carried_by: CarriedBy | None) -> None:
        """The scheduler's instructions for one event, and the job's failure history
        after it (its new records are this event's failures); ``carried_by``: the message
        that brought the event, None for one of the JobMaster's own (a timer)."""
        self._batch_restarts = []
        batch = [self._failed(record, carried_by)
                 for record in failures[self._failures_seen:]]
        self._failures_seen = len(failures)
        full = False
        for instruction in instructions:
            if isinstance(instruction, ins.JobStatusChanged):
                full = full or instruction.new is JobStatus.RESTARTING
                if instruction.new is JobStatus.FAILING:
                    self._job_failing(instruction.timestamp, next(filter(None, batch), None))
            elif isinstance(instruction, ins.ScheduleRestart):
                self._restarted(instruction, full)

    def checkpoints_aborted(self, checkpoint_ids: Sequence[int], attempt_id: str,
                            reason: str, at: float, carried_by: CarriedBy | None) -> None:
        """Checkpoints a failover aborted because ``attempt_id`` failed or was cancelled:
        under the restart of this event that covers it, else under its failure."""
        subtask = _subtask_of(attempt_id)
        cause = next((r for r in self._batch_restarts
                      if self._restart_of.get(subtask) == r), None)
        if cause is None:
            cause = self._by_attempt.get(attempt_id)
        for checkpoint_id in checkpoint_ids:
            summary = f"checkpoint {checkpoint_id} aborted: {reason}"
            self._add(CauseKind.CHECKPOINT_ABORTED, at, summary, cause, carried_by,
                      self._decided(summary, at), checkpoint_id=checkpoint_id)

    def restored(self, vertex_id: str, subtask: int, checkpoint_id: int, at: float,
                 carried_by: CarriedBy | None) -> None:
        """A restarted subtask was deployed with its state of ``checkpoint_id`` (0: none
        had completed, it starts over): one event per restart and checkpoint."""
        restart = self._restart_of.get(subtask_id(vertex_id, subtask))
        if restart is None or restart not in self._events:
            return
        key = (restart, checkpoint_id)
        known = self._restores.get(key)
        if known is not None and known in self._events:
            event = self._events[known]
            self._events[known] = replace(event, more=event.more + 1,
                                          summary=_restore_summary(checkpoint_id,
                                                                   event.more + 2))
            return
        summary = _restore_summary(checkpoint_id, 1)
        event_id = self._add(CauseKind.RESTORED, at, summary, restart, carried_by,
                             self._decided(summary, at), vertex_id=vertex_id,
                             subtask=subtask, checkpoint_id=checkpoint_id)
        if event_id is not None:
            self._restores[key] = event_id

    def rescaled(self, summary: str, checkpoint_id: int, at: float,
                 earlier: bool = False) -> None:
        """Reactive mode or the autoscaler restarted the job at another parallelism
        (``summary`` says from what to what, and why) from ``checkpoint_id`` (0: none
        had completed): a root.
        ``earlier``: one of an earlier run, told again (its evidence, not logged again)."""
        lines = (EvidenceLine(self._process, cut(summary), at),) if earlier \
            else self._decided(summary, at)
        self._add(CauseKind.JOB_RESCALED, at, summary, None, None, lines,
                  checkpoint_id=checkpoint_id)

    # -- what observers see --------------------------------------------------------------

    def chain(self) -> CauseChain | None:
        if not self._events and not self._dropped:
            return None
        return CauseChain(tuple(self._events[i] for i in sorted(self._events)), self._dropped)

    def root_failure(self) -> FailureRecord | None:
        """The job's real root cause: the first failure, or, when that one is a side
        effect, the first failure its root caused directly (a lost TaskManager's own
        attempts first)."""
        if self._first_failure is None or self._first_failure not in self._events:
            return None
        root = self._first_failure
        while (cause := self._events[root].cause_id) is not None:
            root = cause
        if root in self._records:
            return self._records[root]
        caused = [i for i, e in sorted(self._events.items())
                  if e.cause_id == root and i in self._records]
        lost = [i for i in caused if self._records[i].exception_type == TASKMANAGER_LOST]
        first = (lost or caused or [None])[0]
        return self._records[first] if first is not None else None

    # -- linking -------------------------------------------------------------------------

    def _failed(self, record: FailureRecord, carried_by: CarriedBy | None) -> int | None:
        cause, suspects = self._cause_of(record)
        if cause is not None and self._crowded(cause, record.attempt_id):
            return cause
        lines = tuple(EvidenceLine(record.taskmanager_id or "?", cut(line))
                      for line in record.log_excerpt[-LINES_KEPT:])
        event_id = self._add(
            CauseKind.ATTEMPT_FAILED, record.timestamp,
            f"{record.exception_type}: {record.message}", cause, carried_by, lines,
            taskmanager_id=record.taskmanager_id or "", attempt_id=record.attempt_id,
            vertex_id=record.vertex_id, subtask=record.subtask)
        if event_id is None:
            return cause
        self._records[event_id] = record
        self._by_attempt[record.attempt_id] = event_id
        if self._first_failure is None:
            self._first_failure = event_id
        if cause is None and suspects:
            self._suspects[event_id] = suspects
        return event_id

    def _cause_of(self, record: FailureRecord) -> tuple[int | None, frozenset[str]]:
        """The event a failure goes under, and the TaskManagers it implicates."""
        if record.exception_type == TASKMANAGER_LOST and record.taskmanager_id in self._losses:
            return self._losses[record.taskmanager_id], frozenset()
        for producer in record.failure.lost_producers:
            if producer in self._by_attempt:  # its partitions were lost: known why
                return self._by_attempt[producer], frozenset()
        suspects = frozenset(
            {host for p in record.failure.lost_producers if (host := self._host_of(p))}
            | {tm for tm in self._losses if _names(record.message, tm)})
        loss = max((self._losses[tm] for tm in suspects if tm in self._losses), default=None)
        return loss, suspects

    def _crowded(self, cause: int, attempt_id: str) -> bool:
        """Past ``SIBLINGS_KEPT`` failures under one cause, one more is only counted."""
        siblings = [i for i, e in self._events.items()
                    if e.cause_id == cause and e.kind is CauseKind.ATTEMPT_FAILED]
        if len(siblings) < SIBLINGS_KEPT:
            return False
        last = self._events[siblings[-1]]
        self._events[siblings[-1]] = replace(last, more=last.more + 1)
        self._by_attempt[attempt_id] = siblings[-1]
        return True

    def _restarted(self, restart: ins.ScheduleRestart, full: bool) -> None:
        cause = next((self._by_attempt[a] for a in restart.failed_attempt_ids
                      if a in self._by_attempt), None)
        count = len(restart.subtasks)
        summary = (f"the whole job restarts in {restart.delay:g} s: {count} subtask(s) "
                   f"run again" if full else
                   f"a region of {count} subtask(s) restarts in {restart.delay:g} s")
        at = restart.due - restart.delay
        event_id = self._add(CauseKind.JOB_RESTARTED if full else CauseKind.REGION_RESTARTED,
                             at, summary, cause, None, self._decided(summary, at))
        if event_id is None:
            return
        for member in restart.subtasks:
            self._restart_of[member] = event_id
        self._batch_restarts.append(event_id)

    def _job_failing(self, at: float, cause: int | None) -> None:
        summary = "the job fails: no restart follows this failure"
        self._add(CauseKind.JOB_FAILED, at, summary, cause, None, self._decided(summary, at))

    def _decided(self, line: str, at: float) -> tuple[EvidenceLine, ...]:
        """The JobMaster's own decision: logged, and its log line is the evidence."""
        self._note(line)
        return (EvidenceLine(self._process, cut(line), at),)

    # -- the events ----------------------------------------------------------------------

    def _add(self, kind: CauseKind, at: float, summary: str, cause: int | None,
             carried_by: CarriedBy | None, lines: tuple[EvidenceLine, ...],
             **subject: Any) -> int | None:
        """The new event's id; None when the chain is full of the job's first tree."""
        while cause is not None and self._depth(cause) >= DEPTH_KEPT:
            cause = self._events[cause].cause_id
        event_id = self._next_id
        self._next_id += 1
        if carried_by is not None:
            carried_by = replace(carried_by, type=cut(carried_by.type),
                                 sender=cut(carried_by.sender))
        self._events[event_id] = CauseEvent(event_id, kind, at, cut(summary), cause,
                                            carried_by, lines, **subject)
        self._trim()
        return event_id if event_id in self._events else None

    def _depth(self, event_id: int) -> int:
        depth, cause = 1, self._events[event_id].cause_id
        while cause is not None:
            depth, cause = depth + 1, self._events[cause].cause_id
        return depth

    def _height(self, event_id: int) -> int:
        """Levels of the tree below and including ``event_id``."""
        children = [i for i, e in self._events.items() if e.cause_id == event_id]
        return 1 + max((self._height(child) for child in children), default=0)

    def _trim(self) -> None:
        """Past ``EVENTS_KEPT``: the oldest tree goes whole, unless it holds the job's
        first failure; when no other tree is left, the newest event goes."""
        while len(self._events) > EVENTS_KEPT:
            keep = self._root(self._first_failure) if self._first_failure in self._events \
                else None
            oldest = next((i for i in sorted(self._events)
                           if self._events[i].cause_id is None and i != keep), None)
            self._drop(oldest if oldest is not None else max(self._events))

    def _root(self, event_id: int | None) -> int | None:
        while event_id is not None and (cause := self._events[event_id].cause_id) is not None:
            event_id = cause
        return event_id

    def _drop(self, event_id: int) -> None:
        for child in [i for i, e in self._events.items() if e.cause_id == event_id]:
            self._drop(child)
        del self._events[event_id]
        self._records.pop(event_id, None)
        self._suspects.pop(event_id, None)
        links: dict[Any, int]
        for links in (self._by_attempt, self._losses, self._restart_of, self._restores):
            for key in [k for k, v in links.items() if v == event_id]:
                del links[key]
        self._dropped += 1


def _names(text: str, taskmanager_id: str) -> bool:
    """``text`` names the TaskManager as a whole word (taskmanager-1 is not -10)."""
    return re.search(rf"(?<![\w-]){re.escape(taskmanager_id)}(?![\w-])", text) is not None


def _subtask_of(attempt_id: str) -> str:
    parsed = parse_attempt_id(attempt_id)
    return parsed.subtask_id if parsed is not None else ""


def _restore_summary(checkpoint_id: int, subtasks: int) -> str:
    if checkpoint_id:
        return f"{subtasks} subtask(s) restored from checkpoint {checkpoint_id}"
    return f"{subtasks} subtask(s) start over: no checkpoint had completed"
