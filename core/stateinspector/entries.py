"""One subtask's keyed state as entries in key order, whichever backend wrote it.

The embedded backend (``rocksdb``): the snapshot's chain of shared files, each checked
against its handle, merged as one sorted state (``changelog.merged``: newest file wins,
deletions dropped), the very entries a restore's ``KeyedStore.apply`` leaves, read as
streams. The heap backend: the snapshot's JSON (read whole, as its restore reads it),
its entries encoded as the embedded backend keeps them (``V`` + key for a value per key,
``W`` + end + start + key for an open window), so both compare and sort alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from clusterdeck.core.checkpointing.changelog import check, merged, read_entries
from clusterdeck.core.checkpointing.storage import read_checked
from clusterdeck.core.engine.keyedstate import decoded, encoded
from clusterdeck.core.engine.records import from_tagged
from clusterdeck.core.stateinspector.snapshots import Snapshot
from clusterdeck.core.streaming.statebackend import values, windows

_WINDOW_KEY = 1 + 16  # W, end, start


@dataclass(frozen=True)
class Entry:
    """One key's state: its bytes as the store keeps them, decoded on demand."""

    subtask: str
    raw_key: bytes
    raw_value: bytes

    @property
    def size(self) -> int:
        return len(self.raw_key) + len(self.raw_value)

    @cached_property
    def key(self) -> Any:
        """The user's key; of an open window ``[key, start, end]``."""
        raw = self.raw_key
        if raw.startswith(windows.PREFIX):
            return [decoded(raw[_WINDOW_KEY:]), windows.unordered(raw[9:_WINDOW_KEY]),
                    windows.unordered(raw[1:9])]
        return decoded(raw[len(values.PREFIX):])

    @cached_property
    def value(self) -> Any:
        return decoded(self.raw_value)


def subtask_entries(snapshot: Snapshot, subtask_id: str) -> Iterator[Entry]:
    """The subtask's keyed state, by key; nothing for a subtask that keeps none."""
    return keyed_state(snapshot, subtask_id) or iter(())


def keyed_state(snapshot: Snapshot, subtask_id: str) -> Iterator[Entry] | None:
    """The subtask's keyed state, by key; None when its chain has no keyed operator (a
    source's, a sink's). A heap snapshot is read here, a chain's files as they go."""
    handle = snapshot.states[subtask_id]
    if handle.shared:
        return _stored_entries(snapshot, subtask_id)
    chain = json.loads(read_checked(snapshot.state_file(handle), handle)).get("chain") or {}
    if all(chain.get(part) is None for part in ("running", "values", "windows")):
        return None
    return iter(sorted(_heap_entries(subtask_id, chain), key=lambda entry: entry.raw_key))


def _stored_entries(snapshot: Snapshot, subtask_id: str) -> Iterator[Entry]:
    files = snapshot.states[subtask_id].shared
    paths = [snapshot.shared_file(subtask_id, file) for file in files]
    for path, file in zip(paths, files, strict=True):
        check(path, file)
    for raw_key, raw_value in merged([read_entries(path) for path in paths]):
        yield Entry(subtask_id, raw_key, raw_value)


def _heap_entries(subtask_id: str, chain: dict[str, Any]) -> Iterator[Entry]:
    for part in ("running", "values"):
        if isinstance(chain.get(part), list):
            for key, value in chain[part]:
                yield Entry(subtask_id, values.PREFIX + encoded(from_tagged(key)),
                            encoded(from_tagged(value)))
    for key, (start, end), aggregate in (chain.get("windows") or {}).get("open", ()):
        yield Entry(subtask_id, windows.PREFIX + windows.ordered(float(end))
                    + windows.ordered(float(start)) + encoded(from_tagged(key)),
                    encoded(from_tagged(aggregate)))
