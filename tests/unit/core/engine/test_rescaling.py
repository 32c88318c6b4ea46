"""Rescaling a subtask's state: keyed state split by key group and merged from several old
subtasks on both backends (every key where its group's owner is, once, with its value),
the rate source's indices shared out anew exactly once, the file sink numbering on."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdeck.core.engine.keyedstate import decoded, encoded, key_group_of_key
from clusterdeck.core.engine.records import from_tagged, to_tagged
from clusterdeck.core.engine.rescaling import OldPart, Rescaled, counted
from clusterdeck.core.protocol.keygroups import subtask_of_group
from clusterdeck.core.streaming.filesink import next_free_file
from clusterdeck.core.streaming.ratesource import RatePosition, RateSource, rescaled_positions
from clusterdeck.core.streaming.statebackend import (
    HeapValues,
    KeyedStore,
    StoredValues,
    StoredWindows,
    stored_counts,
)

MAX = 128
KEYS = [f"key-{i}" for i in range(300)] + [("user", i) for i in range(50)] + [7, None]


def owner(key, parallelism: int) -> int:
    return subtask_of_group(key_group_of_key(key, MAX), MAX, parallelism)


def heap_parts(parallelism: int) -> list[OldPart]:
    """Each old subtask's heap snapshot of a value per key: the keys its groups hold."""
    parts = []
    for subtask in range(parallelism):
        values = HeapValues()
        mine = [key for key in KEYS if owner(key, parallelism) == subtask]
        values.put_many(((key, f"value of {key}") for key in mine), [None] * len(mine))
        running = [[to_tagged(key), to_tagged(value)] for key, value in values.entries()]
        parts.append(OldPart(subtask, {"chain": {"largest_timestamp": float(subtask),
                                                 "windows": None, "running": running,
                                                 "values": None}}, lambda: ()))
    return parts


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1), (1, 4), (4, 2)])
def test_heap_values_split_and_merge_by_key_group(before, after):
    found: dict = {}
    for subtask in range(after):
        chain = Rescaled(heap_parts(before), subtask, after, MAX).chain()
        assert chain["largest_timestamp"] == before - 1
        for tagged_key, tagged_value in chain["running"]:
            key, value = from_tagged(tagged_key), from_tagged(tagged_value)
            assert owner(key, after) == subtask
            assert key not in found
            found[key] = value
    assert found == {key: f"value of {key}" for key in KEYS}


def stored_parts(tmp_path, parallelism: int) -> list[OldPart]:
    """Each old subtask's rocksdb state (values and windows), its entries as its chain
    would give them back."""
    parts = []
    for subtask in range(parallelism):
        store = KeyedStore(256 * 1024, tmp_path / f"old-{parallelism}-{subtask}")
        mine = [key for key in KEYS if owner(key, parallelism) == subtask]
        values = StoredValues(store, encoded, decoded)
        values.put_many(((key, len(str(key))) for key in mine), [None] * len(mine))
        windows = StoredWindows(store, lambda a, b: a + b, encoded, decoded)
        windows.merge_many([((key, (0.0, 1.0)), 1) for key in mine], lambda _: None)
        entries = list(store.scan(b""))
        store.close()
        parts.append(OldPart(subtask, {"chain": {
            "largest_timestamp": None,
            "windows": {"fired_to": 0.5, "ended": False, "late": 2, "stored": len(mine)},
            "running": {"stored": len(mine)}, "values": None}},
            lambda entries=entries: entries))
    return parts


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1)])
def test_stored_windows_and_values_split_and_merge_by_key_group(tmp_path, before, after):
    parts = stored_parts(tmp_path, before)
    seen: list = []
    for subtask in range(after):
        made = Rescaled(parts, subtask, after, MAX)
        store = KeyedStore(256 * 1024, tmp_path / f"new-{subtask}")
        store.write(made.stored_entries(decoded))
        assert len(store.changes()) == 2 * len(
            [key for key in KEYS if owner(key, after) == subtask])  # all in the next delta
        chain = counted(made.chain(), *stored_counts(store))
        mine = [key for key in KEYS if owner(key, after) == subtask]
        assert chain["windows"] == {"fired_to": 0.5, "ended": False,
                                    "late": 2 * before if subtask == 0 else 0,
                                    "stored": len(mine)}
        assert chain["running"] == {"stored": len(mine)}
        windows = StoredWindows(store, lambda a, b: a + b, encoded, decoded)
        windows.restore(chain["windows"])
        fired = windows.fire(math.inf)
        assert sorted(map(repr, (key for key, _, _ in fired))) == sorted(map(repr, mine))
        values = StoredValues(store, encoded, decoded)
        values.recount()
        assert dict(values.entries()) == {key: len(str(key)) for key in mine}
        seen += mine
        store.close()
    assert sorted(map(repr, seen)) == sorted(map(repr, KEYS))


def test_heap_windows_keep_the_earliest_firing_and_give_the_late_count_to_subtask_0():
    parts = [OldPart(index, {"chain": {"largest_timestamp": None, "running": None,
                                       "values": None,
                                       "windows": {"fired_to": fired, "ended": False,
                                                   "late": 1, "open": []}}}, lambda: ())
             for index, fired in enumerate((3.0, 2.0))]
    assert Rescaled(parts, 0, 1, MAX).chain()["windows"] == {
        "fired_to": 2.0, "ended": False, "late": 2, "open": []}


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.lists(st.integers(0, 40), min_size=5,
                                                      max_size=5), st.integers(0, 200))
def test_rescaled_rate_sources_emit_every_index_exactly_once(before, after, polls, count):
    emitted: list[int] = []
    old = []
    for subtask in range(before):
        source = RateSource(1e9, subtask, before, count)
        source.poll(0.0, 0)  # its clock starts: a second later, a billion are due
        emitted += source.poll(1.0, polls[subtask])
        old.append(source.position())
    for position in rescaled_positions(old, after, count):
        source = RateSource(1e9, position.next_index % after, after, count, position)
        source.poll(0.0, 0)
        for _ in range(count + 1):
            if source.exhausted:
                break
            emitted += source.poll(1.0, 7)
    assert sorted(emitted) == list(range(count))


def test_a_rate_position_names_what_it_emitted():
    position = RatePosition(10, (4,))
    assert position.emitted(2) and not position.emitted(4) and not position.emitted(10)


def test_a_rescaled_file_sink_numbers_on_after_any_file_of_its_number(tmp_path):
    assert next_free_file(tmp_path / "missing", 0) == 0
    for name in ("part-2-4", ".part-2-9.e1a0.pending-3", "part-12-40", "part-1-77"):
        (tmp_path / name).write_text("")
    assert next_free_file(tmp_path, 2) == 10
    assert next_free_file(tmp_path, 3) == 0
