"""Incremental checkpoints of the embedded state backend (Flink's changelog state backend
with its periodic materialisation): each checkpoint uploads only the keys written or
deleted since the task's previous snapshot, as a **delta** file shared with the later
checkpoints; a snapshot's handle names its whole chain, a **base** (every entry, once)
then the deltas since, which applied in order give the state.

When the chain grows past ``MAX_DELTAS`` deltas, or its deltas outweigh its base, a
thread of its own **materialises** a new base (snapshotwriter.py): a merge of the chain's
files (sorted by key, newest wins, deletions dropped), read and written as streams, never
the whole state in memory, never the live store; the task and its checkpoints go on
meanwhile, and the first checkpoint after it names the new base, then the deltas the
base does not cover. Restores read one base and about ``MAX_DELTAS`` deltas.

A file: ``MAGIC``, then per entry the key's length (4 bytes), the key, the value's
length (4 bytes, -1 for a deletion) and the value; entries by key. Every file is written
under a temporary name, flushed and renamed, and checked against its handle (size,
SHA-256) in full before any of its entries is used.

``IncrementalSnapshots`` runs on the task's snapshot writer thread, but for
``build_base``, which only reads files.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import secrets
import shutil
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.checkpointing.storage import (
    CheckpointStorage,
    CheckpointStorageError,
    atomic_file,
    shared_path,
)
from clusterdeck.core.protocol.checkpoints import SharedStateFile

Changes = dict[bytes, bytes | None]
MAGIC = b"clusterdeck changes 1\n"
MAX_DELTAS = 10
"""Deltas a chain holds at most before a new base is materialised (a restore's files)."""
MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""A key or value larger than this in a file means the file is not one of ours."""
_LENGTH = struct.Struct(">i")
_READ = 1024 * 1024


def write_entries(path: Path, entries: Iterable[tuple[bytes, bytes | None]]
                  ) -> tuple[int, str]:
    """``entries`` (in key order) whole on disk at ``path``; its size and SHA-256."""
    digest, size = hashlib.sha256(), 0
    with atomic_file(path, buffering=_READ) as out:
        def put(data: bytes) -> None:
            nonlocal size
            out.write(data)
            digest.update(data)
            size += len(data)
        put(MAGIC)
        for key, value in entries:
            put(_LENGTH.pack(len(key)) + key + (
                _LENGTH.pack(-1) if value is None else _LENGTH.pack(len(value)) + value))
    return size, digest.hexdigest()


def check(path: Path, file: SharedStateFile) -> None:
    """The file must be exactly what ``file`` says was written (read as a stream)."""
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as source:
            while size <= file.size and (chunk := source.read(_READ)):
                digest.update(chunk)
                size += len(chunk)
    except OSError as error:
        raise CheckpointStorageError(f"shared state {file.path} cannot be read: "
                                     f"{error.strerror or error}") from None
    if size != file.size or digest.hexdigest() != file.sha256:
        raise CheckpointStorageError(f"shared state {file.path} is not what was written "
                                     "(its size or checksum differ)")


def copy_checked(source: Path, target: Path, file: SharedStateFile) -> None:
    """A shared file copied whole to ``target`` (a savepoint's, or a job's adopting one),
    once it is checked to be what ``file`` says."""
    check(source, file)
    with atomic_file(target) as out, open(source, "rb") as copied:
        shutil.copyfileobj(copied, out, _READ)


def read_entries(path: Path) -> Iterator[tuple[bytes, bytes | None]]:
    """The entries of a file ``check`` passed, in its order."""
    with open(path, "rb", buffering=_READ) as source:
        if source.read(len(MAGIC)) != MAGIC:
            raise CheckpointStorageError(f"{path.name} is not a file of keyed state")
        while header := source.read(_LENGTH.size):
            key = source.read(_length(header, path, deletion=False))
            value_length = _length(source.read(_LENGTH.size), path, deletion=True)
            yield key, None if value_length < 0 else source.read(value_length)


def _length(header: bytes, path: Path, deletion: bool) -> int:
    if len(header) != _LENGTH.size:
        raise CheckpointStorageError(f"{path.name} ends inside an entry")
    (length,) = _LENGTH.unpack(header)
    if length > MAX_ENTRY_BYTES or length < (-1 if deletion else 0):
        raise CheckpointStorageError(f"{path.name} holds an entry of {length} bytes")
    return length


def merged(files: list[Iterator[tuple[bytes, bytes | None]]]
           ) -> Iterator[tuple[bytes, bytes]]:
    """The entries of sorted files, oldest file first, as one sorted state: of a key in
    several files the newest file's, a deleted key not at all."""
    streams = [_aged(entries, -age) for age, entries in enumerate(files)]
    last = None
    for key, _age, value in heapq.merge(*streams, key=lambda entry: entry[:2]):
        if key == last:
            continue
        last = key
        if value is not None:
            yield key, value


def _aged(entries: Iterator[tuple[bytes, bytes | None]], newness: int
          ) -> Iterator[tuple[bytes, int, bytes | None]]:
    for key, value in entries:
        yield key, newness, value


@dataclass(frozen=True)
class MaterialisedBase:
    """A base built from the first ``covers`` files of a chain, under a hidden name (no
    sweep deletes it) until the next checkpoint names it."""

    path: Path
    size: int
    sha256: str
    covers: int


class IncrementalSnapshots:
    """The chain of one subtask's shared files, as its snapshots go (writer thread; but
    ``build_base``, which reads only files, on any)."""

    def __init__(self, storage: CheckpointStorage, job_id: str, subtask_id: str) -> None:
        self.storage = storage
        self.job_id = job_id
        self.subtask_id = subtask_id
        self.chain: tuple[SharedStateFile, ...] = ()
        self._unwritten: Changes = {}
        self._base: MaterialisedBase | None = None
        self.written = 0  # bytes of deltas written
        self.materialised_bytes = 0  # bytes of bases written

    def restored(self, chain: tuple[SharedStateFile, ...]) -> None:
        """The task was restored from a snapshot naming ``chain``: its next ones go on
        from there."""
        self.chain = chain

    def write(self, checkpoint_id: int, changes: Changes) -> tuple[SharedStateFile, ...]:
        """Upload what changed (nothing when nothing did) as a delta; the files the
        checkpoint needs, from a base materialised since, if any. What could not be
        written goes into the next delta."""
        self._adopt_base(checkpoint_id)
        pending = self._unwritten
        pending.update(changes)
        self._unwritten = {}
        if pending:
            try:
                self.chain += (self._delta(checkpoint_id, sorted(pending.items())),)
            except BaseException:
                self._unwritten = pending
                raise
        return self.chain

    def materialisation_due(self) -> bool:
        if len(self.chain) < 2 or self._base is not None:
            return False
        deltas = self.chain[1:] if self.chain[0].path.endswith(".base") else self.chain
        return len(deltas) > MAX_DELTAS or (
            len(deltas) < len(self.chain)
            and sum(file.size for file in deltas) > self.chain[0].size)

    def build_base(self, chain: tuple[SharedStateFile, ...]) -> MaterialisedBase:
        """A new base from ``chain``'s files (a streaming merge, each file checked
        first), under a hidden name; reads no state of this object but its arguments."""
        paths = [self.storage.shared_file(self.job_id, file) for file in chain]
        for path, file in zip(paths, chain, strict=True):
            check(path, file)
        folder = self.storage.job_folder(self.job_id) / shared_path(self.subtask_id, 0,
                                                                     "base")
        hidden = folder.parent / f".materialised-{secrets.token_hex(6)}.base"
        size, sha256 = write_entries(hidden, merged([read_entries(path) for path in paths]))
        return MaterialisedBase(hidden, size, sha256, len(chain))

    def materialised(self, base: MaterialisedBase) -> None:
        """``base`` is whole: the next checkpoint names it instead of what it covers."""
        self._base = base

    def _adopt_base(self, checkpoint_id: int) -> None:
        """A materialised base takes its name for ``checkpoint_id`` (newer than every
        completed checkpoint, so no sweep takes it) and the place of what it covers."""
        base, self._base = self._base, None
        if base is None:
            return
        relative = shared_path(self.subtask_id, checkpoint_id, "base")
        os.replace(base.path, self.storage.job_folder(self.job_id) / relative)
        self.materialised_bytes += base.size
        self.chain = (SharedStateFile(relative, base.size, base.sha256),
                      *self.chain[base.covers:])

    def _delta(self, checkpoint_id: int, entries: Iterable[tuple[bytes, bytes | None]]
               ) -> SharedStateFile:
        relative = shared_path(self.subtask_id, checkpoint_id, "delta")
        size, sha256 = write_entries(self.storage.job_folder(self.job_id) / relative, entries)
        self.written += size
        return SharedStateFile(relative, size, sha256)


def chain_entries(storage: CheckpointStorage, job_id: str, subtask_id: str,
                  chain: tuple[SharedStateFile, ...]
                  ) -> Iterator[tuple[bytes, bytes | None]]:
    """A snapshot's chain of files as the entries to apply in order, each file checked
    in full before any of its entries comes out."""
    for file in chain:
        path = storage.shared_file(job_id, file, subtask_id)
        check(path, file)
        yield from read_entries(path)
