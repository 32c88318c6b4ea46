"""Checkpoints on disk: each subtask's snapshot, and the metadata that completes them.

Layout, under ``<root>/<job id>/`` (``root``: the cluster's checkpoint folder, on
storage the JobManager and every TaskManager reach)::

    chk-<id>/<subtask>.state   one subtask's snapshot, written by its task
    chk-<id>/_metadata         the CompletedCheckpoint (JSON), written by the JobMaster
                               once every task acknowledged: the commit point
    shared/<subtask>/<id>-<random>.delta|base
                               the keyed state of the embedded state backend, written by
                               the subtask's task for checkpoint <id> (changelog.py), named
                               by the handles of that and later checkpoints

A ``chk-<id>`` folder without ``_metadata`` never completed (aborted, or the JobManager
died first): it is never restored from. Every file is written under a temporary name,
flushed to the disk and renamed, so a reader sees a whole file or none; a snapshot read
back is checked against its handle (size, SHA-256) before any of it is used, and a
handle can only name a file of its own job's checkpoints. A shared file is deleted only
when no retained checkpoint names it (``SharedStateRegistry``, store.py), and one no
checkpoint ever named (its checkpoint was aborted) once a newer checkpoint completed
without it (``sweep_shared``).

Blocking file work: called on worker threads, never on an endpoint's main thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from clusterdeck.core.checkpointing.checkpoints import CompletedCheckpoint
from clusterdeck.core.protocol.checkpoints import SharedStateFile, StateHandle
from clusterdeck.core.rpc import CodecError, from_data, to_data

METADATA = "_metadata"
SHARED = "shared"
MAX_STATE_BYTES = 1024 ** 3
"""A subtask's snapshot larger than this is refused on reading (a handle names its size)."""
MAX_METADATA_BYTES = 64 * 1024 * 1024
MAX_SHARED_BYTES = 64 * 1024 ** 3
"""A shared file larger than this is refused (they are read as a stream, never whole)."""
_STATE_PATH = re.compile(r"chk-(\d+)/([^/]+)\.state")
_SHARED_PATH = re.compile(r"shared/([^/.][^/]*)/(\d+)-[0-9a-f]{12}\.(delta|base)")
_CHECKPOINT_FOLDER = re.compile(r"chk-(\d+)")


class CheckpointStorageError(Exception):
    """A snapshot or a checkpoint's metadata that cannot be used, and why."""


class CheckpointStorage:
    def __init__(self, root: Path) -> None:
        self.root = root

    def job_folder(self, job_id: str) -> Path:
        if not job_id or job_id in (".", "..") or "/" in job_id or "\\" in job_id:
            raise CheckpointStorageError(f"{job_id!r} is not a job id")
        return self.root / job_id

    # -- a task's side -------------------------------------------------------------------------

    def write_state(self, job_id: str, checkpoint_id: int, subtask_id: str,
                    data: bytes) -> StateHandle:
        """One subtask's snapshot, whole on disk before its handle is returned."""
        relative = state_path(checkpoint_id, subtask_id)
        write_whole(self.job_folder(job_id) / relative, data)
        return StateHandle(relative, len(data), hashlib.sha256(data).hexdigest())

    def state_file(self, job_id: str, handle: StateHandle,
                   limit: int = MAX_STATE_BYTES) -> Path:
        """Where the snapshot ``handle`` names lies, once its path and size are checked."""
        if not _STATE_PATH.fullmatch(handle.path):
            raise CheckpointStorageError(f"{handle.path!r} is not a snapshot of a checkpoint")
        if not 0 <= handle.size <= limit:
            raise CheckpointStorageError(f"snapshot {handle.path} of {handle.size} bytes is "
                                         f"over the limit of {limit}")
        return self.job_folder(job_id) / handle.path

    def read_state(self, job_id: str, handle: StateHandle,
                   limit: int = MAX_STATE_BYTES) -> bytes:
        """The snapshot ``handle`` names, checked; CheckpointStorageError says what is wrong."""
        return read_checked(self.state_file(job_id, handle, limit), handle)

    def shared_file(self, job_id: str, file: SharedStateFile, subtask_id: str | None = None,
                    ) -> Path:
        """Where the shared file ``file`` names lies, once its path (in ``subtask_id``'s
        folder, when given) and size are checked."""
        match = _SHARED_PATH.fullmatch(file.path)
        if not match:
            raise CheckpointStorageError(f"{file.path!r} is not a shared state file")
        if subtask_id is not None and match.group(1) != quote(subtask_id, safe=""):
            raise CheckpointStorageError(f"{file.path!r} is not a file of {subtask_id}")
        if not 0 <= file.size <= MAX_SHARED_BYTES:
            raise CheckpointStorageError(f"shared state {file.path} of {file.size} bytes is "
                                         f"over the limit of {MAX_SHARED_BYTES}")
        return self.job_folder(job_id) / file.path

    def sweep_shared(self, job_id: str, referenced: Iterable[str], completed: int) -> None:
        """Delete the shared files no retained checkpoint names (``referenced``) that were
        written for checkpoint ``completed`` or before: none can be named again (a task's
        next checkpoint names its last one's files, or a newer base, or what it was
        restored from); newer ones may be a checkpoint's in progress."""
        folder = self.job_folder(job_id)
        kept = set(referenced)
        try:
            subtasks = [entry for entry in os.scandir(folder / SHARED) if entry.is_dir()]
        except FileNotFoundError:
            return
        for subtask in subtasks:
            for entry in os.scandir(subtask.path):
                path = f"{SHARED}/{subtask.name}/{entry.name}"
                match = _SHARED_PATH.fullmatch(path)
                if match and int(match.group(2)) <= completed and path not in kept:
                    Path(entry.path).unlink(missing_ok=True)

    # -- the JobMaster's side ------------------------------------------------------------------

    def commit(self, checkpoint: CompletedCheckpoint) -> None:
        """Write the checkpoint's metadata: from now on it is complete on disk."""
        folder = self.job_folder(checkpoint.job_id) / f"chk-{checkpoint.checkpoint_id}"
        write_whole(folder / METADATA, json.dumps(to_data(checkpoint)).encode())

    def completed(self, job_id: str) -> tuple[list[CompletedCheckpoint], list[str]]:
        """The job's completed checkpoints, oldest first, and why any other checkpoint
        folder is not one (never committed, or unreadable metadata)."""
        found: list[CompletedCheckpoint] = []
        problems: list[str] = []
        for checkpoint_id, folder in self._checkpoint_folders(job_id):
            try:
                found.append(self._metadata(job_id, checkpoint_id, folder))
            except CheckpointStorageError as error:
                problems.append(str(error))
        return found, problems

    def discard(self, job_id: str, checkpoint_ids: Iterable[int],
                keep: Iterable[str] = ()) -> None:
        """Delete whole checkpoints (subsumed, aborted or never committed), but for the
        snapshots in ``keep`` (paths a retained checkpoint still names)."""
        folder = self.job_folder(job_id)
        kept = set(keep)
        for checkpoint_id in checkpoint_ids:
            checkpoint = folder / f"chk-{int(checkpoint_id)}"
            if not any(path.startswith(f"{checkpoint.name}/") for path in kept):
                shutil.rmtree(checkpoint, ignore_errors=True)
                continue
            for entry in list(checkpoint.iterdir()):  # its metadata goes: not complete now
                if f"{checkpoint.name}/{entry.name}" not in kept:
                    entry.unlink(missing_ok=True)

    def discard_states(self, job_id: str, handles: Iterable[StateHandle]) -> None:
        """Delete single snapshots (acknowledged too late, or of an aborted checkpoint),
        and their checkpoint's folder once it is empty (an aborted one's would stay)."""
        folder = self.job_folder(job_id)
        for handle in handles:
            if _STATE_PATH.fullmatch(handle.path):
                path = folder / handle.path
                path.unlink(missing_ok=True)
                with contextlib.suppress(OSError):  # not empty: others' snapshots remain
                    path.parent.rmdir()

    def _checkpoint_folders(self, job_id: str) -> list[tuple[int, Path]]:
        try:
            entries = list(os.scandir(self.job_folder(job_id)))
        except FileNotFoundError:
            return []
        folders = [(int(match.group(1)), Path(entry.path)) for entry in entries
                   if entry.is_dir() and (match := _CHECKPOINT_FOLDER.fullmatch(entry.name))]
        return sorted(folders)

    @staticmethod
    def _metadata(job_id: str, checkpoint_id: int, folder: Path) -> CompletedCheckpoint:
        where = f"checkpoint {checkpoint_id} of job {job_id}"
        try:
            with open(folder / METADATA, "rb") as source:
                data = source.read(MAX_METADATA_BYTES + 1)
        except FileNotFoundError:
            raise CheckpointStorageError(f"{where} never completed (no metadata)") from None
        except OSError as error:
            raise CheckpointStorageError(f"{where}: metadata cannot be read: {error}") from None
        if len(data) > MAX_METADATA_BYTES:
            raise CheckpointStorageError(f"{where}: metadata over {MAX_METADATA_BYTES} bytes")
        try:
            checkpoint = from_data(json.loads(data), CompletedCheckpoint, "checkpoint metadata")
        except (ValueError, CodecError) as error:
            raise CheckpointStorageError(f"{where}: metadata is not valid: {error}") from None
        if (checkpoint.job_id, checkpoint.checkpoint_id) != (job_id, checkpoint_id):
            raise CheckpointStorageError(f"{where}: metadata names checkpoint "
                                         f"{checkpoint.checkpoint_id} of {checkpoint.job_id}")
        return checkpoint


def state_path(checkpoint_id: int, subtask_id: str) -> str:
    """Where a subtask's snapshot of a checkpoint lies, relative to its job's folder: the
    only path its acknowledgement may name."""
    return f"chk-{int(checkpoint_id)}/{quote(subtask_id, safe='')}.state"


def shared_path(subtask_id: str, checkpoint_id: int, kind: str) -> str:
    """A new shared file of ``subtask_id`` for checkpoint ``checkpoint_id`` (``delta`` or
    ``base``), relative to its job's folder."""
    return f"{SHARED}/{quote(subtask_id, safe='')}/{int(checkpoint_id)}-" \
           f"{secrets.token_hex(6)}.{kind}"


def read_checked(path: Path, handle: StateHandle) -> bytes:
    """The snapshot at ``path``, which must be exactly what ``handle`` says was written."""
    try:
        with open(path, "rb") as source:
            data = source.read(handle.size + 1)
    except OSError as error:
        raise CheckpointStorageError(f"snapshot {handle.path} cannot be read: "
                                     f"{error.strerror or error}") from None
    if len(data) != handle.size or hashlib.sha256(data).hexdigest() != handle.sha256:
        raise CheckpointStorageError(f"snapshot {handle.path} is not what was written "
                                     f"(its size or checksum differ)")
    return data


def write_whole(path: Path, data: bytes) -> None:
    """``data`` whole at ``path`` (``atomic_file``)."""
    with atomic_file(path) as out:
        out.write(data)


@contextlib.contextmanager
def atomic_file(path: Path, buffering: int = -1) -> Iterator[BinaryIO]:
    """A temporary file in the same folder to write, flushed to the disk and renamed over
    ``path`` when the block ends; deleted instead when it raises. A reader sees a whole
    file or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb", buffering=buffering) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
