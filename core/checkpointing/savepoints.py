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
checking that its state fits the job: every vertex it holds state for exists, with the
same max parallelism (key groups). A vertex whose parallelism changed is *rescaled*
(``rescaled_state``): each new subtask's state names every old subtask's snapshot and
the shared files of those whose key groups overlap its own; the task takes what is its
own (core/engine/rescaling.py). Format 1 (before key groups, when keys went to a hash
modulo the parallelism) is read too: its keyed state is always redistributed so. Paths
from a request are resolved and must lie inside the savepoint
folder: a client names a savepoint, never an arbitrary file of the JobManager's machine.

Blocking file work: called on worker threads, never on an endpoint's main thread.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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
from clusterdeck.core.jobapi import plan
from clusterdeck.core.protocol.checkpoints import SavepointRestore, SharedStateFile, StateHandle
from clusterdeck.core.protocol.ids import subtask_id
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.keygroups import DEFAULT_MAX_PARALLELISM, key_group_range
from clusterdeck.core.rpc import CodecError, from_data, to_data

FORMAT = 2
"""2: key groups (``max_parallelism``); 1, before them, is still read (``adopt``)."""
READABLE = (1, 2)
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
    max_parallelism: int = DEFAULT_MAX_PARALLELISM  # the job's key groups (format 2)


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
                {vertex.id: vertex.parallelism for vertex in graph.vertices}, states,
                graph.max_parallelism)
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
        if metadata.format not in READABLE:
            raise CheckpointStorageError(f"savepoint {folder.name} is of format "
                                         f"{metadata.format}; this version reads formats "
                                         f"{', '.join(map(str, READABLE))}")
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
        return self._adopted(self.locate(restore.path), metadata, kept, graph, job_id, job)

    def _adopted(self, folder: Path, metadata: SavepointMetadata, kept: dict[str, StateHandle],
                 graph: JobGraph, job_id: str, job: CheckpointStorage,
                 parallelism: dict[str, int] | None = None) -> CompletedCheckpoint:
        """``kept`` of the state ``metadata`` describes (its files under ``folder``),
        committed as checkpoint ``metadata.checkpoint_id`` of job ``job_id``, each vertex's
        redistributed to its parallelism in ``graph`` where that changed."""
        states = {}
        for vertex in graph.vertices:
            old = metadata.parallelism.get(vertex.id)
            if not any(name.rpartition("#")[0] == vertex.id for name in kept):
                continue
            assert old is not None  # fitting_states: a vertex with state has its count
            keyed = any(op.kind in plan.STREAMING_KEYED for op in vertex.operators)
            if old == vertex.parallelism and (metadata.format == FORMAT or not keyed):
                for index in range(old):
                    found = kept.get(subtask_id(vertex.id, index))
                    if found is not None:
                        states[subtask_id(vertex.id, index)] = self._copied(
                            folder, metadata.checkpoint_id, subtask_id(vertex.id, index),
                            found, job_id, job)
                continue
            old_states = [kept.get(subtask_id(vertex.id, index)) for index in range(old)]
            for index in range(vertex.parallelism):
                new_id = subtask_id(vertex.id, index)
                states[new_id] = self._rescaled(folder, metadata, old_states, index,
                                                vertex.parallelism, new_id, job_id, job)
        checkpoint = CompletedCheckpoint(job_id, metadata.checkpoint_id, metadata.triggered,
                                         metadata.completed, states, parallelism or {})
        job.commit(checkpoint)
        return checkpoint

    def _copied(self, folder: Path, checkpoint_id: int, subtask: str, handle: StateHandle,
                job_id: str, job: CheckpointStorage) -> StateHandle:
        """One subtask's state copied as it is (the same parallelism)."""
        data = _read_state(folder, handle)
        shared = tuple(self._shared(folder, checkpoint_id, subtask, file, job_id, job)
                       for file in handle.shared)
        written = job.write_state(job_id, checkpoint_id, subtask, data)
        return StateHandle(written.path, written.size, written.sha256, shared)

    def _rescaled(self, folder: Path, metadata: SavepointMetadata,
                  old: list[StateHandle | None], index: int, parallelism: int,
                  subtask: str, job_id: str, job: CheckpointStorage) -> StateHandle:
        """New subtask ``index`` of ``parallelism``'s state: every old subtask's snapshot
        (each a part), with the shared files of those whose key groups overlap its own
        (all of them from a format 1 savepoint, which had no key groups)."""
        owned = key_group_range(metadata.max_parallelism, parallelism, index)
        parts, shared = [], []
        for old_index, handle in enumerate(old):
            if handle is None:
                parts.append({"subtask": old_index, "state": {}, "shared": []})
                continue
            had = key_group_range(metadata.max_parallelism, len(old), old_index)
            overlaps = metadata.format == 1 or (had.start <= owned[-1] and owned.start <= had[-1])
            indices = []
            for file in handle.shared if overlaps else ():
                indices.append(len(shared))
                shared.append(self._shared(folder, metadata.checkpoint_id, subtask, file,
                                           job_id, job))
            parts.append({"subtask": old_index, "state": json.loads(_read_state(folder, handle)),
                          "shared": indices})
        data = json.dumps(rescaled_state(metadata.max_parallelism, parts)).encode()
        if len(data) > MAX_STATE_BYTES:
            raise CheckpointStorageError(f"the rescaled state of {subtask} would be "
                                         f"{len(data)} bytes, over the limit of "
                                         f"{MAX_STATE_BYTES}")
        written = job.write_state(job_id, metadata.checkpoint_id, subtask, data)
        return StateHandle(written.path, written.size, written.sha256, tuple(shared))

    @staticmethod
    def _shared(folder: Path, checkpoint_id: int, subtask: str, file: SharedStateFile,
                job_id: str, job: CheckpointStorage) -> SharedStateFile:
        """A savepoint's shared file copied into the job's folder of ``subtask``."""
        relative = shared_path(subtask, checkpoint_id, file.path.rpartition(".")[2])
        copy_checked(folder / file.path, job.job_folder(job_id) / relative, file)
        return SharedStateFile(relative, file.size, file.sha256)


def rescale_checkpoint(job: CheckpointStorage, job_id: str, old: JobGraph, new: JobGraph
                       ) -> CompletedCheckpoint | None:
    """The job's latest completed checkpoint, taken at ``old``'s parallelism, copied into
    the next checkpoint number with its state redistributed as a savepoint's is to
    ``new``'s (reactive mode, core/jobmanager/reactive.py): the old one stays whole until
    the new one is committed, so a crash in between restores from either, never from a
    mix. It records ``new``'s parallelism: a JobManager that died before the job's new
    parallelism was stored recovers the job at this one (``recorded_parallelism``). None
    when no checkpoint completed (the job starts over)."""
    completed, _ = job.completed(job_id)
    if not completed:
        return None
    latest = completed[-1]
    metadata = SavepointMetadata(
        FORMAT, job_id, old.name, latest.checkpoint_id + 1, latest.triggered,
        latest.completed, {vertex.id: vertex.parallelism for vertex in old.vertices},
        dict(latest.states), old.max_parallelism)
    kept = fitting_states(metadata, new, allow_non_restored_state=False)
    folder = job.job_folder(job_id)
    return Savepoints(folder)._adopted(folder, metadata, kept, new, job_id, job,
                                       {vertex.id: vertex.parallelism for vertex in new.vertices})


def recorded_parallelism(job: CheckpointStorage, job_id: str, graph: JobGraph) -> JobGraph:
    """``graph`` at the parallelism its latest completed checkpoint was redistributed to,
    when a rescale recorded one there that ``graph`` lacks (the JobManager died between
    the two); ``graph`` itself otherwise."""
    completed, _ = job.completed(job_id)
    recorded = completed[-1].parallelism if completed else {}
    if all(recorded.get(v.id, v.parallelism) == v.parallelism for v in graph.vertices):
        return graph
    return replace(graph, vertices=tuple(
        replace(v, parallelism=recorded.get(v.id, v.parallelism)) for v in graph.vertices))


def rescaled_state(max_parallelism: int, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A rescaled subtask's state file: ``parts``, each old subtask's ``{"subtask": index,
    "state": its snapshot's JSON, "shared": indices of its chain among the handle's
    shared files}``; the task makes its own state from them (core/engine/rescaling.py)."""
    return {"rescaled": {"max_parallelism": max_parallelism, "parts": parts}}


def _read_state(folder: Path, handle: StateHandle) -> bytes:
    if handle.size > MAX_STATE_BYTES:
        raise CheckpointStorageError(f"savepoint state {handle.path} of {handle.size}"
                                     f" bytes is over the limit of {MAX_STATE_BYTES}")
    return read_checked(folder / handle.path, handle)


def fitting_states(metadata: SavepointMetadata, graph: JobGraph,
                   allow_non_restored_state: bool) -> dict[str, StateHandle]:
    """The savepoint's states ``graph`` takes; ValueError when it cannot start from it."""
    if metadata.format >= 2 and metadata.max_parallelism != graph.max_parallelism:
        raise ValueError(f"the savepoint's job had a max parallelism of "
                         f"{metadata.max_parallelism} (its key groups) and this one "
                         f"{graph.max_parallelism}: a job's max parallelism is fixed for its "
                         f"life (env.set_max_parallelism)")
    vertices = {vertex.id: vertex for vertex in graph.vertices}
    kept, skipped = {}, []
    for subtask, handle in metadata.states.items():
        vertex_id = subtask.rpartition("#")[0]
        vertex = vertices.get(vertex_id)
        if vertex is None:
            skipped.append(subtask)
            continue
        old = metadata.parallelism.get(vertex_id)
        if old is None:
            raise ValueError(f"the savepoint holds state of {subtask} but not how many "
                             f"subtasks vertex {vertex_id} ran")
        if old != vertex.parallelism:
            if vertex.parallelism > metadata.max_parallelism:
                raise ValueError(f"vertex {vertex.name} cannot have {vertex.parallelism} "
                                 f"subtasks: the savepoint's max parallelism (key groups) "
                                 f"is {metadata.max_parallelism}")
            if vertex.operators[0].kind == plan.SOURCE_FOLDER:
                raise ValueError(f"vertex {vertex.name} ran {old} subtasks in the savepoint "
                                 f"and has {vertex.parallelism} now: a watched folder's "
                                 f"position cannot be redistributed to another parallelism "
                                 f"yet (its files belong to subtasks by a hash of their name)")
        kept[subtask] = handle
    if skipped and not allow_non_restored_state:
        raise ValueError(
            f"the savepoint holds state of {len(skipped)} subtasks this job does not have "
            f"({', '.join(sorted(skipped)[:3])}); was the job changed? Pass "
            f"--allow-non-restored-state to start without that state")
    return kept
