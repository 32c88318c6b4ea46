"""Execution and job states, Flink's, with the transitions the scheduler may make.

The tables are the single source of truth for what may follow what: the scheduler checks
every report from a TaskManager against them before it touches the graph, so a late,
duplicated or reordered message can never move an execution backwards.
"""

from __future__ import annotations

from enum import StrEnum


class IllegalTransition(RuntimeError):
    """The scheduler itself tried a transition the tables forbid: a bug, not bad input."""


class ExecutionState(StrEnum):
    """The life of one attempt of one subtask."""

    CREATED = "CREATED"      # exists, waits for its inputs (or for the job to start)
    SCHEDULED = "SCHEDULED"  # inputs ready, a slot is requested
    DEPLOYING = "DEPLOYING"  # has a slot, the task is being submitted to the TaskManager
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"  # a cancel was sent, the TaskManager has not confirmed it
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_EXECUTION_STATES

    def can_become(self, new: ExecutionState) -> bool:
        return new in EXECUTION_TRANSITIONS[self]


_TERMINAL_EXECUTION_STATES = frozenset(
    {ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED})

# DEPLOYING -> FINISHED: a short task may finish before its RUNNING report arrives.
EXECUTION_TRANSITIONS: dict[ExecutionState, frozenset[ExecutionState]] = {
    ExecutionState.CREATED: frozenset(
        {ExecutionState.SCHEDULED, ExecutionState.CANCELED, ExecutionState.FAILED}),
    ExecutionState.SCHEDULED: frozenset(
        {ExecutionState.DEPLOYING, ExecutionState.CANCELED, ExecutionState.FAILED}),
    ExecutionState.DEPLOYING: frozenset(
        {ExecutionState.RUNNING, ExecutionState.FINISHED, ExecutionState.CANCELING,
         ExecutionState.FAILED}),
    ExecutionState.RUNNING: frozenset(
        {ExecutionState.FINISHED, ExecutionState.CANCELING, ExecutionState.FAILED}),
    ExecutionState.CANCELING: frozenset({ExecutionState.CANCELED}),
    ExecutionState.FINISHED: frozenset(),
    ExecutionState.CANCELED: frozenset(),
    ExecutionState.FAILED: frozenset(),
}


class JobStatus(StrEnum):
    """The life of a whole job."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"        # giving up: cancelling what still runs, then FAILED
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"  # the user cancelled: waiting for every task to stop
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    RESTARTING = "RESTARTING"  # a full restart: every unfinished subtask starts again

    @property
    def is_terminal(self) -> bool:
        """Terminal for good: the job will not run again."""
        return self in _TERMINAL_JOB_STATUSES

    def can_become(self, new: JobStatus) -> bool:
        return new in JOB_TRANSITIONS[self]


_TERMINAL_JOB_STATUSES = frozenset({JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED})

JOB_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.CREATED: frozenset({JobStatus.RUNNING, JobStatus.CANCELED, JobStatus.FAILED}),
    JobStatus.RUNNING: frozenset(
        {JobStatus.FINISHED, JobStatus.FAILING, JobStatus.CANCELLING, JobStatus.RESTARTING}),
    JobStatus.FAILING: frozenset({JobStatus.FAILED, JobStatus.RESTARTING, JobStatus.CANCELLING}),
    JobStatus.CANCELLING: frozenset({JobStatus.CANCELED}),
    JobStatus.RESTARTING: frozenset(
        {JobStatus.RUNNING, JobStatus.CANCELLING, JobStatus.FAILED}),
    JobStatus.FINISHED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELED: frozenset(),
}
