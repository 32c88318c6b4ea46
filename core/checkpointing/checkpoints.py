"""What a checkpoint is made of, as data: the state handles the tasks report, a completed
checkpoint (what a restore starts from), and one line of the checkpoint history
(its ``CheckpointStatus`` is the one observers read in a job's snapshot).

Subtasks are named by their subtask id (``<vertex id>#<index>``), not by attempt: a
restore hands a subtask's state to whichever attempt runs it next. All of it is plain
frozen data the wire codec can write (a completed checkpoint's metadata file is its
``to_data``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterdeck.core.protocol.checkpoints import StateHandle
from clusterdeck.core.protocol.checkpointstats import CheckpointStatus


@dataclass(frozen=True)
class SubtaskAck:
    """A task's acknowledgement of a checkpoint: its state (None: it keeps none, as a
    stateless map), how long its barriers waited to be aligned and how long the whole
    snapshot took on the task, in seconds."""

    state: StateHandle | None = None
    alignment: float = 0.0
    duration: float = 0.0


@dataclass(frozen=True)
class CompletedCheckpoint:
    """Every subtask acknowledged: the job can be restored from here."""

    job_id: str
    checkpoint_id: int
    triggered: float
    completed: float
    states: dict[str, StateHandle] = field(default_factory=dict)
    # each vertex's subtasks, recorded by a rescale only (savepoints.rescale_checkpoint)
    parallelism: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(handle.size for handle in self.states.values())


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint in the job's history: for the checkpoints view and the job's
    status. ``alignment`` is the longest any task waited; ``failure`` says why it failed
    or was aborted; ``savepoint``, ``stop`` and ``path`` as in ``CheckpointStats``."""

    checkpoint_id: int
    status: CheckpointStatus
    triggered: float
    ended: float | None = None
    acknowledged: int = 0
    expected: int = 0
    size: int = 0
    alignment: float = 0.0
    failure: str = ""
    savepoint: bool = False
    stop: bool = False
    path: str = ""

    @property
    def duration(self) -> float | None:
        return None if self.ended is None else self.ended - self.triggered
