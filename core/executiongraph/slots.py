"""The scheduler's slot book: which attempt holds which slot, which attempts wait for one,
and which are deployed ahead, queued behind a slot's holder.

Pure bookkeeping for the ``Scheduler`` (events in, instructions out), which alone calls it,
on the JobMaster's main thread. It decides nothing about states: an attempt that was
cancelled or replaced while it waited is dropped here when its turn comes, not searched for
when it changes.
"""

from __future__ import annotations

from collections import deque

from clusterdeck.core.executiongraph.execution import Execution, SlotRef
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.protocol.states import ExecutionState


class SlotBook:
    """The slots one job's attempts hold, the attempts waiting for a slot, and the attempts
    deployed ahead behind a slot's holder (started by its TaskManager as the ones before
    end, so the slot does not wait a round trip to the JobMaster between two tasks)."""

    def __init__(self, graph: ExecutionGraph) -> None:
        self._graph = graph
        self._waiting: deque[Execution] = deque()
        self._holders: dict[SlotRef, Execution] = {}
        self._queued: dict[SlotRef, deque[Execution]] = {}  # never an empty deque

    def wait_for_slot(self, execution: Execution) -> None:
        self._waiting.append(execution)

    def next_waiting(self) -> Execution | None:
        """The oldest scheduled attempt still waiting; cancelled or replaced ones are
        dropped from the queue here rather than searched for when they change."""
        while self._waiting:
            execution = self._waiting.popleft()
            if execution.state is ExecutionState.SCHEDULED and self._graph.is_current(execution):
                return execution
        return None

    def still_waiting(self) -> list[Execution]:
        """The current scheduled attempts in the queue that hold no slot yet."""
        return [e for e in self._waiting if e.state is ExecutionState.SCHEDULED
                and e.slot is None and self._graph.is_current(e)]

    def holder(self, slot: SlotRef) -> Execution | None:
        return self._holders.get(slot)

    def hold(self, slot: SlotRef, execution: Execution) -> None:
        self._holders[slot] = execution

    def held(self) -> list[tuple[SlotRef, Execution]]:
        return list(self._holders.items())

    def queue_behind(self, slot: SlotRef) -> deque[Execution]:
        """The attempts queued behind the slot's holder: the book's own queue, or a new
        empty one that ``keep_queue`` stores once it has attempts."""
        return self._queued.get(slot) or deque()

    def keep_queue(self, slot: SlotRef, queue: deque[Execution]) -> None:
        if queue:
            self._queued[slot] = queue

    def unhold(self, execution: Execution) -> SlotRef | None:
        """The slot the attempt held, now free; None if it held none, or if the attempt
        queued behind it takes it over (its TaskManager starts that one now)."""
        slot = execution.slot
        queue = self._queued.get(slot) if slot is not None else None
        if queue is not None and execution in queue:
            queue.remove(execution)  # it ended before its turn (cancelled, refused)
            self._drop_if_empty(slot)
            return None
        if slot is None or self._holders.get(slot) is not execution:
            return None
        if queue:
            self._holders[slot] = queue.popleft()
            self._drop_if_empty(slot)
            return None
        del self._holders[slot]
        return slot

    def take_lost(self, taskmanager_id: str) -> list[Execution]:
        """Forget the slots of a lost TaskManager: their holders, then the attempts queued
        behind them."""
        lost = [self._holders.pop(s) for s in list(self._holders)
                if s.taskmanager_id == taskmanager_id]
        lost += [queued for s in list(self._queued) if s.taskmanager_id == taskmanager_id
                 for queued in self._queued.pop(s)]
        return lost

    def _drop_if_empty(self, slot: SlotRef) -> None:
        if not self._queued.get(slot):
            self._queued.pop(slot, None)
