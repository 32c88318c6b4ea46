"""One subtask's keyed state in an embedded RocksDB (through ``rocksdict``), which keeps
what its memory budget does not hold on the local disk, and remembers what changed since
the last snapshot (Flink's changelog state backend: the change log is what an incremental
checkpoint uploads).

Keys and values are bytes (the keyed state encodes the user's values); a key's first
byte names what it belongs to (windows, values: one keyed operator a subtask, but the
layout leaves room for more). ``changes()`` hands over every key written or deleted
since the last call, with its value then (None: deleted), and starts a new log: the
synchronous part of a snapshot, as cheap as swapping a dict, and as large as what
changed. The database lives in a folder of its own (the attempt's, under its job's work
dir) that is deleted on ``close``; it is never restored from by itself: a restore starts
from an empty one and applies a checkpoint's files (``apply``).

Memory budget (``state.backend.memory``): half for the block cache (what is read), the
rest for two memtables (what is written before it is flushed to disk); with the change
log (as large as what changed in one checkpoint interval), that is what the state holds
in memory at most.

Used on the task's slot thread only.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from rocksdict import BlockBasedOptions, Cache, Options, Rdict, WriteBatch

Changes = dict[bytes, bytes | None]
"""Keys written (their value) or deleted (None) since the last snapshot."""

APPLY_BATCH = 10_000
"""Entries a restore writes in one batch: bounded memory whatever the state's size."""


class KeyedStore:
    def __init__(self, memory: int, folder: Path | None = None) -> None:
        """``folder``: where the database goes (a new temporary folder by default)."""
        self.folder = folder or Path(tempfile.mkdtemp(prefix="clusterdeck-state-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_write_buffer_size(max(64 * 1024, memory // 4))
        options.set_max_write_buffer_number(2)
        table = BlockBasedOptions()
        table.set_block_cache(Cache(max(64 * 1024, memory // 2)))
        options.set_block_based_table_factory(table)
        self._options = options
        self._db = Rdict(str(self.folder / "db"), options)
        self._changes: Changes = {}

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return self._db[keys] if keys else []

    def write(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Put each value (None: delete the key) in one atomic batch, and log it."""
        batch = WriteBatch(raw_mode=True)
        changes = self._changes
        for key, value in entries:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
            changes[key] = value
        self._db.write(batch)

    def scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every entry whose key starts with ``prefix``, in key order."""
        for key, value in self._db.items(from_key=prefix):
            if not key.startswith(prefix):
                return
            yield key, value

    def count(self, prefix: bytes) -> int:
        return sum(1 for _ in self.scan(prefix))

    def changes(self) -> Changes:
        """What changed since the last call (which nobody changes any more): the
        synchronous part of a snapshot."""
        changes, self._changes = self._changes, {}
        return changes

    def unchanged(self, changes: Changes) -> None:
        """A snapshot that was not taken after all: its changes go back into the log,
        under whatever changed since."""
        changes.update(self._changes)
        self._changes = changes

    def apply(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """A checkpoint's files, in order, into the database: a restore, not logged."""
        batch, size = WriteBatch(raw_mode=True), 0
        for key, value in entries:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
            size += 1
            if size == APPLY_BATCH:
                self._db.write(batch)
                batch, size = WriteBatch(raw_mode=True), 0
        if size:
            self._db.write(batch)

    def clear(self) -> None:
        """Empty: a fresh start, or before a restore."""
        self._db.close()
        Rdict.destroy(str(self.folder / "db"), self._options)
        self._db = Rdict(str(self.folder / "db"), self._options)
        self._changes = {}

    def close(self) -> None:
        """Closed and deleted from the disk."""
        self._db.close()
        shutil.rmtree(self.folder, ignore_errors=True)
