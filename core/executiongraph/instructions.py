"""What the scheduler asks its owner to do: small frozen dataclasses, data only.

The scheduler never sends a message, starts a timer or reads a clock. Each event it is
given returns a list of these, in the order they must be carried out; the JobMaster turns
them into RPC calls, timers and observer events. Because they are plain data, a test can
compare them with ``==``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterdeck.core.executiongraph.execution import SlotRef
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.jobgraph import InputSplit
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.protocol.wiring import EdgeInput, EdgeOutput


@dataclass(frozen=True)
class JobStatusChanged:
    """For observers: the job moved from ``old`` to ``new``."""

    old: JobStatus
    new: JobStatus
    timestamp: float


@dataclass(frozen=True)
class ExecutionStateChanged:
    """For observers: one attempt moved from ``old`` to ``new``; ``failure`` says why when
    ``new`` is FAILED."""

    attempt_id: str
    vertex_id: str
    subtask: int
    attempt: int
    old: ExecutionState
    new: ExecutionState
    timestamp: float
    failure: FailureRecord | None = None


@dataclass(frozen=True)
class NewAttempt:
    """For observers: a subtask got a fresh attempt (in CREATED) that replaces
    ``previous_attempt_id``."""

    attempt_id: str
    vertex_id: str
    subtask: int
    attempt: int
    previous_attempt_id: str
    timestamp: float


@dataclass(frozen=True)
class AllocateSlot:
    """Ask the ResourceManager for one more slot; it arrives as ``slot_offered``."""

    attempt_id: str
    vertex_id: str
    subtask: int


@dataclass(frozen=True)
class WithdrawSlotRequest:
    """The attempt got a slot the job already held (one its finished attempt left, as
    Flink's JobMaster reuses the slots in its pool): its request for one more is no
    longer needed."""

    attempt_id: str


@dataclass(frozen=True)
class ReleaseSlot:
    """Give a slot back to its TaskManager: its task ended, or nobody is waiting for it."""

    slot: SlotRef


@dataclass(frozen=True)
class DeployTask:
    """Submit one attempt to the TaskManager owning ``slot`` (Flink's SubmitTask)."""

    job_id: str
    attempt_id: str
    vertex_id: str
    subtask: int
    parallelism: int
    attempt: int
    slot: SlotRef
    inputs: tuple[EdgeInput, ...]
    outputs: tuple[EdgeOutput, ...]
    # A generated source's whole input, sent with the deployment; None: it pulls splits
    splits: tuple[InputSplit, ...] | None = None


@dataclass(frozen=True)
class CancelAttempt:
    """Stop one running attempt; the TaskManager confirms with a CANCELED update."""

    attempt_id: str
    taskmanager_id: str


@dataclass(frozen=True)
class ScheduleOrUpdateConsumers:
    """Every producer feeding ``consumer_vertex_id`` has finished: its subtasks are scheduled."""

    consumer_vertex_id: str
    producer_vertex_ids: tuple[str, ...]


@dataclass(frozen=True)
class AssignSplit:
    """The answer to a source's split request; ``split`` is None when none are left."""

    attempt_id: str
    split: InputSplit | None


@dataclass(frozen=True)
class ScheduleRestart:
    """Call ``restart_due(now)`` at ``due`` (``delay`` from now) to restart ``subtasks``,
    the failover region. Members still running were cancelled with this instruction; the
    restart waits for their confirmation if it comes after ``due``."""

    delay: float
    due: float
    subtasks: tuple[str, ...]
    failed_attempt_ids: tuple[str, ...]


@dataclass(frozen=True)
class JobFinished:
    """Every subtask finished. ``results`` holds what each subtask reported, by subtask id
    (``"vertex#i"``), for the subtasks that reported something (collect sinks, counters)."""

    duration: float
    results: dict[str, Any]


@dataclass(frozen=True)
class JobFailed:
    """The job gave up; ``root_cause`` is its first failure."""

    duration: float
    root_cause: FailureRecord


@dataclass(frozen=True)
class JobCanceled:
    duration: float


@dataclass(frozen=True)
class Rejected:
    """An event that was refused and changed nothing: stale attempt, unknown id, bad move."""

    attempt_id: str | None
    reason: str


Instruction = (JobStatusChanged | ExecutionStateChanged | NewAttempt | AllocateSlot | ReleaseSlot
               | WithdrawSlotRequest | DeployTask | CancelAttempt | ScheduleOrUpdateConsumers
               | AssignSplit | ScheduleRestart | JobFinished | JobFailed | JobCanceled | Rejected)
