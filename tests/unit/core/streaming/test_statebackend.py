"""The embedded state backend: windows and values in RocksDB behave as the heap's, the
change log holds exactly what changed since the last snapshot, and a store restored from
that log holds the same state."""

from __future__ import annotations

import math
import operator
import random

import pytest

from clusterdeck.core.engine.keyedstate import decoded, encoded
from clusterdeck.core.streaming.eventtime import TumblingWindows
from clusterdeck.core.streaming.statebackend import (
    HeapValues,
    KeyedStore,
    StateBackendOptions,
    StoredValues,
    StoredWindows,
)
from clusterdeck.core.streaming.statebackend.windows import ordered, unordered
from clusterdeck.core.streaming.windowstate import KeyedWindows


@pytest.fixture
def store(tmp_path):
    opened = KeyedStore(1024 * 1024, tmp_path / "state")
    yield opened
    opened.close()


def no_limit(_open: int) -> None:
    pass


def test_floats_keep_their_order_as_bytes():
    numbers = [-math.inf, -1e300, -2.5, -0.001, 0.0, 0.001, 1.0, 2.5, 1e300, math.inf]
    assert sorted(numbers, key=ordered) == numbers
    assert [unordered(ordered(number)) for number in numbers] == numbers


def test_stored_windows_fire_what_the_heap_windows_fire_in_the_same_order(store):
    heap = KeyedWindows(TumblingWindows(10.0), operator.add)
    stored = StoredWindows(store, operator.add, encoded, decoded)
    rng = random.Random(3)
    for round_ in range(5):
        batch = [((rng.choice(["a", ("t", 1), 7, b"x"]), (start, start + 10.0)), 1)
                 for start in (round_ * 10.0, round_ * 10.0 + 10.0) for _ in range(20)]
        heap.merge_many(batch, no_limit)
        stored.merge_many(batch, no_limit)
        assert stored.open_windows == heap.open_windows
        watermark = round_ * 10.0 + 5
        assert stored.fire(watermark) == heap.fire(watermark)
    assert stored.fire(math.inf) == heap.fire(math.inf)
    assert stored.open_windows == 0 and store.count(b"") == 0


def test_a_batch_past_the_limit_changes_nothing(store):
    stored = StoredWindows(store, operator.add, encoded, decoded)
    stored.merge_many([(("a", (0.0, 10.0)), 1)], no_limit)

    def refuse(open_windows: int) -> None:
        raise RuntimeError(f"{open_windows} open")
    with pytest.raises(RuntimeError, match="3 open"):
        stored.merge_many([(("a", (0.0, 10.0)), 1), (("b", (0.0, 10.0)), 1),
                           (("c", (0.0, 10.0)), 1)], refuse)
    assert stored.fire(math.inf) == [("a", (0.0, 10.0), 1)]


def test_the_change_log_holds_each_key_written_or_deleted_since_the_last_snapshot(store):
    values = StoredValues(store, encoded, decoded)
    values.put_many([("a", 1), ("b", 2)], [None, None])
    first = store.changes()
    assert {decoded(key[1:]): decoded(value) for key, value in first.items()} == \
        {"a": 1, "b": 2}
    values.put_many([("a", None), ("b", 3), ("c", None)], values.get_many(["a", "b", "c"]))
    second = store.changes()
    assert {decoded(key[1:]): value and decoded(value) for key, value in second.items()} == \
        {"a": None, "b": 3}  # forgetting a key that had no value is no change
    assert store.changes() == {} and len(values) == 1


def test_a_store_restored_from_its_change_logs_holds_the_same_state(tmp_path, store):
    values = StoredValues(store, encoded, decoded)
    logs = []
    for step in range(4):
        keys = [f"k{index}" for index in range(step, 300, 3)]
        values.put_many([(key, step) for key in keys], values.get_many(keys))
        gone = [f"k{index}" for index in range(step, 300, 7)]
        values.put_many([(key, None) for key in gone], values.get_many(gone))
        logs.append(store.changes())
    restored = KeyedStore(1024 * 1024, tmp_path / "restored")
    try:
        for log in logs:
            restored.apply(log.items())
        again = StoredValues(restored, encoded, decoded)
        again.recount()
        assert sorted(again.entries()) == sorted(values.entries()) and len(again) == len(values)
    finally:
        restored.close()


def test_a_snapshot_not_taken_puts_its_changes_back_under_newer_ones(store):
    store.write([(b"a", b"1"), (b"b", b"1")])
    taken = store.changes()
    store.write([(b"b", b"2")])
    store.unchanged(taken)
    assert store.changes() == {b"a": b"1", b"b": b"2"}


def test_heap_values_and_stored_values_answer_alike(store):
    heap, stored = HeapValues(), StoredValues(store, encoded, decoded)
    for values in (heap, stored):
        values.load([(("t", 1), {"x": [1, 2]}), ("s", b"bytes")])
        values.put_many([("s", None), ("n", 5)], values.get_many(["s", "n"]))
    assert sorted(map(repr, heap.entries())) == sorted(map(repr, stored.entries()))
    assert len(heap) == len(stored) == 2


def test_a_memory_budget_below_what_rocksdb_needs_is_refused():
    with pytest.raises(ValueError, match="below"):
        StateBackendOptions(memory=1000)
