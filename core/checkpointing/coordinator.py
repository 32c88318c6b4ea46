"""The JobMaster's checkpoint coordinator: when to trigger, who must acknowledge, when a
checkpoint is complete, failed or too many failed (Flink's ``CheckpointCoordinator``).

One checkpoint is in progress at a time (Flink's default ``max-concurrent-checkpoints``
of 1): the next is due ``interval`` after the previous trigger and ``min_pause`` after
the previous one ended. A trigger needs every task running; the sources get the barrier
and it flows from them through every task, each of which acknowledges with its state.
All acknowledged: the checkpoint is complete and kept in the store, subsuming the oldest.
A task that declines, or the timeout, aborts it and counts one failure; more consecutive
failures than ``tolerable_failures`` fail the job. A failover aborts what is in progress
without counting it. A late, unknown or stale attempt's acknowledgement belongs to no
checkpoint: its state is discarded.

Pure, on the JobMaster's main thread: the clock comes in as ``now``, and every call
returns instructions (``instructions.py``) for the JobMaster to carry out.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from clusterdeck.core.checkpointing.checkpoints import (
    CheckpointRecord,
    CheckpointStatus,
    CompletedCheckpoint,
    SubtaskAck,
)
from clusterdeck.core.checkpointing.instructions import (
    CheckpointAborted,
    CheckpointCompleted,
    CheckpointInstruction,
    CheckpointSkipped,
    DiscardCheckpoints,
    DiscardStates,
    FailJob,
    SavepointDone,
    TriggerCheckpoint,
    WriteSavepoint,
)
from clusterdeck.core.checkpointing.store import CompletedCheckpointStore
from clusterdeck.core.protocol.checkpoints import CheckpointOptions

HISTORY = 100  # checkpoints remembered for the checkpoints view, the newest


@dataclass(frozen=True)
class CheckpointTask:
    """A task a checkpoint waits for: its subtask id, the attempt that runs it now,
    whether it is a source (barriers start there) and whether it runs."""

    subtask_id: str
    attempt_id: str
    source: bool = False
    running: bool = True


@dataclass(frozen=True)
class _Request:
    """A savepoint or stop someone waits for: ``stop`` stops the sources at it,
    ``savepoint`` copies it out (a stop without one just ends at a last checkpoint)."""

    stop: bool
    savepoint: bool


@dataclass
class _Pending:
    checkpoint_id: int
    triggered: float
    tasks: dict[str, str]  # subtask id -> attempt id
    acks: dict[str, SubtaskAck] = dataclasses.field(default_factory=dict)
    request: _Request | None = None
    writing: bool = False  # a savepoint all acknowledged, being copied out


class CheckpointCoordinator:
    def __init__(self, job_id: str, options: CheckpointOptions, now: float,
                 store: CompletedCheckpointStore | None = None) -> None:
        """``now``: when the job started running (the first trigger is an interval later).
        ``store``: what a JobManager recovered after a failover; numbering goes on from
        its latest checkpoint."""
        self.job_id = job_id
        self.options = options.checked()
        self.store = store or CompletedCheckpointStore(options.retained)
        latest = self.store.latest()
        self._next_id = latest.checkpoint_id + 1 if latest is not None else 1
        self._pending: _Pending | None = None
        self._last_trigger = now
        self._last_end = now - options.min_pause
        self._failures = 0  # consecutive
        self._request: _Request | None = None  # waiting for the checkpoint in progress
        self._completed_count = 0  # since this coordinator started, for the snapshot
        self._failed_count = 0  # declined, expired, a savepoint not written
        self._aborted_count = 0  # by a failover, the job's end, a task finishing
        self._history: deque[CheckpointRecord] = deque(maxlen=HISTORY)

    # -- what the JobMaster asks --------------------------------------------------------------

    def next_trigger(self) -> float | None:
        """When the next checkpoint is due; None when checkpointing is off or one is in
        progress (its end sets the next)."""
        if self._pending is not None:
            return None
        if self._request is not None:  # due now: someone waits for it
            return self._last_end
        if not self.options.enabled:
            return None
        return max(self._last_trigger + self.options.interval,
                   self._last_end + self.options.min_pause)

    def expires(self) -> float | None:
        """When the checkpoint in progress times out; None when none is."""
        pending = self._pending
        return None if pending is None else pending.triggered + self.options.timeout

    @property
    def in_progress(self) -> int | None:
        return None if self._pending is None else self._pending.checkpoint_id

    @property
    def completed_count(self) -> int:
        """Checkpoints completed since this coordinator (its JobManager run) started."""
        return self._completed_count

    @property
    def failed_count(self) -> int:
        """Checkpoints failed since this coordinator started, whether or not they counted
        towards ``tolerable_failures`` (a savepoint's did not)."""
        return self._failed_count

    @property
    def aborted_count(self) -> int:
        """Checkpoints aborted since this coordinator started: by a failover, the job's
        end, or a task that finished before it took part (never counted as failures)."""
        return self._aborted_count

    def latest(self) -> CompletedCheckpoint | None:
        """What a restore starts from."""
        return self.store.latest()

    def request_savepoint(self, stop: bool, savepoint: bool = True) -> None:
        """A savepoint (``stop``: and the job's sources stop at it) is wanted: it is due
        at once, or as soon as the checkpoint in progress ended. ValueError when one is
        already wanted."""
        if self._request is not None or (self._pending is not None
                                         and self._pending.request is not None):
            raise ValueError("a savepoint or stop of this job is already in progress")
        self._request = _Request(stop, savepoint)

    def history(self) -> tuple[CheckpointRecord, ...]:
        """The newest ``HISTORY`` checkpoints, oldest first."""
        return tuple(self._history)

    # -- events --------------------------------------------------------------------------------

    def trigger(self, now: float, tasks: Sequence[CheckpointTask]) -> list[CheckpointInstruction]:
        """Start a checkpoint over ``tasks`` (every task of the job), if they all run."""
        self._last_trigger = now
        if self._pending is not None:
            return [CheckpointSkipped(f"checkpoint {self._pending.checkpoint_id} is still "
                                      "in progress")]
        request, self._request = self._request, None
        skipped = _why_not(tasks)
        if skipped:  # a checkpoint tries again later; whoever asked for a savepoint hears now
            return [CheckpointSkipped(skipped)] + (
                [SavepointDone(0, error=f"no savepoint taken: {skipped}")] if request else [])
        pending = self._pending = _Pending(self._next_id, now,
                                           {task.subtask_id: task.attempt_id for task in tasks},
                                           request=request)
        self._next_id += 1
        self._history.append(CheckpointRecord(pending.checkpoint_id,
                                              CheckpointStatus.IN_PROGRESS, now,
                                              expected=len(pending.tasks)))
        sources = tuple(task.attempt_id for task in tasks if task.source)
        return [TriggerCheckpoint(pending.checkpoint_id, now, self.options.mode, sources,
                                  stop=request is not None and request.stop)]

    def acknowledge(self, checkpoint_id: int, subtask_id: str, attempt_id: str,
                    ack: SubtaskAck, now: float) -> list[CheckpointInstruction]:
        pending = self._pending
        if pending is None or pending.checkpoint_id != checkpoint_id \
                or pending.tasks.get(subtask_id) != attempt_id:
            # late (aborted meanwhile), unknown, or a replaced attempt's: part of nothing
            return [DiscardStates((ack.state,))] if ack.state is not None else []
        known = pending.acks.get(subtask_id)
        if known is not None:  # a re-sent acknowledgement: the first one counts
            return [] if known == ack or ack.state is None else [DiscardStates((ack.state,))]
        pending.acks[subtask_id] = ack
        self._record(pending, CheckpointStatus.IN_PROGRESS)
        if len(pending.acks) < len(pending.tasks) or pending.writing:
            return []
        if pending.request is not None and pending.request.savepoint:
            pending.writing = True
            return [WriteSavepoint(self._checkpoint(pending, now))]
        return self._complete(pending, now)

    def savepoint_written(self, checkpoint_id: int, path: str,
                          now: float) -> list[CheckpointInstruction]:
        """The savepoint's folder is whole: it completes as a checkpoint."""
        pending = self._pending
        if pending is None or pending.checkpoint_id != checkpoint_id or not pending.writing:
            return []
        done = self._complete(pending, now)
        self._history[-1] = dataclasses.replace(self._history[-1], path=path)
        return [*done, SavepointDone(checkpoint_id, path)]

    def savepoint_not_written(self, checkpoint_id: int, reason: str,
                              now: float) -> list[CheckpointInstruction]:
        pending = self._pending
        if pending is None or pending.checkpoint_id != checkpoint_id or not pending.writing:
            return []
        return self._abort(pending, now, f"the savepoint could not be written: {reason}",
                           counts=False)

    def decline(self, checkpoint_id: int, subtask_id: str, attempt_id: str, reason: str,
                now: float) -> list[CheckpointInstruction]:
        """A task could not take its snapshot: the checkpoint fails."""
        pending = self._pending
        if pending is None or pending.checkpoint_id != checkpoint_id \
                or pending.tasks.get(subtask_id) != attempt_id or pending.writing:
            return []
        return self._abort(pending, now, f"{subtask_id} declined: {reason}", counts=True)

    def expire(self, now: float) -> list[CheckpointInstruction]:
        """Abort the checkpoint in progress if its timeout passed."""
        pending = self._pending
        if pending is None or now < pending.triggered + self.options.timeout \
                or pending.writing:
            return []
        missing = sorted(set(pending.tasks) - set(pending.acks))
        return self._abort(pending, now, (
            f"expired after {self.options.timeout:g} s with {len(missing)} of "
            f"{len(pending.tasks)} tasks not acknowledged ({', '.join(missing[:3])}"
            f"{' ...' if len(missing) > 3 else ''})"), counts=True)

    def task_finished(self, subtask_id: str, attempt_id: str,
                      now: float) -> list[CheckpointInstruction]:
        """A task finished: if the checkpoint in progress waits for it and it did not
        acknowledge (its trigger came too late), that checkpoint can never complete. It
        is aborted without counting as a failure, as by a failover, and the next one
        goes without the task."""
        pending = self._pending
        if pending is None or pending.tasks.get(subtask_id) != attempt_id \
                or subtask_id in pending.acks or pending.writing:
            return []
        return self._abort(pending, now, f"{subtask_id} finished before it took part",
                           counts=False, failed=False)

    def abort_in_progress(self, now: float, reason: str) -> list[CheckpointInstruction]:
        """The job fails over, is cancelled or suspended: what is in progress never
        completes, and that is not the checkpoint's failure."""
        pending = self._pending
        return [] if pending is None else self._abort(pending, now, reason, counts=False,
                                                      failed=False)

    # -- endings -------------------------------------------------------------------------------

    def _checkpoint(self, pending: _Pending, now: float) -> CompletedCheckpoint:
        """The acknowledged states, and those of finished tasks (which take no part in
        checkpoints after their last) carried on from the latest checkpoint, so that a
        restore of a finished task starts from its end, not from the beginning."""
        latest = self.store.latest()
        states = {subtask: handle for subtask, handle in (latest.states.items() if latest
                                                          else ())
                  if subtask not in pending.tasks}
        states.update((subtask, ack.state) for subtask, ack in pending.acks.items()
                      if ack.state is not None)
        return CompletedCheckpoint(self.job_id, pending.checkpoint_id, pending.triggered,
                                   now, dict(sorted(states.items())))

    def _complete(self, pending: _Pending, now: float) -> list[CheckpointInstruction]:
        checkpoint = self._checkpoint(pending, now)
        self._record(pending, CheckpointStatus.COMPLETED, now)  # its size: before it is kept
        subsumed = self.store.add(checkpoint)
        self._pending, self._last_end, self._failures = None, now, 0
        self._completed_count += 1
        done: list[CheckpointInstruction] = [
            CheckpointCompleted(checkpoint, tuple(pending.tasks.values()))]
        if subsumed:
            done.append(DiscardCheckpoints(tuple(c.checkpoint_id for c in subsumed),
                                           self.store.referenced()))
        if pending.request is not None and not pending.request.savepoint:
            done.append(SavepointDone(pending.checkpoint_id))  # a stop at a last checkpoint
        return done

    def _abort(self, pending: _Pending, now: float, reason: str, counts: bool,
               failed: bool = True) -> list[CheckpointInstruction]:
        """``counts``: towards the tolerable failures; ``failed``: a failure of the
        checkpoint's own, else ABORTED (the job's reason, never counted)."""
        self._pending, self._last_end = None, now
        if failed:
            self._failed_count += 1
        else:
            self._aborted_count += 1
        self._record(pending, CheckpointStatus.FAILED if failed else CheckpointStatus.ABORTED,
                     now, reason)
        aborted: list[CheckpointInstruction] = [
            CheckpointAborted(pending.checkpoint_id, reason, tuple(pending.tasks.values()))]
        states = tuple(ack.state for ack in pending.acks.values() if ack.state is not None)
        if states:
            aborted.append(DiscardStates(states))
        if pending.request is not None:  # not the job's checkpointing failing: not counted
            aborted.append(SavepointDone(pending.checkpoint_id, error=reason))
            counts = False
        if counts:
            self._failures += 1
            if self._failures > self.options.tolerable_failures:
                aborted.append(FailJob(
                    f"{self._failures} checkpoints failed in a row, more than "
                    f"execution.checkpointing.tolerable-failed-checkpoints = "
                    f"{self.options.tolerable_failures}; the last: checkpoint "
                    f"{pending.checkpoint_id} {reason}"))
        return aborted

    def _record(self, pending: _Pending, status: CheckpointStatus, ended: float | None = None,
                failure: str = "") -> None:
        """The history's line for ``pending`` (the newest line, being the one in progress)."""
        acks = pending.acks.values()
        request = pending.request
        uploaded = self.store.shared.referenced()  # by retained checkpoints: not new
        size = sum(a.state.size + sum(file.size for file in a.state.shared
                                      if file.path not in uploaded)
                   for a in acks if a.state is not None)
        record = CheckpointRecord(
            pending.checkpoint_id, status, pending.triggered, ended, len(pending.acks),
            len(pending.tasks), size,
            max((a.alignment for a in acks), default=0.0), failure,
            savepoint=request is not None and request.savepoint,
            stop=request is not None and request.stop)
        if self._history and self._history[-1].checkpoint_id == pending.checkpoint_id:
            self._history[-1] = record
        else:
            self._history.append(record)


def _why_not(tasks: Sequence[CheckpointTask]) -> str:
    """Why no checkpoint can start over ``tasks`` now ("" when one can)."""
    idle = [task.subtask_id for task in tasks if not task.running]
    if idle or not tasks:
        return "not every task is running" + (
            f" ({', '.join(idle[:3])}{' ...' if len(idle) > 3 else ''} not)" if idle else "")
    if not any(task.source for task in tasks):
        return "the job has no source task to start barriers"
    return ""
