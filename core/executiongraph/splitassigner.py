"""The input split assigner: source subtasks pull their work one split at a time.

Pulling balances the load (a fast subtask simply asks more often) and keeps locality: a
requester gets a split stored on its own host when one is left. A split bound to hosts
(a file on one machine's own disk: ``hosts``) goes to a requester on one of them only,
never elsewhere to fail or read nothing; splits anyone reads (URLs, generated input) go
to anyone. What is left when a source's last subtask finishes says which host it needs
(``remaining``), so the job fails saying so rather than ends with part of its input.
The assigner remembers
which subtask holds which splits, so when an attempt fails its splits go back to the
pool and the restarted attempt (or a sibling) reads them again; after a JobManager
restart, the splits of subtasks restored as finished never return to it. Counters of handed-out
and returned splits let a test prove that every split was read exactly once by the
attempts that survived.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from clusterdeck.core.protocol.jobgraph import InputSplit


class InputSplitAssigner:
    """Pools of unassigned splits, one per source vertex; locality-aware, returnable."""

    def __init__(self, splits: Mapping[str, Sequence[InputSplit]] | None = None) -> None:
        self._pool: dict[str, list[InputSplit]] = {}
        self._held: dict[tuple[str, int], list[InputSplit]] = {}
        self._handed_out: dict[str, Counter[int]] = {}
        self._returned: dict[str, Counter[int]] = {}
        self._generated: dict[str, bool] = {}  # a collection's or range's parts
        for vertex_id, vertex_splits in (splits or {}).items():
            self.add_splits(vertex_id, vertex_splits)

    def add_splits(self, vertex_id: str, splits: Iterable[InputSplit]) -> None:
        """Put a source vertex's splits in its pool (the JobMaster enumerates them)."""
        pool = self._pool.setdefault(vertex_id, [])
        splits = list(splits)
        if vertex_id not in self._generated:  # a vertex's splits are all of one kind
            self._generated[vertex_id] = bool(splits) and not any(s.path for s in splits)
        pool.extend(splits)
        pool.sort(key=lambda split: split.split_id)
        self._handed_out.setdefault(vertex_id, Counter())
        self._returned.setdefault(vertex_id, Counter())

    def next_split(self, vertex_id: str, subtask: int, host: str | None) -> InputSplit | None:
        """The next split for subtask ``subtask`` running on ``host``, a local one first,
        then one anyone reads; None when the vertex has none left that ``host`` can read."""
        pool = self._pool.get(vertex_id)
        if not pool:
            return None
        index = _pick(pool, subtask, host)
        if index is None:
            return None
        split = pool.pop(index)
        self._held.setdefault((vertex_id, subtask), []).append(split)
        self._handed_out[vertex_id][split.split_id] += 1
        return split

    def own_part(self, vertex_id: str, subtask: int) -> tuple[InputSplit, ...] | None:
        """A generated source's subtask's whole input, handed out at once with its
        deployment (the subtask then asks for none): its own part if still in the pool,
        nothing if it was read already. None for a source of files, which pull theirs."""
        pool = self._pool.get(vertex_id)
        if pool is None or not self._generated.get(vertex_id, False):
            return None
        index = _pick(pool, subtask, None)
        if index is None:
            return ()
        split = pool.pop(index)
        self._held.setdefault((vertex_id, subtask), []).append(split)
        self._handed_out[vertex_id][split.split_id] += 1
        return (split,)

    def return_splits(self, vertex_id: str, subtask: int) -> list[InputSplit]:
        """Put back every split the subtask's current attempt took (it failed or is being
        recomputed); returns them."""
        splits = self._held.pop((vertex_id, subtask), [])
        if splits:
            self.add_splits(vertex_id, splits)
            self._returned[vertex_id].update(split.split_id for split in splits)
        return splits

    def restore_consumed(self, vertex_id: str, subtask: int,
                         split_ids: Iterable[int]) -> list[InputSplit]:
        """The subtask finished in an earlier JobManager run after reading these splits:
        take them out of the pool, held by it (they come back only if it must run
        again), and count them as handed out once. Raises ValueError, changing nothing,
        for an id that is not in the pool."""
        wanted = list(split_ids)
        if not wanted:
            return []
        pool = self._pool.get(vertex_id, [])
        by_id = {split.split_id: split for split in pool}
        missing = [split_id for split_id in wanted if split_id not in by_id]
        if missing:
            raise ValueError(f"splits {missing} of {vertex_id!r} are not in the pool")
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"splits {wanted} of {vertex_id!r} name a split twice")
        taken = [by_id[split_id] for split_id in wanted]
        self._pool[vertex_id] = [split for split in pool if split.split_id not in wanted]
        self._held.setdefault((vertex_id, subtask), []).extend(taken)
        self._handed_out[vertex_id].update(wanted)
        return taken

    def held_by(self, vertex_id: str, subtask: int) -> list[InputSplit]:
        return list(self._held.get((vertex_id, subtask), ()))

    def remaining(self, vertex_id: str) -> list[InputSplit]:
        return list(self._pool.get(vertex_id, ()))

    def handed_out(self, vertex_id: str) -> Counter[int]:
        """How often each split (by id) was handed out, over all attempts."""
        return Counter(self._handed_out.get(vertex_id, Counter()))

    def returned(self, vertex_id: str) -> Counter[int]:
        """How often each split (by id) came back from a failed attempt."""
        return Counter(self._returned.get(vertex_id, Counter()))

    def kept(self, vertex_id: str) -> Counter[int]:
        """Handed out minus returned: 1 for every split once a run has succeeded."""
        kept = self.handed_out(vertex_id)
        kept.subtract(self.returned(vertex_id))
        return kept


def _pick(pool: Sequence[InputSplit], subtask: int, host: str | None) -> int | None:
    """Where in ``pool`` the split for ``subtask`` on ``host`` is, if any. Generated
    input (a collection, a range: no path) is cut into one part per subtask, and each
    part is that subtask's: pulled by whoever asks first, the first subtasks to start
    would take every part, all of them when a job has more subtasks than slots."""
    for index, split in enumerate(pool):
        if not split.path and split.part == subtask:
            return index
    files = [(index, split) for index, split in enumerate(pool) if split.path]
    return next((i for i, split in files if host and host in split.hosts),
                next((i for i, split in files if not split.hosts), None))
