"""A JobMaster's slot requests to the ResourceManager: a bounded number out at once.

Every scheduled attempt needs a slot, but most of a large job's attempts go into slots the
job already holds (the scheduler reuses a finished attempt's slot and deploys ahead into
busy ones). Asking for one slot per attempt made a 2,000-subtask job send 2,000 requests
and withdraw nearly all of them again: 4,000 messages' worth of work on both sides. Here
at most ``limit`` requests are out; the others wait, oldest first, and are sent as those
out are answered. An attempt that got a held slot hands its request on to the oldest
waiting one instead of withdrawing it, as Flink's JobMaster declares how many slots it
needs rather than asking once per execution. Pure: the JobMaster sends what it is told.
"""

from __future__ import annotations

import uuid


class SlotRequestQueue:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._waiting: dict[str, None] = {}  # attempts not asked for yet, oldest first
        self._out: dict[str, str] = {}       # attempt -> allocation id at the ResourceManager
        self._owner: dict[str, str] = {}     # allocation id -> the attempt it stands for

    def add(self, attempt_id: str) -> list[str]:
        """An attempt needs a slot: the allocation ids to request now."""
        if attempt_id not in self._out:
            self._waiting[attempt_id] = None
        return self._fill()

    def answered(self, allocation_id: str) -> list[str]:
        """A slot was offered for the allocation: the allocation ids to request now."""
        attempt_id = self._owner.pop(allocation_id, None)
        if attempt_id is not None:
            del self._out[attempt_id]
        return self._fill()

    def again(self, allocation_id: str) -> list[str]:
        """A slot was offered for the allocation, but the job will not use it (its
        TaskManager was blocked since): the attempt it stood for waits again, first in
        line. The allocation ids to request now."""
        attempt_id = self._owner.pop(allocation_id, None)
        if attempt_id is not None:
            del self._out[attempt_id]
            self._waiting = {attempt_id: None, **self._waiting}
        return self._fill()

    def out_allocations(self) -> list[str]:
        """The allocation ids out at the ResourceManager, oldest first."""
        return list(self._owner)

    def withdraw(self, attempt_id: str) -> str | None:
        """The attempt got a slot the job held. Its request, if out, now stands for the
        oldest waiting attempt; with none waiting, its allocation id is returned, to be
        freed at the ResourceManager."""
        if self._waiting.pop(attempt_id, 0) is None:
            return None
        allocation_id = self._out.pop(attempt_id, None)
        if allocation_id is None:
            return None
        if self._waiting:
            heir = next(iter(self._waiting))
            del self._waiting[heir]
            self._out[heir] = allocation_id
            self._owner[allocation_id] = heir
            return None
        del self._owner[allocation_id]
        return allocation_id

    def clear(self) -> None:
        self._waiting.clear()
        self._out.clear()
        self._owner.clear()

    @property
    def out(self) -> int:
        return len(self._out)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _fill(self) -> list[str]:
        sent = []
        while self._waiting and len(self._out) < self.limit:
            attempt_id = next(iter(self._waiting))
            del self._waiting[attempt_id]
            allocation_id = f"{attempt_id}/{uuid.uuid4().hex[:8]}"
            self._out[attempt_id] = allocation_id
            self._owner[allocation_id] = attempt_id
            sent.append(allocation_id)
        return sent
