"""Checkpoints on the wire: a streaming job's checkpointing options, the handle of a
subtask's snapshot, and the messages between the JobMaster's checkpoint coordinator and
the tasks (docs/streaming.md, docs/protocol.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from clusterdeck.core.rpc import message


class CheckpointingMode(StrEnum):
    """Exactly-once aligns the barriers of a task's inputs (a record after a barrier waits
    until the barrier came on every input); at-least-once lets records pass, so after a
    restore some are processed twice, none lost."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"


@dataclass(frozen=True)
class CheckpointOptions:
    """Flink's ``execution.checkpointing.*``, per job. ``interval``: seconds from one
    trigger to the next (0: off); ``timeout``: a checkpoint not complete by then is
    aborted; ``tolerable_failures``: consecutive failed checkpoints the job survives;
    ``min_pause``: seconds from a checkpoint's end to the next trigger; ``retained``:
    completed checkpoints kept. Checked by ``problems`` where a job is submitted and
    started (not on decoding: a received value is data)."""

    interval: float = 0.0
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    timeout: float = 600.0
    tolerable_failures: int = 0
    min_pause: float = 0.0
    retained: int = 1

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def problems(self) -> list[str]:
        found = [f"checkpointing {name} must not be negative"
                 for name in ("interval", "timeout", "min_pause") if getattr(self, name) < 0]
        if self.interval and self.timeout <= 0:
            found.append("checkpointing timeout must be positive")
        if self.tolerable_failures < 0:
            found.append("tolerable failed checkpoints must not be negative")
        if self.retained < 1:
            found.append("at least one completed checkpoint must be retained")
        return found

    def checked(self) -> CheckpointOptions:
        """These options, or ValueError naming what is wrong with them."""
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self


@dataclass(frozen=True)
class SharedStateFile:
    """A file of keyed state an incremental checkpoint needs (a base or a delta of the
    embedded state backend, ``shared/<name>/<id>-<random>.<kind>`` under the job's
    checkpoint folder), which later checkpoints may name again; checked as a snapshot."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class StateHandle:
    """One subtask's snapshot in one checkpoint: a file under the job's checkpoint folder
    (``chk-<id>/<name>.state``), its size and SHA-256, checked before it is restored.
    ``shared``: with the embedded state backend, the files of its keyed state, oldest
    first (a base, then the deltas since: applied in this order they give the state)."""

    path: str
    size: int
    sha256: str
    shared: tuple[SharedStateFile, ...] = ()


@dataclass(frozen=True)
class SavepointRestore:
    """Where a job starts from (Flink's ``SavepointRestoreSettings``): a savepoint under
    the cluster's ``state.savepoints.dir``. ``allow_non_restored_state``: state of a
    vertex this job does not have is skipped instead of refusing the job."""

    path: str
    allow_non_restored_state: bool = False


@message
@dataclass(frozen=True)
class TriggerCheckpoint:
    """JobMaster -> TaskExecutor (tell), for a source task: inject the barrier of
    ``checkpoint_id`` after the record it is at, snapshot, and acknowledge. ``stop``: a
    stop (with or without a savepoint): the source emits nothing after this barrier and
    the task finishes once the checkpoint completed (it goes on if it is aborted)."""

    job_id: str
    attempt_id: str
    checkpoint_id: int
    timestamp: float
    stop: bool = False


@message
@dataclass(frozen=True)
class NotifyCheckpointComplete:
    """JobMaster -> TaskExecutor (tell): checkpoint ``checkpoint_id`` completed; a sink
    commits what it wrote for it and before."""

    job_id: str
    attempt_id: str
    checkpoint_id: int


@message
@dataclass(frozen=True)
class NotifyCheckpointAborted:
    """JobMaster -> TaskExecutor (tell): checkpoint ``checkpoint_id`` will never complete;
    a task that stopped its source for it goes on."""

    job_id: str
    attempt_id: str
    checkpoint_id: int


@message
@dataclass(frozen=True)
class AcknowledgeCheckpoint:
    """TaskExecutor -> JobMaster (tell): the task took its snapshot of ``checkpoint_id``
    (``state`` None: it keeps none); ``alignment`` and ``duration`` in seconds."""

    job_id: str
    attempt_id: str
    subtask_id: str
    checkpoint_id: int
    state: StateHandle | None = None
    alignment: float = 0.0
    duration: float = 0.0


@message
@dataclass(frozen=True)
class DeclineCheckpoint:
    """TaskExecutor -> JobMaster (tell): the task could not take its snapshot."""

    job_id: str
    attempt_id: str
    subtask_id: str
    checkpoint_id: int
    reason: str


@message
@dataclass(frozen=True)
class TriggerSavepoint:
    """Client -> Dispatcher (ask): take a savepoint of a running streaming job, under the
    cluster's ``state.savepoints.dir``. ``stop``: the job's sources stop at it and the job
    finishes once it completed (``clusterdeck stop``); ``savepoint`` False with ``stop``:
    a stop at a last checkpoint, no savepoint kept. Answered ``SavepointCompleted``."""

    job_id: str
    stop: bool = False
    savepoint: bool = True


@message
@dataclass(frozen=True)
class SavepointCompleted:
    """Dispatcher -> client: ``path`` (on the JobManager's machine; empty for a stop
    without savepoint) holds the state of checkpoint ``checkpoint_id``."""

    job_id: str
    checkpoint_id: int
    path: str
