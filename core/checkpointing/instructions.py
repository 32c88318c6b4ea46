"""What the checkpoint coordinator asks its owner (the JobMaster) to do: frozen data.

As the scheduler's instructions (core/executiongraph/instructions.py): the coordinator
sends nothing, starts no timer and reads no clock; each call returns these, in the
order they must be carried out.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.checkpointing.checkpoints import CompletedCheckpoint
from clusterdeck.core.protocol.checkpoints import CheckpointingMode, StateHandle


@dataclass(frozen=True)
class TriggerCheckpoint:
    """Tell each of ``sources`` (attempt ids) to inject barrier ``checkpoint_id`` into its
    outputs after the record it is at; the barriers flow from there to every task."""

    checkpoint_id: int
    timestamp: float
    mode: CheckpointingMode
    sources: tuple[str, ...]
    stop: bool = False  # the sources stop at this barrier (a stop, with or without savepoint)


@dataclass(frozen=True)
class CheckpointSkipped:
    """No checkpoint was started this time (not counted as a failure): ``reason``."""

    reason: str


@dataclass(frozen=True)
class CheckpointCompleted:
    """Record ``checkpoint`` (its metadata file is the commit point), then tell
    ``notify`` (attempt ids) that it completed: sinks commit what they wrote for it."""

    checkpoint: CompletedCheckpoint
    notify: tuple[str, ...]


@dataclass(frozen=True)
class CheckpointAborted:
    """Tell ``notify`` (attempt ids) that checkpoint ``checkpoint_id`` will never
    complete: a sink discards what it wrote for it, a task stops aligning for it."""

    checkpoint_id: int
    reason: str
    notify: tuple[str, ...]


@dataclass(frozen=True)
class WriteSavepoint:
    """Every task acknowledged a savepoint: copy ``checkpoint`` out into a savepoint
    folder, then say ``savepoint_written`` (or ``savepoint_not_written``). It completes
    as a checkpoint only then, so a savepoint that cannot be written is aborted before
    any sink committed its output."""

    checkpoint: CompletedCheckpoint


@dataclass(frozen=True)
class SavepointDone:
    """Answer the savepoint's requester: ``path`` ("" for a stop without savepoint), or
    ``error`` when it failed."""

    checkpoint_id: int
    path: str = ""
    error: str = ""


@dataclass(frozen=True)
class DiscardStates:
    """Delete these snapshots: of an aborted checkpoint, or acknowledged too late."""

    states: tuple[StateHandle, ...]


@dataclass(frozen=True)
class DiscardCheckpoints:
    """Delete these completed checkpoints' state: newer ones subsumed them. ``keep``:
    snapshots (paths) a retained checkpoint still names, a finished task's carried on."""

    checkpoint_ids: tuple[int, ...]
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class FailJob:
    """More consecutive checkpoints failed than the job tolerates."""

    reason: str


CheckpointInstruction = (TriggerCheckpoint | CheckpointSkipped | CheckpointCompleted
                         | CheckpointAborted | WriteSavepoint | SavepointDone | DiscardStates
                         | DiscardCheckpoints | FailJob)
