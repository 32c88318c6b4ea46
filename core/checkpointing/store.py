"""The completed checkpoints a job keeps: the latest ``retained``, newest last.

Adding one subsumes the oldest beyond the bound (Flink's ``CompletedCheckpointStore``):
they are handed back so the owner deletes their state, never one a restore could still
need (the newest is always kept). The shared files of incremental checkpoints (the
embedded state backend's bases and deltas, which several checkpoints name) are counted in
a ``SharedStateRegistry`` (Flink's): a file goes only when no retained checkpoint names
it. Rebuilt from what is on disk after a JobManager failover, it counts the same. Pure:
the files are ``storage.py``'s.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable

from clusterdeck.core.checkpointing.checkpoints import CompletedCheckpoint


class SharedStateRegistry:
    """How many retained checkpoints name each shared file."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def register(self, checkpoint: CompletedCheckpoint) -> None:
        self._counts.update(shared_files(checkpoint))

    def unregister(self, checkpoint: CompletedCheckpoint) -> list[str]:
        """The files no retained checkpoint names any more, once ``checkpoint`` is not."""
        unused = []
        for path in shared_files(checkpoint):
            self._counts[path] -= 1
            if self._counts[path] <= 0:
                del self._counts[path]
                unused.append(path)
        return sorted(unused)

    def referenced(self) -> frozenset[str]:
        return frozenset(self._counts)

    def count(self, path: str) -> int:
        return self._counts[path]


def shared_files(checkpoint: CompletedCheckpoint) -> set[str]:
    """Each shared file the checkpoint names, once (two subtasks never share one)."""
    return {file.path for handle in checkpoint.states.values() for file in handle.shared}


class CompletedCheckpointStore:
    def __init__(self, retained: int, recovered: Iterable[CompletedCheckpoint] = ()) -> None:
        """``recovered``: what a JobManager found on disk after a failover, any order."""
        if retained < 1:
            raise ValueError("at least one completed checkpoint must be retained")
        self.retained = retained
        self.shared = SharedStateRegistry()
        self._kept: deque[CompletedCheckpoint] = deque()
        for checkpoint in sorted(recovered, key=lambda c: c.checkpoint_id):
            self._kept.append(checkpoint)
            self.shared.register(checkpoint)
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
        self.shared.register(checkpoint)
        return self._trim()

    def latest(self) -> CompletedCheckpoint | None:
        return self._kept[-1] if self._kept else None

    def all(self) -> tuple[CompletedCheckpoint, ...]:
        return tuple(self._kept)

    def referenced(self) -> tuple[str, ...]:
        """Every snapshot a kept checkpoint names (one may name an older one's), and
        every shared file."""
        return tuple(sorted({handle.path for checkpoint in self._kept
                             for handle in checkpoint.states.values()}
                            | self.shared.referenced()))

    def _trim(self) -> list[CompletedCheckpoint]:
        subsumed = []
        while len(self._kept) > self.retained:
            subsumed.append(self._kept.popleft())
            self.shared.unregister(subsumed[-1])
        return subsumed
