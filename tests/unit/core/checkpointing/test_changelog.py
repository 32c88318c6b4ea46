"""Incremental checkpoints of the embedded state backend: a checkpoint uploads what
changed (asserted on the bytes written), a chain of deltas restores the exact state, a
chain grown too long is materialised into a base that restores the same, every file is
checked against its handle, and the snapshot writer names the chain in the handle."""

from __future__ import annotations

import queue
import random
import time

import pytest

from clusterdeck.core.checkpointing import CheckpointStorage, CheckpointStorageError
from clusterdeck.core.checkpointing.changelog import (
    MAX_DELTAS,
    IncrementalSnapshots,
    chain_entries,
    merged,
)
from clusterdeck.core.checkpointing.snapshotwriter import SnapshotWriter
from clusterdeck.core.engine.keyedstate import decoded, encoded
from clusterdeck.core.protocol.checkpoints import SharedStateFile
from clusterdeck.core.streaming.statebackend import KeyedStore, StoredValues

KEYS = 100_000
SUBTASK = "vertex-0#1"


@pytest.fixture
def stores(tmp_path):
    opened: list[KeyedStore] = []

    def open_store() -> KeyedStore:
        opened.append(KeyedStore(1024 * 1024, tmp_path / f"store-{len(opened)}"))
        return opened[-1]
    yield open_store
    for store in opened:
        store.close()


def restored(storage: CheckpointStorage, chain, store: KeyedStore) -> dict:
    store.apply(chain_entries(storage, "job", SUBTASK, chain))
    values = StoredValues(store, encoded, decoded)
    return dict(values.entries())


def test_a_checkpoint_after_one_percent_of_100000_keys_changed_uploads_about_one_percent(
        tmp_path, stores):
    storage = CheckpointStorage(tmp_path / "checkpoints")
    snapshots = IncrementalSnapshots(storage, "job", SUBTASK)
    store = stores()
    values = StoredValues(store, encoded, decoded)
    keys = [f"user-{index}" for index in range(KEYS)]
    values.put_many([(key, 1) for key in keys], [None] * KEYS)
    snapshots.write(1, store.changes())
    full = snapshots.written
    rng = random.Random(5)
    expected = dict.fromkeys(keys, 1)
    for checkpoint_id in range(2, 6):
        changed = rng.sample(keys, KEYS // 100)
        values.put_many([(key, checkpoint_id) for key in changed], values.get_many(changed))
        expected.update(dict.fromkeys(changed, checkpoint_id))
        before = snapshots.written
        chain = snapshots.write(checkpoint_id, store.changes())
        assert 0.008 < (snapshots.written - before) / full < 0.015
    assert len(chain) == 5
    assert restored(storage, chain, stores()) == expected


def test_nothing_changed_uploads_nothing_and_names_the_same_chain(tmp_path, stores):
    snapshots = IncrementalSnapshots(CheckpointStorage(tmp_path), "job", SUBTASK)
    store = stores()
    store.write([(b"Va", b"1")])
    chain = snapshots.write(1, store.changes())
    written = snapshots.written
    assert snapshots.write(2, store.changes()) == chain and snapshots.written == written


def test_a_long_chain_is_materialised_into_a_base_that_restores_the_same_state(
        tmp_path, stores):
    storage = CheckpointStorage(tmp_path)
    snapshots = IncrementalSnapshots(storage, "job", SUBTASK)
    store = stores()
    values = StoredValues(store, encoded, decoded)
    for checkpoint_id in range(1, MAX_DELTAS + 3):
        keys = [f"k{index}" for index in range(checkpoint_id, 2000, checkpoint_id + 1)]
        values.put_many([(key, checkpoint_id) for key in keys], values.get_many(keys))
        gone = [f"k{index}" for index in range(0, 2000, 7 * checkpoint_id)]
        values.put_many([(key, None) for key in gone], values.get_many(gone))
        snapshots.write(checkpoint_id, store.changes())
    assert snapshots.materialisation_due()
    chain = snapshots.chain
    base = snapshots.build_base(chain)
    assert base.path.name.startswith(".")   # hidden: no sweep takes it
    values.put_many([("k1", "after")], values.get_many(["k1"]))   # meanwhile
    snapshots.write(MAX_DELTAS + 3, store.changes())
    snapshots.materialised(base)
    assert not snapshots.materialisation_due()
    materialised = snapshots.write(MAX_DELTAS + 4, store.changes())   # nothing changed
    assert [file.path.rpartition(".")[2] for file in materialised] == ["base", "delta"]
    assert materialised[0].path.startswith("shared/vertex-0%231/14-")
    assert materialised[1] == snapshots.chain[-1] and not base.path.exists()
    state = dict(values.entries())
    assert restored(storage, (*chain, materialised[1]), stores()) == state
    assert restored(storage, materialised, stores()) == state


def test_merged_files_keep_the_newest_value_of_each_key_and_drop_deleted_ones():
    oldest = iter([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    newer = iter([(b"a", None), (b"b", b"2")])
    newest = iter([(b"b", b"3"), (b"d", b"3")])
    assert list(merged([oldest, newer, newest])) == [(b"b", b"3"), (b"c", b"1"), (b"d", b"3")]


def test_a_shared_file_that_is_not_what_its_handle_says_is_refused_before_it_is_used(
        tmp_path, stores):
    storage = CheckpointStorage(tmp_path)
    snapshots = IncrementalSnapshots(storage, "job", SUBTASK)
    store = stores()
    store.write([(b"Va", b"1")])
    (file,) = snapshots.write(1, store.changes())
    path = storage.shared_file("job", file)
    path.write_bytes(path.read_bytes()[:-1] + b"2")
    with pytest.raises(CheckpointStorageError, match="not what was written"):
        list(chain_entries(storage, "job", SUBTASK, (file,)))
    with pytest.raises(CheckpointStorageError, match="not a file of"):
        storage.shared_file("job", file, "vertex-0#2")
    for bad in ("../x/1-aaaaaaaaaaaa.delta", "shared/a/1-aaaaaaaaaaaa.state", "chk-1/a.state"):
        with pytest.raises(CheckpointStorageError):
            storage.shared_file("job", SharedStateFile(bad, 1, "0"))


def test_a_delta_that_could_not_be_written_goes_into_the_next_one(tmp_path, stores):
    storage = CheckpointStorage(tmp_path)
    snapshots = IncrementalSnapshots(storage, "job", SUBTASK)
    store = stores()
    store.write([(b"Va", b"1")])
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "shared").write_text("in the way")
    with pytest.raises(OSError):
        snapshots.write(1, store.changes())
    (tmp_path / "job" / "shared").unlink()
    store.write([(b"Vb", b"2")])
    chain = snapshots.write(2, store.changes())
    fresh = stores()
    fresh.apply(chain_entries(storage, "job", SUBTASK, chain))
    assert sorted(fresh.scan(b"V")) == [(b"Va", b"1"), (b"Vb", b"2")]


def test_the_writer_names_the_chain_in_the_snapshots_handle(tmp_path, stores):
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    storage = CheckpointStorage(tmp_path)
    writer = SnapshotWriter(storage, "job", SUBTASK, inbox)
    store = stores()
    try:
        store.write([(b"Va", b"1")])
        assert writer.submit(1, {"chain": {}}, 0.0, time.monotonic(), store.changes()) == ""
        first = inbox.get(timeout=10).handle
        writer.taken()
        store.write([(b"Vb", b"2")])
        assert writer.submit(2, {"chain": {}}, 0.0, time.monotonic(), store.changes()) == ""
        second = inbox.get(timeout=10).handle
        writer.taken()
    finally:
        writer.close()
    assert first.path == "chk-1/vertex-0%231.state" and len(first.shared) == 1
    assert second.shared[0] == first.shared[0] and len(second.shared) == 2
    assert storage.read_state("job", second) == b'{"chain": {}}'


def test_the_writer_materialises_a_long_chain_off_its_thread_and_a_later_handle_names_it(
        tmp_path, stores):
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    storage = CheckpointStorage(tmp_path)
    writer = SnapshotWriter(storage, "job", SUBTASK, inbox)
    store = stores()
    handles = []
    deadline = time.monotonic() + 30
    try:
        for checkpoint_id in range(1, 1000):
            store.write([(f"V{checkpoint_id % 7}".encode(), str(checkpoint_id).encode())])
            assert writer.submit(checkpoint_id, {}, 0.0, time.monotonic(),
                                 store.changes()) == ""
            handles.append(inbox.get(timeout=10).handle)
            writer.taken()
            if handles[-1].shared[0].path.endswith(".base") or time.monotonic() > deadline:
                break
    finally:
        writer.close()
    assert len(handles) > MAX_DELTAS + 1 and handles[-1].shared[0].path.endswith(".base")
    assert len(handles[-1].shared) <= MAX_DELTAS
    fresh = stores()
    fresh.apply(chain_entries(storage, "job", SUBTASK, handles[-1].shared))
    assert sorted(fresh.scan(b"V")) == sorted(store.scan(b"V"))
