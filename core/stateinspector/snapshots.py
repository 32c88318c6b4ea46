"""What the inspector reads: one completed checkpoint of a job, or a savepoint folder, as
its subtasks' state handles and where their files lie. Read only: nothing here writes,
deletes or registers a file. Blocking file work, on the caller's thread."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.checkpointing import (
    CheckpointStorage,
    CheckpointStorageError,
    CompletedCheckpoint,
    Savepoints,
)
from clusterdeck.core.protocol.checkpoints import SharedStateFile, StateHandle


class InspectorError(Exception):
    """Why the state asked for cannot be shown (no such checkpoint, an unknown vertex...)."""


@dataclass(frozen=True)
class Snapshot:
    """One checkpoint's or savepoint's state: ``states`` by subtask id, the handles'
    paths relative to ``folder`` (the job's checkpoint folder, or the savepoint's)."""

    label: str
    checkpoint_id: int
    folder: Path
    states: dict[str, StateHandle]
    storage: CheckpointStorage | None = None  # a checkpoint's: checks its paths
    job_id: str = ""

    def state_file(self, handle: StateHandle) -> Path:
        if self.storage is not None:
            return self.storage.state_file(self.job_id, handle)
        return self.folder / handle.path  # a savepoint's, checked by Savepoints.read

    def shared_file(self, subtask_id: str, file: SharedStateFile) -> Path:
        if self.storage is not None:
            return self.storage.shared_file(self.job_id, file, subtask_id)
        return self.folder / file.path

    def vertices(self) -> list[str]:
        return sorted({subtask.rpartition("#")[0] for subtask in self.states})


LISTINGS = 5  # looks at a running job's checkpoint folder before "none completed"


def retained_checkpoints(storage: CheckpointStorage, job_id: str) -> list[CompletedCheckpoint]:
    """The job's completed checkpoints on disk, oldest first; InspectorError when none.
    A running job's JobManager deletes a subsumed checkpoint as the next completes: one
    listed may be gone when its metadata is read, while the newest is still in progress,
    so a listing that finds none is taken again a few times."""
    if not storage.job_folder(job_id).is_dir():
        raise InspectorError(f"no checkpoints of job {job_id} in {storage.root}")
    for _ in range(LISTINGS):
        found, problems = storage.completed(job_id)
        if found or not problems:
            break
        time.sleep(0.05)  # the checkpoint in progress completes, or the next listing misses
    if not found:
        why = f" ({problems[-1]})" if problems else ""
        raise InspectorError(f"job {job_id} has no completed checkpoint{why}")
    return found


def open_checkpoint(storage: CheckpointStorage, job_id: str,
                    checkpoint_id: int | None = None) -> Snapshot:
    """Checkpoint ``checkpoint_id`` of the job, or its latest completed one."""
    found = retained_checkpoints(storage, job_id)
    if checkpoint_id is None:
        return _of_checkpoint(storage, found[-1])
    for checkpoint in found:
        if checkpoint.checkpoint_id == checkpoint_id:
            return _of_checkpoint(storage, checkpoint)
    kept = ", ".join(str(checkpoint.checkpoint_id) for checkpoint in found)
    raise InspectorError(f"job {job_id} has no completed checkpoint {checkpoint_id} "
                         f"(retained: {kept})")


def _of_checkpoint(storage: CheckpointStorage, checkpoint: CompletedCheckpoint) -> Snapshot:
    return Snapshot(f"checkpoint {checkpoint.checkpoint_id}", checkpoint.checkpoint_id,
                    storage.job_folder(checkpoint.job_id), checkpoint.states, storage,
                    checkpoint.job_id)


def open_savepoint(folder: Path) -> Snapshot:
    """The savepoint in ``folder`` (its metadata read and checked as a restore checks it)."""
    folder = folder.expanduser().resolve()
    try:
        metadata = Savepoints(folder.parent).read(folder.name)
    except CheckpointStorageError as error:
        raise InspectorError(str(error)) from None
    return Snapshot(f"savepoint {folder.name}", metadata.checkpoint_id, folder,
                    metadata.states)
