"""A running attempt and its JobMaster: cancel, state updates with their result, and the
reconciliation reports that find attempts whose updates were lost.

Deployments are in ``deployments``, inputs in ``inputs``, printed output in ``output``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.rpc import message


@message
@dataclass(frozen=True)
class TaskOperationResults:
    results: tuple[TaskOperationResult, ...]


@message
@dataclass(frozen=True)
class TaskOperationResult:
    """``known`` False: the TaskExecutor does not run that attempt (it ended, or its
    deployment never arrived); a cancel of it is then done."""

    attempt_id: str
    success: bool
    message: str = ""
    known: bool = True


@message
@dataclass(frozen=True)
class CancelTask:
    """JobMaster -> TaskExecutor (ask): cancel the attempt's Spark job group, free its slot."""

    job_id: str
    attempt_id: str


@message
@dataclass(frozen=True)
class TaskResult:
    """What a finished attempt hands back; bulk data stays in the named files.

    ``stdout``/``stderr`` are the end of what the task printed (``printed_tail``); all of
    it is in ``stdout_path``/``stderr_path`` when the task printed anything."""

    records_in: int = 0
    records_out: int = 0
    counters: dict[str, Any] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    collected_path: str = ""
    stdout: str = ""
    stderr: str = ""
    stdout_path: str = ""
    stderr_path: str = ""


@message
@dataclass(frozen=True)
class UpdateTaskExecutionState:
    """TaskExecutor -> JobMaster (ask, fenced): sent again until acknowledged; applying it
    twice changes nothing (updates are idempotent per attempt id)."""

    job_id: str
    attempt_id: str
    state: ExecutionState
    failure: TaskFailure | None = None
    result: TaskResult | None = None


@message
@dataclass(frozen=True)
class UpdateAcknowledged:
    attempt_id: str
    accepted: bool
    reason: str = ""


@message
@dataclass(frozen=True)
class UpdateTaskExecutionStates:
    """TaskExecutor -> JobMaster (ask, fenced): the state updates of one turn of the
    TaskExecutor's mailbox for one JobMaster, in order (a subtask's own transitions keep
    theirs); one UpdatesAcknowledged answers all of them, an acknowledgement per update
    in the same order. An update not acknowledged is sent again, alone or in a later
    batch."""

    updates: tuple[UpdateTaskExecutionState, ...]


@message
@dataclass(frozen=True)
class UpdatesAcknowledged:
    acknowledgements: tuple[UpdateAcknowledged, ...]


# -- deployment reconciliation (the JobMaster's heartbeat to its TaskExecutors) -----------


@message
@dataclass(frozen=True)
class RequestExecutionReport:
    """JobMaster -> TaskExecutor (ask), every heartbeat interval while the job has attempts
    there: which of this job's attempts do you run? An update that was lost shows up as an
    attempt the JobMaster believes deployed that its TaskManager no longer reports."""

    job_id: str


@message
@dataclass(frozen=True)
class ExecutionReport:
    """The job's attempts the TaskExecutor runs (at most its slots), and those it ended
    whose final update it is still sending (so they are not taken for lost)."""

    resource_id: str
    running: tuple[str, ...] = ()
    reporting: tuple[str, ...] = ()
