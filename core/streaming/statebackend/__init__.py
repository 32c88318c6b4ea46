"""Where a streaming subtask keeps its keyed state (Flink's state backends): ``heap``, in
the task's memory, checkpointed whole as JSON; or ``rocksdb``, an embedded RocksDB per
subtask on the TaskManager's disk, within a memory budget, checkpointed incrementally
(only what changed since the last checkpoint; core/checkpointing/changelog.py writes it).
docs/streaming.md, "State backends", says why RocksDB and what it costs."""

from clusterdeck.core.streaming.statebackend.options import StateBackend, StateBackendOptions
from clusterdeck.core.streaming.statebackend.store import Changes, KeyedStore
from clusterdeck.core.streaming.statebackend.values import HeapValues, StoredValues
from clusterdeck.core.streaming.statebackend.windows import StoredWindows

__all__ = [
    "Changes",
    "HeapValues",
    "KeyedStore",
    "StateBackend",
    "StateBackendOptions",
    "StoredValues",
    "StoredWindows",
]
