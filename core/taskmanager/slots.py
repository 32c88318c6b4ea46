"""The TaskExecutor's slot table: which slot runs what. Pure state."""

from __future__ import annotations

from clusterdeck.core.protocol import messages as p


class SlotTable:
    """Owned by the TaskExecutor's main thread."""

    def __init__(self, slots: int) -> None:
        self._slots: list[p.SlotStatus] = [p.SlotStatus(index) for index in range(slots)]

    def __len__(self) -> int:
        return len(self._slots)

    def allocate(self, index: int, allocation_id: str, job_id: str) -> None:
        current = self._slots[index]
        if current.allocation_id not in (None, allocation_id):
            raise ValueError(f"slot {index} is taken by allocation {current.allocation_id}")
        self._slots[index] = p.SlotStatus(index, allocation_id, job_id)

    def free(self, index: int) -> None:
        self._slots[index] = p.SlotStatus(index)

    def free_slot(self) -> int | None:
        return next((s.index for s in self._slots if s.allocation_id is None), None)

    def report(self, spark_ready: bool = True) -> p.SlotReport:
        return p.SlotReport(tuple(self._slots), spark_ready)
