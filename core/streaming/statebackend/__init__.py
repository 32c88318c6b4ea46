"""Where a streaming subtask keeps its keyed state (Flink's state backends): ``heap``, in
the task's memory, checkpointed whole as JSON; or ``rocksdb``, an embedded RocksDB per
subtask on the TaskManager's disk, within a memory budget, checkpointed incrementally
(only what changed since the last checkpoint; core/checkpointing/changelog.py writes it).
docs/streaming.md, "State backends", says why RocksDB and what it costs."""

from clusterdeck.core.streaming.statebackend import values, windows
from clusterdeck.core.streaming.statebackend.options import StateBackend, StateBackendOptions
from clusterdeck.core.streaming.statebackend.store import Changes, KeyedStore
from clusterdeck.core.streaming.statebackend.values import HeapValues, StoredValues
from clusterdeck.core.streaming.statebackend.windows import StoredWindows, window_key


def stored_key(entry: bytes) -> bytes:
    """The encoded key of any entry of a store (a window's or a value's): what a rescaled
    restore reads an entry's key group from (core/engine/rescaling.py)."""
    if entry.startswith(windows.PREFIX):
        return window_key(entry)
    if entry.startswith(values.PREFIX):
        return entry[len(values.PREFIX):]
    raise ValueError(f"a keyed state entry of no known kind: {entry[:20]!r}")


def stored_counts(store: KeyedStore) -> tuple[int, int]:
    """Open windows and values in ``store``."""
    return store.count(windows.PREFIX), store.count(values.PREFIX)


__all__ = [
    "Changes",
    "HeapValues",
    "KeyedStore",
    "StateBackend",
    "StateBackendOptions",
    "StoredValues",
    "StoredWindows",
    "stored_counts",
    "stored_key",
]
