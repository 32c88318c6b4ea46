"""The ResourceManager's slot pool: which slot of which TaskManager is allocated to which
job, and which requests wait. Pure state, owned by the ResourceManager's main thread.

The pool, not the TaskManagers' heartbeat reports, decides what is free: a report can be
a heartbeat old, and a slot must never be given out twice.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlotId:
    resource_id: str
    index: int


@dataclass(frozen=True)
class PendingRequest:
    job_id: str
    allocation_id: str
    jobmaster: str
    blocked: frozenset[str] = frozenset()  # TaskManagers whose slots it must not get


@dataclass(frozen=True)
class Allocation:
    slot: SlotId
    request: PendingRequest


class SlotPool:
    def __init__(self) -> None:
        self._slots: dict[str, int] = {}  # live TaskManager -> number of slots
        self._allocations: dict[str, Allocation] = {}  # allocation id -> allocation
        self._by_slot: dict[SlotId, str] = {}
        # Waiting requests by allocation id, oldest first: a JobMaster withdraws one (it
        # reused a slot it held) at no cost however many wait.
        self._pending: dict[str, PendingRequest] = {}
        self._busy_unknown: set[SlotId] = set()  # busy on the TaskManager, unknown here
        self._starting: set[str] = set()  # TaskManagers whose Spark is not up yet

    def add_taskmanager(self, resource_id: str, slots: int, busy: set[int] = frozenset(),
                        spark_ready: bool = True) -> None:
        """``busy``: slots the TaskManager reports as still running something (a task of
        before it was declared lost); they are not given out until it reports them free."""
        self._slots[resource_id] = slots
        self._busy_unknown |= {SlotId(resource_id, index) for index in busy}
        self._set_ready(resource_id, spark_ready)

    def report(self, resource_id: str, free: set[int], spark_ready: bool = True) -> bool:
        """A TaskManager's slot report; True if a slot became worth assigning: busy with
        unknown work before and free now, or on a TaskManager whose Spark is now up."""
        freed = {s for s in self._busy_unknown if s.resource_id == resource_id
                 and s.index in free}
        self._busy_unknown -= freed
        became_ready = spark_ready and resource_id in self._starting
        self._set_ready(resource_id, spark_ready)
        return bool(freed) or became_ready

    def remove_taskmanager(self, resource_id: str) -> list[Allocation]:
        """The TaskManager left the pool; returns the allocations lost with it."""
        self._slots.pop(resource_id, None)
        self._starting.discard(resource_id)
        self._busy_unknown = {s for s in self._busy_unknown if s.resource_id != resource_id}
        lost = [a for a in self._allocations.values() if a.slot.resource_id == resource_id]
        for allocation in lost:
            self._drop(allocation.request.allocation_id)
        return lost

    def request(self, request: PendingRequest) -> None:
        """A new request, or one waiting asked again with its job's blocklist changed:
        it takes the new blocklist and keeps its place."""
        if request.allocation_id not in self._allocations:
            self._pending[request.allocation_id] = request

    def free(self, allocation_id: str) -> None:
        """The allocation ends, or its request is withdrawn while it waits."""
        self._drop(allocation_id)
        self._pending.pop(allocation_id, None)

    def release_job(self, job_id: str) -> None:
        for allocation_id in [a for a, alloc in self._allocations.items()
                              if alloc.request.job_id == job_id]:
            self._drop(allocation_id)
        self._pending = {a: r for a, r in self._pending.items() if r.job_id != job_id}

    def assign(self) -> list[Allocation]:
        """Match waiting requests with free slots, oldest request first, never on a
        TaskManager the request's job blocked (such a request waits, the younger ones go
        on): on TaskManagers whose Spark is up before those still starting it (a task
        there would wait for the JVM), then spreading the work (the one with most free
        slots first)."""
        made: list[Allocation] = []
        free = {r: count for r in self._slots if (count := self.free_count(r)) > 0}
        for request in list(self._pending.values()):
            if not free:
                break
            slot = self._a_free_slot(free, request.blocked)
            if slot is None:
                continue
            del self._pending[request.allocation_id]
            allocation = Allocation(slot, request)
            self._allocations[request.allocation_id] = allocation
            self._by_slot[slot] = request.allocation_id
            made.append(allocation)
            free[slot.resource_id] -= 1
            if not free[slot.resource_id]:
                del free[slot.resource_id]
        return made

    def free_count(self, resource_id: str) -> int:
        total = self._slots.get(resource_id, 0)
        taken = {s for s in self._by_slot if s.resource_id == resource_id}
        taken |= {s for s in self._busy_unknown if s.resource_id == resource_id}
        return total - len(taken)

    def allocation_of(self, slot: SlotId) -> Allocation | None:
        allocation_id = self._by_slot.get(slot)
        return self._allocations.get(allocation_id) if allocation_id else None

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _a_free_slot(self, free: dict[str, int], blocked: frozenset[str]) -> SlotId | None:
        """``free``: free slots per TaskManager with any."""
        candidates = [(count, r) for r, count in free.items() if r not in blocked]
        if not candidates:
            return None
        _, resource_id = max(candidates, key=lambda c: (c[1] not in self._starting, c[0],
                                                        c[1]))
        index = next(i for i in range(self._slots[resource_id])
                     if SlotId(resource_id, i) not in self._by_slot
                     and SlotId(resource_id, i) not in self._busy_unknown)
        return SlotId(resource_id, index)

    def _set_ready(self, resource_id: str, spark_ready: bool) -> None:
        if spark_ready:
            self._starting.discard(resource_id)
        else:
            self._starting.add(resource_id)

    def _drop(self, allocation_id: str) -> None:
        allocation = self._allocations.pop(allocation_id, None)
        if allocation is not None:
            self._by_slot.pop(allocation.slot, None)
