"""The completed checkpoints a job keeps: the latest ``retained``, newest last.

Adding one subsumes the oldest beyond the bound (Flink's ``CompletedCheckpointStore``):
they are handed back so the owner deletes their state, never one a restore could still
need (the newest is always kept). Pure: the files are ``storage.py``'s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from clusterdeck.core.checkpointing.checkpoints import CompletedCheckpoint


class CompletedCheckpointStore:
    def __init__(self, retained: int, recovered: Iterable[CompletedCheckpoint] = ()) -> None:
        """``recovered``: what a JobManager found on disk after a failover, any order."""
        if retained < 1:
            raise ValueError("at least one completed checkpoint must be retained")
        self.retained = retained
        self._kept: deque[CompletedCheckpoint] = deque()
        for checkpoint in sorted(recovered, key=lambda c: c.checkpoint_id):
            self._kept.append(checkpoint)
        self._surplus: list[CompletedCheckpoint] = self._trim()

    def recovered_surplus(self) -> list[CompletedCheckpoint]:
        """Recovered checkpoints beyond the bound, to be deleted (asked once)."""
        surplus, self._surplus = self._surplus, []
        return surplus

    def add(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        """Keep ``checkpoint``; returns the checkpoints it subsumed, oldest first."""
        latest = self.latest()
        if latest is not None and checkpoint.checkpoint_id <= latest.checkpoint_id:
            raise ValueError(f"checkpoint {checkpoint.checkpoint_id} is not newer than "
                             f"{latest.checkpoint_id}")
        self._kept.append(checkpoint)
        return self._trim()

    def latest(self) -> CompletedCheckpoint | None:
        return self._kept[-1] if self._kept else None

    def all(self) -> tuple[CompletedCheckpoint, ...]:
        return tuple(self._kept)

    def referenced(self) -> tuple[str, ...]:
        """Every snapshot a kept checkpoint names (one may name an older one's)."""
        return tuple(sorted({handle.path for checkpoint in self._kept
                             for handle in checkpoint.states.values()}))

    def _trim(self) -> list[CompletedCheckpoint]:
        subsumed = []
        while len(self._kept) > self.retained:
            subsumed.append(self._kept.popleft())
        return subsumed
