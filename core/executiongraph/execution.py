"""One subtask and its attempts: ExecutionVertex -> Execution.

An ExecutionVertex is one parallel instance of a JobVertex; it lives as long as the job.
Each time it runs it gets a new Execution (an attempt) with a fresh ``attempt_id``, so
every message about a task names exactly one attempt and a report from an old attempt can
be told apart from one from the current attempt. Old attempts are kept: they are the
subtask's history.

Attempt ids never repeat, not even across JobManager runs: each JobManager run of a job
has an epoch (0 for the first, one more for every recovery) and it is part of the id. The
format is the protocol's (``clusterdeck.core.protocol.ids``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.ids import attempt_id_of, subtask_id
from clusterdeck.core.protocol.jobgraph import InputSplit
from clusterdeck.core.protocol.snapshots import AttemptSnapshot, SlotSnapshot, SubtaskSnapshot
from clusterdeck.core.protocol.states import ExecutionState, IllegalTransition


@dataclass(frozen=True, order=True)
class SlotRef:
    """One task slot: the TaskManager that offers it and its index in the slot table."""

    taskmanager_id: str
    slot_index: int


@dataclass
class Execution:
    """One attempt of one subtask. Only the scheduler changes it, through ``transition``."""

    job_id: str
    vertex_id: str
    subtask: int
    attempt: int
    state: ExecutionState = ExecutionState.CREATED
    slot: SlotRef | None = None
    state_timestamps: dict[ExecutionState, float] = field(default_factory=dict)
    failure: FailureRecord | None = None
    input_splits: list[InputSplit] = field(default_factory=list)
    result: Any = None
    partitions_lost: bool = False
    epoch: int = 0
    restored: bool = False  # finished in an earlier JobManager run, restored from the store

    @property
    def attempt_id(self) -> str:
        return attempt_id_of(self.job_id, self.vertex_id, self.subtask, self.attempt, self.epoch)

    @property
    def subtask_id(self) -> str:
        return subtask_id(self.vertex_id, self.subtask)

    @property
    def taskmanager_id(self) -> str | None:
        return self.slot.taskmanager_id if self.slot else None

    @property
    def start_time(self) -> float | None:
        """When the attempt got its slot (Flink's UI counts from DEPLOYING)."""
        return self.state_timestamps.get(ExecutionState.DEPLOYING)

    @property
    def end_time(self) -> float | None:
        return self.state_timestamps.get(self.state) if self.state.is_terminal else None

    @property
    def has_usable_partitions(self) -> bool:
        """True when consumers can read this attempt's output."""
        return self.state is ExecutionState.FINISHED and not self.partitions_lost

    def transition(self, new: ExecutionState, now: float) -> ExecutionState:
        """Move to ``new`` and return the old state; raises on a move the table forbids."""
        old = self.state
        if not old.can_become(new):
            raise IllegalTransition(f"{self.attempt_id}: {old} -> {new}")
        self.state = new
        self.state_timestamps[new] = now
        return old

    def snapshot(self) -> AttemptSnapshot:
        return AttemptSnapshot(
            attempt_id=self.attempt_id, attempt=self.attempt, state=self.state,
            slot=SlotSnapshot(self.slot.taskmanager_id, self.slot.slot_index)
            if self.slot else None,
            state_timestamps=dict(self.state_timestamps),
            start_time=self.start_time, end_time=self.end_time, failure=self.failure,
            input_splits=tuple(split.split_id for split in self.input_splits),
            partitions_lost=self.partitions_lost, epoch=self.epoch, restored=self.restored)


class ExecutionVertex:
    """One subtask of a vertex, with every attempt it has made; the last is current.
    New attempts are made in ``epoch``, the JobManager run that owns the graph."""

    def __init__(self, job_id: str, vertex_id: str, subtask: int, epoch: int = 0) -> None:
        self.job_id = job_id
        self.vertex_id = vertex_id
        self.subtask = subtask
        self.epoch = epoch
        self.attempts: list[Execution] = [
            Execution(job_id, vertex_id, subtask, attempt=0, epoch=epoch)]

    @property
    def id(self) -> str:
        return subtask_id(self.vertex_id, self.subtask)

    @property
    def current(self) -> Execution:
        return self.attempts[-1]

    def new_attempt(self) -> Execution:
        """Start over with a fresh attempt; only a terminal attempt may be replaced."""
        if not self.current.state.is_terminal:
            raise IllegalTransition(
                f"{self.current.attempt_id} is {self.current.state}, cannot start a new attempt")
        execution = Execution(self.job_id, self.vertex_id, self.subtask,
                              attempt=self.current.attempt + 1, epoch=self.epoch)
        self.attempts.append(execution)
        return execution

    def restore(self, execution: Execution) -> list[Execution]:
        """Make ``execution``, finished in an earlier JobManager run, the only attempt;
        returns the attempts it replaces (the never-run attempt 0 of this run)."""
        if any(e.state is not ExecutionState.CREATED for e in self.attempts):
            raise IllegalTransition(f"{self.id} has run in this epoch, cannot be restored")
        replaced, self.attempts = self.attempts, [execution]
        return replaced

    def snapshot(self) -> SubtaskSnapshot:
        return SubtaskSnapshot(id=self.id, subtask=self.subtask, state=self.current.state,
                               attempt_id=self.current.attempt_id,
                               attempts=tuple(execution.snapshot()
                                              for execution in self.attempts))
