"""The inspector's questions, each answered in one pass over the entries: memory bounded
by a page (``limit``) or by ``n`` biggest keys, never by the state's size."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.stateinspector.entries import Entry, keyed_state, subtask_entries
from clusterdeck.core.stateinspector.snapshots import (
    InspectorError,
    Snapshot,
    open_checkpoint,
    retained_checkpoints,
)

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


@dataclass(frozen=True)
class SubtaskSize:
    subtask: str
    keys: int
    bytes: int

    @property
    def vertex(self) -> str:
        return self.subtask.rpartition("#")[0]


@dataclass(frozen=True)
class KeyPage:
    """``entries``: the page asked for; ``matched``: how many keys match in all."""

    entries: list[Entry]
    matched: int


@dataclass(frozen=True)
class Change:
    kind: str  # ADDED, REMOVED or CHANGED
    before: Entry | None
    after: Entry | None

    @property
    def entry(self) -> Entry:
        entry = self.after or self.before
        assert entry is not None
        return entry


@dataclass(frozen=True)
class DiffPage:
    changes: list[Change]
    counts: dict[str, int]  # by kind, over the whole difference


def sizes(snapshot: Snapshot) -> list[SubtaskSize]:
    """Keys and bytes of every subtask that keeps keyed state, by subtask id."""
    found = ((subtask, keyed_state(snapshot, subtask)) for subtask in _ordered(snapshot.states))
    return [SubtaskSize(subtask, *_count(entries)) for subtask, entries in found
            if entries is not None]


def keys(snapshot: Snapshot, vertex: str, offset: int = 0, limit: int = 50,
         search: str = "", prefix: str = "") -> KeyPage:
    """The vertex's keys (subtask by subtask, each by key) whose text contains ``search``
    and starts with ``prefix``, from the ``offset``-th match on, ``limit`` of them."""
    matching = (entry for entry in vertex_entries(snapshot, vertex)
                if (not search and not prefix) or _matches(key_text(entry.key), search, prefix))
    page: list[Entry] = []
    matched = 0
    for entry in matching:
        if offset <= matched < offset + limit:
            page.append(entry)
        matched += 1
    return KeyPage(page, matched)


def top(snapshot: Snapshot, vertex: str, n: int = 20) -> list[Entry]:
    """The vertex's ``n`` biggest keys (key and value bytes), biggest first."""
    return heapq.nlargest(n, vertex_entries(snapshot, vertex), key=lambda entry: entry.size)


def growth(storage: CheckpointStorage, job_id: str) -> list[tuple[int, dict[str, SubtaskSize]]]:
    """Per retained checkpoint, oldest first, each vertex's keys and bytes (summed over
    its subtasks, under the vertex's id)."""
    rows = []
    for checkpoint in retained_checkpoints(storage, job_id):
        snapshot = open_checkpoint(storage, job_id, checkpoint.checkpoint_id)
        by_vertex: dict[str, SubtaskSize] = {}
        for size in sizes(snapshot):
            was = by_vertex.get(size.vertex, SubtaskSize(size.vertex, 0, 0))
            by_vertex[size.vertex] = SubtaskSize(size.vertex, was.keys + size.keys,
                                                 was.bytes + size.bytes)
        rows.append((checkpoint.checkpoint_id, by_vertex))
    return rows


def diff(before: Snapshot, after: Snapshot, vertex: str = "", offset: int = 0,
         limit: int = 50) -> DiffPage:
    """Keys added, removed and changed from ``before`` to ``after`` (of one vertex, or of
    all), subtask by subtask in key order; the page from ``offset`` and the counts."""
    counts = {ADDED: 0, REMOVED: 0, CHANGED: 0}
    page: list[Change] = []
    for index, change in enumerate(_changes(before, after, vertex)):
        counts[change.kind] += 1
        if offset <= index < offset + limit:
            page.append(change)
    return DiffPage(page, counts)


def vertex_entries(snapshot: Snapshot, vertex: str) -> Iterator[Entry]:
    for subtask in _subtasks(snapshot, vertex):
        yield from subtask_entries(snapshot, subtask)


def key_text(key: Any) -> str:
    """What a search matches: a text key as it is, any other as its repr."""
    return key if isinstance(key, str) else repr(key)


def _matches(text: str, search: str, prefix: str) -> bool:
    return text.startswith(prefix) and search in text


def _count(entries: Iterator[Entry]) -> tuple[int, int]:
    count = size = 0
    for entry in entries:
        count += 1
        size += entry.size
    return count, size


def _subtasks(snapshot: Snapshot, vertex: str) -> list[str]:
    subtasks = [subtask for subtask in snapshot.states if subtask.rpartition("#")[0] == vertex]
    if not subtasks:
        raise InspectorError(f"{snapshot.label} holds no state of vertex {vertex!r}; its "
                             f"vertices: {', '.join(snapshot.vertices())}")
    return _ordered(subtasks)


def _ordered(subtasks: Any) -> list[str]:
    """By vertex, then subtask index as a number (#10 after #9)."""
    def index(subtask: str) -> tuple[str, int]:
        vertex, _, number = subtask.rpartition("#")
        return vertex, int(number) if number.isdigit() else -1
    return sorted(subtasks, key=index)


def _changes(before: Snapshot, after: Snapshot, vertex: str) -> Iterator[Change]:
    subtasks = set(before.states) | set(after.states)
    if vertex:
        subtasks = {subtask for subtask in subtasks if subtask.rpartition("#")[0] == vertex}
        if not subtasks:
            raise InspectorError(f"neither {before.label} nor {after.label} holds state of "
                                 f"vertex {vertex!r}")
    for subtask in _ordered(subtasks):
        old = subtask_entries(before, subtask) if subtask in before.states else iter(())
        new = subtask_entries(after, subtask) if subtask in after.states else iter(())
        yield from _merge(old, new)


def _merge(old: Iterator[Entry], new: Iterator[Entry]) -> Iterator[Change]:
    """Two key-ordered streams of one subtask as their differences, in key order."""
    a, b = next(old, None), next(new, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a.raw_key < b.raw_key):
            assert a is not None
            yield Change(REMOVED, a, None)
            a = next(old, None)
        elif a is None or b.raw_key < a.raw_key:
            yield Change(ADDED, None, b)
            b = next(new, None)
        else:
            if a.raw_value != b.raw_value:
                yield Change(CHANGED, a, b)
            a, b = next(old, None), next(new, None)
