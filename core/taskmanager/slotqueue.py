"""Each slot's holder and the tasks deployed ahead behind it.

The JobMaster deploys a slot's next task before the one running there ends, so that the
slot's thread starts it the moment the slot frees (slotworkers.py). The holder is the
task that runs in the slot now; the queue holds those deployed ahead, in order. A task
cancelled or failed while it waits ends at once, as it was told, without waiting for the
holder.

Main thread of the TaskExecutor only: no locks.
"""

from __future__ import annotations

import collections

from clusterdeck.core.taskmanager.slots import SlotTable
from clusterdeck.core.taskmanager.slotworkers import SlotWorker
from clusterdeck.core.taskmanager.tasks import Task


class SlotQueue:
    def __init__(self, slots: SlotTable) -> None:
        self._slots = slots
        self._holders: dict[int, Task] = {}  # the task running in each slot
        self._queued: dict[int, collections.deque[Task]] = {}  # deployed ahead, per slot
        self._workers: dict[int, SlotWorker] = {}  # the thread of each slot

    def is_held(self, slot_index: int) -> bool:
        return slot_index in self._holders

    def deploy_ahead(self, task: Task) -> None:
        """Queue ``task`` behind its slot's holder; its slot's thread starts it then."""
        index = task.deployment.slot_index
        self._queued.setdefault(index, collections.deque()).append(task)
        task.start(self._worker(index))

    def hold(self, task: Task) -> None:
        """``task`` now holds its slot: it starts there, unless it was deployed ahead and
        so handed to the slot's thread already."""
        index = task.deployment.slot_index
        self._holders[index] = task
        if not task.handed:
            task.start(self._worker(index))

    def release(self, task: Task) -> Task | None:
        """``task`` ended: if it held its slot, the next deployed ahead holds it now (it is
        returned, for the caller to begin), or the slot is free."""
        index = task.deployment.slot_index
        if self._holders.get(index) is not task:
            return None
        del self._holders[index]
        queue = self._queued.get(index)
        following = queue.popleft() if queue else None
        if following is None:
            self._slots.free(index)
        return following

    def end_if_queued(self, task: Task) -> None:
        """A task cancelled or failed while it waits behind its slot's holder ends now, as
        it was told, unless the slot's thread has already begun it (it then ends as soon
        as it sees the cancel; it starts no Spark work)."""
        queue = self._queued.get(task.deployment.slot_index)
        if queue is not None and task in queue:
            queue.remove(task)
            if task.claim():
                task.end_unstarted()

    def stop(self) -> None:
        """The slots' threads end once their current task has."""
        for worker in self._workers.values():
            worker.stop()

    def _worker(self, slot_index: int) -> SlotWorker:
        worker = self._workers.get(slot_index)
        if worker is None:
            worker = self._workers[slot_index] = SlotWorker(slot_index)
        return worker
