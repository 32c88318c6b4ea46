"""Savepoints on disk: a completed checkpoint copied out of its job into a folder of its
own, which outlives the job and from which a new job starts (Flink's savepoints).

Layout, under the cluster's savepoint folder (``state.savepoints.dir``)::

    savepoint-<job id>-<checkpoint id>-<random>/
        <subtask>.state     each subtask's snapshot, copied and checked
        <subtask>.<n>.base|delta
                            the shared files of its keyed state (the embedded state
                            backend's chain), copied and checked: a savepoint needs no
                            file of its job, which may delete them once it is done
        _metadata           a SavepointMetadata (JSON), written last: the commit point

The folder is assembled under a hidden name and renamed once whole, so a savepoint
either exists completely or not at all. A new job adopts a savepoint by copying it into
its own checkpoints as a completed checkpoint of the same number (Flink's ``NO_CLAIM``
mode: the savepoint is never changed or deleted by the job that started from it), after
checking that its state fits the job: every subtask it holds state for exists with the
same parallelism. Paths from a request are resolved and must lie inside the savepoint
folder: a client names a savepoint, never an arbitrary file of the JobManager's machine.

Blocking file work: called on worker threads, never on an endpoint's main thread.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from clusterdeck.core.checkpointing.changelog import copy_checked
from clusterdeck.core.checkpointing.checkpoints import CompletedCheckpoint
from clusterdeck.core.checkpointing.storage import (
    MAX_SHARED_BYTES,
    MAX_STATE_BYTES,
    METADATA,
    CheckpointStorage,
    CheckpointStorageError,
    read_checked,
    shared_path,
    write_whole,
)
from clusterdeck.core.protocol.checkpoints import SavepointRestore, SharedStateFile, StateHandle
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.rpc import CodecError, from_data, to_data

FORMAT = 1
MAX_METADATA_BYTES = 16 * 1024 * 1024
PREFIX = "savepoint-"


@dataclass(frozen=True)
class SavepointMetadata:
    """What a savepoint holds: whose state, which checkpoint, and every vertex's
    parallelism then (a job started from it must have the same)."""

    format: int
    job_id: str
    job_name: str
    checkpoint_id: int
    triggered: float
    completed: float
    parallelism: dict[str, int] = field(default_factory=dict)  # vertex id -> subtasks
    states: dict[str, StateHandle] = field(default_factory=dict)  # paths: <name>.state


class Savepoints:
    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, checkpoint: CompletedCheckpoint, job: CheckpointStorage, graph: JobGraph
              ) -> Path:
        """Copy ``checkpoint`` of its job out into a new savepoint folder; its path."""
        name = f"{PREFIX}{checkpoint.job_id[:12]}-{checkpoint.checkpoint_id}-" \
               f"{secrets.token_hex(3)}"
        building = self.root / f".{name}.inprogress"
        building.mkdir(parents=True)
        try:
            states = {}
            for subtask_id, handle in checkpoint.states.items():
                data = job.read_state(checkpoint.job_id, handle)
                copied = Path(handle.path).name
                write_whole(building / copied, data)
                shared = []
                for index, file in enumerate(handle.shared):
                    kept = f"{Path(copied).stem}.{index}.{file.path.rpartition('.')[2]}"
                    copy_checked(job.shared_file(checkpoint.job_id, file, subtask_id),
                                 building / kept, file)
                    shared.append(SharedStateFile(kept, file.size, file.sha256))
                states[subtask_id] = StateHandle(copied, handle.size, handle.sha256,
                                                 tuple(shared))
            metadata = SavepointMetadata(
                FORMAT, checkpoint.job_id, graph.name, checkpoint.checkpoint_id,
                checkpoint.triggered, checkpoint.completed,
                {vertex.id: vertex.parallelism for vertex in graph.vertices}, states)
            write_whole(building / METADATA, json.dumps(to_data(metadata)).encode())
            os.replace(building, self.root / name)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        return self.root / name

    def locate(self, path: str) -> Path:
        """The savepoint folder ``path`` names (absolute, or relative to the savepoint
        folder), resolved and checked to lie inside the savepoint folder."""
        root = self.root.resolve()
        folder = (root / path).resolve()
        if folder.parent != root or not folder.name.startswith(PREFIX):
            raise CheckpointStorageError(
                f"{path!r} is not a savepoint of this cluster: savepoints are the "
                f"{PREFIX}* folders of its state.savepoints.dir (copy one there to use it)")
        return folder

    def read(self, path: str) -> SavepointMetadata:
        """The metadata of the savepoint ``path`` names, read and checked."""
        folder = self.locate(path)
        try:
            with open(folder / METADATA, "rb") as source:
                data = source.read(MAX_METADATA_BYTES + 1)
        except OSError as error:
            raise CheckpointStorageError(f"savepoint {folder.name} cannot be read: "
                                         f"{error.strerror or error}") from None
        if len(data) > MAX_METADATA_BYTES:
            raise CheckpointStorageError(f"savepoint {folder.name}: metadata too large")
        try:
            metadata = from_data(json.loads(data), SavepointMetadata, "savepoint metadata")
        except (ValueError, CodecError) as error:
            raise CheckpointStorageError(f"savepoint {folder.name}: metadata is not valid: "
                                         f"{error}") from None
        if metadata.format != FORMAT:
            raise CheckpointStorageError(f"savepoint {folder.name} is of format "
                                         f"{metadata.format}; this version reads {FORMAT}")
        for handle in metadata.states.values():
            if "/" in handle.path or not handle.path.endswith(".state"):
                raise CheckpointStorageError(f"savepoint {folder.name} names {handle.path!r}")
            for file in handle.shared:
                if "/" in file.path or file.path.startswith(".") \
                        or not file.path.endswith((".base", ".delta")) \
                        or not 0 <= file.size <= MAX_SHARED_BYTES:
                    raise CheckpointStorageError(f"savepoint {folder.name} names "
                                                 f"{file.path!r} of {file.size} bytes")
        return metadata

    def adopt(self, restore: SavepointRestore, graph: JobGraph, job_id: str,
              job: CheckpointStorage) -> CompletedCheckpoint:
        """Copy the savepoint into job ``job_id``'s checkpoints as a completed checkpoint
        of the same number (its metadata written last), with only the state ``graph``
        takes; the job then restores from it as from its own latest checkpoint."""
        metadata = self.read(restore.path)
        kept = fitting_states(metadata, graph, restore.allow_non_restored_state)
        folder = self.locate(restore.path)
        states = {}
        for subtask_id, handle in kept.items():
            if handle.size > MAX_STATE_BYTES:
                raise CheckpointStorageError(f"savepoint state {handle.path} of {handle.size}"
                                             f" bytes is over the limit of {MAX_STATE_BYTES}")
            data = read_checked(folder / handle.path, handle)
            shared = []
            for file in handle.shared:
                relative = shared_path(subtask_id, metadata.checkpoint_id,
                                       file.path.rpartition(".")[2])
                copy_checked(folder / file.path, job.job_folder(job_id) / relative, file)
                shared.append(SharedStateFile(relative, file.size, file.sha256))
            written = job.write_state(job_id, metadata.checkpoint_id, subtask_id, data)
            states[subtask_id] = StateHandle(written.path, written.size, written.sha256,
                                             tuple(shared))
        checkpoint = CompletedCheckpoint(job_id, metadata.checkpoint_id, metadata.triggered,
                                         metadata.completed, states)
        job.commit(checkpoint)
        return checkpoint


def fitting_states(metadata: SavepointMetadata, graph: JobGraph,
                   allow_non_restored_state: bool) -> dict[str, StateHandle]:
    """The savepoint's states ``graph`` takes; ValueError when it cannot start from it."""
    parallelism = {vertex.id: vertex.parallelism for vertex in graph.vertices}
    kept, skipped = {}, []
    for subtask_id, handle in metadata.states.items():
        vertex_id = subtask_id.rpartition("#")[0]
        if vertex_id not in parallelism:
            skipped.append(subtask_id)
            continue
        if metadata.parallelism.get(vertex_id) != parallelism[vertex_id]:
            raise ValueError(
                f"vertex {vertex_id} ran {metadata.parallelism.get(vertex_id)} subtasks in "
                f"the savepoint and has {parallelism[vertex_id]} now: rescaling from a "
                f"savepoint is not supported yet")
        kept[subtask_id] = handle
    if skipped and not allow_non_restored_state:
        raise ValueError(
            f"the savepoint holds state of {len(skipped)} subtasks this job does not have "
            f"({', '.join(sorted(skipped)[:3])}); was the job changed? Pass "
            f"--allow-non-restored-state to start without that state")
    return kept
