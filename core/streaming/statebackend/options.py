"""Which state backend a streaming subtask uses, and its memory budget: the cluster's
``state.backend`` and ``state.backend.memory`` settings, as the TaskManager hands them
to each streaming task."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

DEFAULT_MEMORY = 64 * 1024 * 1024
MIN_MEMORY = 256 * 1024
"""RocksDB needs a few memtable blocks and some cache to work at all."""


class StateBackend(StrEnum):
    HEAP = "heap"
    ROCKSDB = "rocksdb"


@dataclass(frozen=True)
class StateBackendOptions:
    """``memory``: bytes of RocksDB's block cache and memtables for one subtask (what its
    keyed state holds in memory at most; the rest is on disk); ``folder``: where the
    attempt's database goes. Unused by ``heap``."""

    backend: StateBackend = StateBackend.HEAP
    memory: int = DEFAULT_MEMORY
    folder: Path | None = None  # where the database goes (a temporary folder by default)

    def __post_init__(self) -> None:
        if self.memory < MIN_MEMORY:
            raise ValueError(f"a state backend's memory of {self.memory} bytes is below the "
                             f"{MIN_MEMORY} RocksDB needs")
