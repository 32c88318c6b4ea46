"""The state inspector on snapshots the real snapshot writer wrote (no cluster): a vertex
``counts`` of two subtasks keeping a process function's value per key, in either state
backend, over several checkpoints; and a source subtask that keeps no keyed state."""

from __future__ import annotations

import queue
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clusterdeck.core.checkpointing import CheckpointStorage, CompletedCheckpoint, Savepoints
from clusterdeck.core.checkpointing.changelog import chain_entries
from clusterdeck.core.checkpointing.snapshotwriter import SnapshotWriter
from clusterdeck.core.engine.keyedstate import ProcessState, decoded, encoded
from clusterdeck.core.engine.records import to_tagged
from clusterdeck.core.stateinspector import (
    InspectorError,
    diff,
    growth,
    keys,
    open_checkpoint,
    open_savepoint,
    sizes,
    subtask_entries,
    top,
)
from clusterdeck.core.streaming.statebackend import KeyedStore, StoredValues, StoredWindows

JOB = "job-1"
VERTEX = "counts"
SUBTASKS = (f"{VERTEX}#0", f"{VERTEX}#1")


class Job:
    """Two subtasks' keyed state, checkpointed by their own snapshot writers."""

    def __init__(self, root: Path, backend: str) -> None:
        self.storage = CheckpointStorage(root)
        self.inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.stores = {subtask: KeyedStore(1 << 20, root / "db" / subtask[-1])
                       for subtask in SUBTASKS} if backend == "rocksdb" else {}
        self.states = {subtask: ProcessState(store=self.stores.get(subtask))
                       for subtask in SUBTASKS}
        self.writers = {subtask: SnapshotWriter(self.storage, JOB, subtask, self.inbox)
                        for subtask in (*SUBTASKS, "source#0")}

    def checkpoint(self, checkpoint_id: int, updates: dict[str, Any]) -> None:
        """Each key's new value (None: cleared), on the subtask its number names."""
        for index, subtask in enumerate(SUBTASKS):
            mine = [(key, value, []) for key, value in sorted(updates.items())
                    if int(key.rpartition("-")[2]) % 2 == index]
            self.states[subtask].merge(mine)
        handles = {}
        for subtask, writer in self.writers.items():
            state: dict[str, Any] = {"source": {"offset": checkpoint_id}}
            changes = None
            if subtask in self.states:
                state = {"chain": {"largest_timestamp": None, "windows": None,
                                   "running": None, "values": self.states[subtask].snapshot()}}
                changes = self.stores[subtask].changes() if self.stores else None
            assert writer.submit(checkpoint_id, state, 0.0, time.monotonic(), changes) == ""
            written = self.inbox.get(timeout=30)
            writer.taken()
            assert written.handle is not None, written.error
            handles[subtask] = written.handle
        self.storage.commit(CompletedCheckpoint(JOB, checkpoint_id, 0.0, 0.0, handles))

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        for store in self.stores.values():
            store.close()


@pytest.fixture(params=["heap", "rocksdb"])
def job(request, tmp_path):
    job = Job(tmp_path, request.param)
    job.checkpoint(1, {f"user-{n}": (n, "x" * (n % 7)) for n in range(100)})
    job.checkpoint(2, {"user-3": (3, "changed" * 10), "user-4": None, "user-100": (100, "")})
    job.checkpoint(3, {"user-5": None, "user-101": (101, "y" * 300)})
    yield job
    job.close()


def values_after_three_checkpoints() -> dict[str, Any]:
    values = {f"user-{n}": [n, "x" * (n % 7)] for n in range(100)}
    values.update({"user-3": [3, "changed" * 10], "user-100": [100, ""],
                   "user-101": [101, "y" * 300]})
    del values["user-4"], values["user-5"]
    return values


def test_keys_lists_every_key_of_the_latest_checkpoint_with_its_value(job):
    snapshot = open_checkpoint(job.storage, JOB)
    page = keys(snapshot, VERTEX, limit=1000)
    assert snapshot.checkpoint_id == 3
    assert {entry.key: list(entry.value) for entry in page.entries} == \
        values_after_three_checkpoints()
    assert page.matched == 100
    assert {entry.subtask for entry in page.entries if entry.key == "user-7"} == {SUBTASKS[1]}


def test_pages_cover_every_key_once_in_order(job):
    snapshot = open_checkpoint(job.storage, JOB)
    whole = [entry.key for entry in keys(snapshot, VERTEX, limit=1000).entries]
    paged = []
    for offset in range(0, 100, 30):
        page = keys(snapshot, VERTEX, offset=offset, limit=30)
        assert page.matched == 100
        paged += [entry.key for entry in page.entries]
    assert paged == whole
    assert keys(snapshot, VERTEX, offset=100, limit=30).entries == []


def test_search_matches_a_substring_and_prefix_the_beginning(job):
    snapshot = open_checkpoint(job.storage, JOB)
    found = keys(snapshot, VERTEX, search="-10")
    assert sorted(entry.key for entry in found.entries) == ["user-10", "user-100", "user-101"]
    assert keys(snapshot, VERTEX, prefix="user-9").matched == 11
    assert keys(snapshot, VERTEX, prefix="9").matched == 0


def test_top_gives_the_biggest_keys_first(job):
    biggest = top(open_checkpoint(job.storage, JOB), VERTEX, 2)
    assert [entry.key for entry in biggest] == ["user-101", "user-3"]
    assert biggest[0].size > biggest[1].size


def test_sizes_count_keys_and_bytes_per_subtask_with_keyed_state_only(job):
    rows = sizes(open_checkpoint(job.storage, JOB, 1))
    assert [row.subtask for row in rows] == list(SUBTASKS)
    assert [row.keys for row in rows] == [50, 50]
    assert all(row.bytes > 50 * 10 for row in rows)


def test_growth_shows_keys_and_bytes_per_retained_checkpoint(job):
    rows = growth(job.storage, JOB)
    assert [checkpoint_id for checkpoint_id, _ in rows] == [1, 2, 3]
    assert [by_vertex[VERTEX].keys for _, by_vertex in rows] == [100, 100, 100]
    assert rows[2][1][VERTEX].bytes > rows[1][1][VERTEX].bytes + 250


def test_diff_of_two_checkpoints_gives_keys_added_removed_and_changed(job):
    first, last = (open_checkpoint(job.storage, JOB, n) for n in (1, 3))
    page = diff(first, last)
    assert page.counts == {"added": 2, "removed": 2, "changed": 1}
    shown = {(change.kind, change.entry.key): (
        change.before and list(change.before.value), change.after and list(change.after.value))
        for change in page.changes}
    assert shown == {("added", "user-100"): (None, [100, ""]),
                     ("added", "user-101"): (None, [101, "y" * 300]),
                     ("removed", "user-4"): ([4, "xxxx"], None),
                     ("removed", "user-5"): ([5, "xxxxx"], None),
                     ("changed", "user-3"): ([3, "xxx"], [3, "changed" * 10])}
    assert [change.kind for change in diff(first, last, offset=1, limit=2).changes] == \
        [change.kind for change in page.changes[1:3]]


def test_a_savepoint_holds_the_state_of_its_checkpoint(job, tmp_path):
    checkpoint = job.storage.completed(JOB)[0][-1]
    graph = SimpleNamespace(name="sums", vertices=[SimpleNamespace(id=VERTEX, parallelism=2),
                                                   SimpleNamespace(id="source", parallelism=1)],
                            max_parallelism=128)
    folder = Savepoints(tmp_path / "savepoints").write(checkpoint, job.storage, graph)
    savepoint = open_savepoint(folder)
    assert savepoint.checkpoint_id == 3
    assert {entry.key: list(entry.value) for entry in keys(savepoint, VERTEX, limit=1000)
            .entries} == values_after_three_checkpoints()
    page = diff(open_checkpoint(job.storage, JOB), savepoint)
    assert page.counts == {"added": 0, "removed": 0, "changed": 0}
    assert diff(open_checkpoint(job.storage, JOB, 2), savepoint).counts["added"] == 1


def test_errors_name_what_is_missing(job):
    with pytest.raises(InspectorError, match=r"no completed checkpoint 9 \(retained: 1, 2, 3\)"):
        open_checkpoint(job.storage, JOB, 9)
    with pytest.raises(InspectorError, match="no state of vertex 'nope'; its vertices: "
                                             "counts, source"):
        keys(open_checkpoint(job.storage, JOB), "nope")
    with pytest.raises(InspectorError, match="no checkpoints of job other"):
        open_checkpoint(job.storage, "other")
    with pytest.raises(InspectorError, match="savepoint"):
        open_savepoint(job.storage.root / JOB)


def test_an_incremental_chain_reads_as_its_restore_leaves_the_store(tmp_path):
    """The chain of many deltas, each overwriting and deleting keys of the ones before:
    the inspector's entries are exactly a restored store's."""
    job = Job(tmp_path, "rocksdb")
    try:
        for checkpoint_id in range(1, 8):
            job.checkpoint(checkpoint_id, {f"user-{n}": None if n % checkpoint_id == 1
                                           else (checkpoint_id, n) for n in range(200)})
        snapshot = open_checkpoint(job.storage, JOB)
        for subtask in SUBTASKS:
            handle = snapshot.states[subtask]
            assert len(handle.shared) > 1
            restored = KeyedStore(1 << 20, tmp_path / "restored" / subtask[-1])
            try:
                restored.apply(chain_entries(job.storage, JOB, subtask, handle.shared))
                assert [(entry.raw_key, entry.raw_value)
                        for entry in subtask_entries(snapshot, subtask)] == \
                    list(restored.scan(b""))
            finally:
                restored.close()
    finally:
        job.close()


def test_reading_large_rocksdb_state_takes_memory_well_below_its_size(tmp_path):
    job = Job(tmp_path, "rocksdb")
    try:
        padding = "p" * 1000
        job.checkpoint(1, {f"user-{n}": (n, padding) for n in range(30_000)})
        job.checkpoint(2, {f"user-{n}": (n + 1, padding) for n in range(0, 30_000, 3)})
        before, after = (open_checkpoint(job.storage, JOB, n) for n in (1, 2))
        state_bytes = sum(row.bytes for row in sizes(after))
        assert state_bytes > 30_000_000
        tracemalloc.start()
        try:
            assert keys(after, VERTEX, offset=20_000, limit=20).matched == 30_000
            assert len(top(after, VERTEX, 20)) == 20
            assert diff(before, after, limit=20).counts["changed"] == 10_000
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < state_bytes / 5, f"peak {peak:,} B for {state_bytes:,} B of state"
    finally:
        job.close()


def test_both_backends_read_as_the_same_entries_values_and_windows_alike(tmp_path):
    """The same state kept on the heap and in the store: the same keys (a window's as
    ``[key, start, end]``), values and bytes, so snapshots of either compare."""
    values = [(("a", 1), (3, "x")), ("b", 2.5)]
    open_windows = [("k", (0.0, 1.0), 4), (("t", 1), (-2.0, -1.0), 7)]
    storage = CheckpointStorage(tmp_path / "checkpoints")
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    store = KeyedStore(1 << 20, tmp_path / "db")
    StoredValues(store, encoded, decoded).load(values)
    StoredWindows(store, lambda a, b: a + b, encoded, decoded).load(open_windows)
    heap = {"chain": {"values": [[to_tagged(key), to_tagged(value)] for key, value in values],
                      "windows": {"fired_to": None, "late": 0, "ended": False, "open": [
                          [to_tagged(key), list(window), to_tagged(aggregate)]
                          for key, window, aggregate in open_windows]}}}
    handles = {}
    try:
        for subtask, state, changes in (("heap#0", heap, None),
                                        ("rocksdb#0", {"chain": {}}, store.changes())):
            writer = SnapshotWriter(storage, JOB, subtask, inbox)
            writer.submit(1, state, 0.0, time.monotonic(), changes)
            handles[subtask] = inbox.get(timeout=30).handle
            writer.close()
    finally:
        store.close()
    storage.commit(CompletedCheckpoint(JOB, 1, 0.0, 0.0, handles))
    snapshot = open_checkpoint(storage, JOB)
    heap_entries, stored_entries = (list(subtask_entries(snapshot, subtask))
                                    for subtask in ("heap#0", "rocksdb#0"))
    assert [(e.raw_key, e.raw_value) for e in heap_entries] == \
        [(e.raw_key, e.raw_value) for e in stored_entries]
    assert sorted((repr(e.key), repr(e.value)) for e in stored_entries) == sorted([
        (repr(["k", 0.0, 1.0]), "4"), (repr([("t", 1), -2.0, -1.0]), "7"),
        (repr(("a", 1)), repr((3, "x"))), (repr("b"), "2.5")])
