"""The scheduler's slot book on its own: who waits, who holds, who is queued behind."""

from __future__ import annotations

from collections import deque

from clusterdeck.core.executiongraph import ExecutionGraph, SlotRef
from clusterdeck.core.executiongraph import ExecutionState as S
from clusterdeck.core.executiongraph.execution import Execution
from clusterdeck.core.executiongraph.slots import SlotBook
from tests.unit.core.executiongraph.helpers import JOB_ID, word_count

SLOT = SlotRef("tm-1", 0)


def scheduled(graph: ExecutionGraph, subtask: int) -> Execution:
    execution = graph.subtask("source", subtask).current
    execution.transition(S.SCHEDULED, 1.0)
    return execution


def test_the_oldest_current_scheduled_attempt_is_next_and_the_others_are_dropped():
    graph = ExecutionGraph(word_count(sources=3), JOB_ID)
    book = SlotBook(graph)
    cancelled, oldest, younger = (scheduled(graph, n) for n in range(3))
    cancelled.transition(S.CANCELED, 2.0)
    for execution in (cancelled, oldest, younger):
        book.wait_for_slot(execution)

    assert book.still_waiting() == [oldest, younger]
    assert book.next_waiting() is oldest
    assert book.next_waiting() is younger
    assert book.next_waiting() is None


def test_an_attempt_queued_behind_the_holder_takes_the_slot_over_when_the_holder_ends():
    graph = ExecutionGraph(word_count(sources=2), JOB_ID)
    book = SlotBook(graph)
    holder, behind = scheduled(graph, 0), scheduled(graph, 1)
    holder.slot = behind.slot = SLOT
    book.hold(SLOT, holder)
    queue = book.queue_behind(SLOT)
    queue.append(behind)
    book.keep_queue(SLOT, queue)

    assert book.unhold(holder) is None  # the slot stays taken: by the attempt behind
    assert book.holder(SLOT) is behind
    assert not book.queue_behind(SLOT)
    assert book.unhold(behind) == SLOT
    assert book.held() == []


def test_a_queued_attempt_that_ends_before_its_turn_leaves_the_holder_alone():
    graph = ExecutionGraph(word_count(sources=2), JOB_ID)
    book = SlotBook(graph)
    holder, behind = scheduled(graph, 0), scheduled(graph, 1)
    holder.slot = behind.slot = SLOT
    book.hold(SLOT, holder)
    book.keep_queue(SLOT, deque([behind]))

    assert book.unhold(behind) is None
    assert book.held() == [(SLOT, holder)]
    assert book.unhold(holder) == SLOT


def test_a_lost_taskmanager_takes_its_holders_and_their_queues_and_no_other_slot():
    graph = ExecutionGraph(word_count(sources=3), JOB_ID)
    book = SlotBook(graph)
    holder, behind, elsewhere = (scheduled(graph, n) for n in range(3))
    other = SlotRef("tm-2", 0)
    book.hold(SLOT, holder)
    book.keep_queue(SLOT, deque([behind]))
    book.hold(other, elsewhere)

    assert book.take_lost("tm-1") == [holder, behind]
    assert book.held() == [(other, elsewhere)]
    assert not book.queue_behind(SLOT)
