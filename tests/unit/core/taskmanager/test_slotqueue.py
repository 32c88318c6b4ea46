"""A slot's holder and the tasks deployed ahead behind it (core/taskmanager/slotqueue.py)."""

from __future__ import annotations

import itertools
from typing import Any

from clusterdeck.core.taskmanager.slotqueue import SlotQueue
from clusterdeck.core.taskmanager.slots import SlotTable
from tests.unit.core.taskmanager.helpers import deployment


class QueuedTask:
    """What SlotQueue uses of a Task, recorded; no thread runs."""

    def __init__(self, attempt_id: str, slot_index: int = 0) -> None:
        self.deployment = deployment(attempt_id, slot_index)
        self.attempt_id = attempt_id
        self.worker: Any = None
        self.ended_unstarted = False
        self._claims = itertools.count()

    @property
    def handed(self) -> bool:
        return self.worker is not None

    def start(self, worker: Any) -> None:
        self.worker = worker

    def claim(self) -> bool:
        return next(self._claims) == 0

    def end_unstarted(self) -> None:
        self.ended_unstarted = True


def allocated(slots: int = 1) -> SlotTable:
    table = SlotTable(slots)
    for index in range(slots):
        table.allocate(index, "alloc", "job")
    return table


def test_the_task_deployed_ahead_takes_the_slot_when_its_holder_ends() -> None:
    table = allocated()
    queue = SlotQueue(table)
    holder, ahead = QueuedTask("a0"), QueuedTask("a1")
    queue.hold(holder)  # type: ignore[arg-type]
    assert queue.is_held(0)
    queue.deploy_ahead(ahead)  # type: ignore[arg-type]
    assert ahead.worker is holder.worker  # handed to the slot's thread, behind its holder

    assert queue.release(holder) is ahead  # type: ignore[arg-type]
    assert table.report().slots[0].allocation_id == "alloc"  # not freed in between
    queue.hold(ahead)  # type: ignore[arg-type]
    assert queue.release(ahead) is None  # type: ignore[arg-type]
    assert table.report().slots[0].allocation_id is None
    assert not queue.is_held(0)


def test_a_task_that_never_held_its_slot_frees_nothing() -> None:
    table = allocated()
    queue = SlotQueue(table)
    holder = QueuedTask("a0")
    queue.hold(holder)  # type: ignore[arg-type]
    assert queue.release(QueuedTask("stranger")) is None  # type: ignore[arg-type]
    assert queue.is_held(0) and table.report().slots[0].allocation_id == "alloc"


def test_a_task_cancelled_while_deployed_ahead_ends_at_once_and_leaves_the_queue() -> None:
    queue = SlotQueue(allocated())
    holder, cancelled, following = QueuedTask("a0"), QueuedTask("a1"), QueuedTask("a2")
    queue.hold(holder)  # type: ignore[arg-type]
    queue.deploy_ahead(cancelled)  # type: ignore[arg-type]
    queue.deploy_ahead(following)  # type: ignore[arg-type]

    queue.end_if_queued(cancelled)  # type: ignore[arg-type]
    queue.end_if_queued(holder)  # type: ignore[arg-type]

    assert cancelled.ended_unstarted and not holder.ended_unstarted
    assert queue.release(holder) is following  # type: ignore[arg-type]


def test_a_task_its_slot_thread_claimed_first_is_left_to_end_there() -> None:
    queue = SlotQueue(allocated())
    holder, ahead = QueuedTask("a0"), QueuedTask("a1")
    queue.hold(holder)  # type: ignore[arg-type]
    queue.deploy_ahead(ahead)  # type: ignore[arg-type]
    assert ahead.claim()  # the slot's thread began it

    queue.end_if_queued(ahead)  # type: ignore[arg-type]

    assert not ahead.ended_unstarted
