"""For observers: a job's status and execution events, and the retained snapshot of its
ExecutionGraph that lets a late observer redraw it at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.rpc import message


@message
@dataclass(frozen=True)
class JobStatusEvent:
    """On ``events/jobs/<job-id>``."""

    job_id: str
    old: JobStatus
    new: JobStatus
    at: float


@message
@dataclass(frozen=True)
class ExecutionStateEvent:
    """On ``events/jobs/<job-id>``: one execution moved; failures carry their record."""

    job_id: str
    attempt_id: str
    vertex_id: str
    subtask: int
    attempt: int
    old: ExecutionState
    new: ExecutionState
    at: float
    taskmanager_id: str | None = None
    slot_index: int | None = None
    failure: FailureRecord | None = None


@message
@dataclass(frozen=True)
class ExecutionStateEvents:
    """On ``events/jobs/<job-id>``: the moves of one turn of the JobMaster's mailbox, in
    order (core/jobmanager/jobevents.py)."""

    job_id: str
    events: tuple[ExecutionStateEvent, ...]


def job_events_in(message: Any) -> tuple[ExecutionStateEvent | JobStatusEvent, ...]:
    """The job events a message on ``events/jobs/<job-id>`` holds, one by one."""
    if isinstance(message, ExecutionStateEvents):
        return message.events
    if isinstance(message, ExecutionStateEvent | JobStatusEvent):
        return (message,)
    return ()


@message
@dataclass(frozen=True)
class JobSnapshot:
    """Retained on ``state/jobs/<job-id>``: the whole ExecutionGraph as data
    (``ExecutionGraph.snapshot()``, see ``clusterdeck.core.protocol.snapshots``), so a
    late observer can redraw it at once."""

    job_id: str
    graph: JobGraphSnapshot
