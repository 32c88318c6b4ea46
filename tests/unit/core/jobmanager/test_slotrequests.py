"""A JobMaster keeps a bounded number of slot requests out and hands them on."""

from __future__ import annotations

from clusterdeck.core.jobmanager.slotrequests import SlotRequestQueue


def attempt(i: int) -> str:
    return f"job/v#{i}/a0"


def test_at_most_the_limit_is_out_and_the_rest_is_asked_for_oldest_first() -> None:
    queue = SlotRequestQueue(limit=3)
    sent = [a for i in range(10) for a in queue.add(attempt(i))]
    assert [a.rsplit("/", 1)[0] for a in sent] == [attempt(0), attempt(1), attempt(2)]
    assert (queue.out, queue.waiting) == (3, 7)
    more = queue.answered(sent[1])  # a slot came for attempt 1: the next is asked for
    assert [a.rsplit("/", 1)[0] for a in more] == [attempt(3)]
    assert queue.answered("job/v#99/a0/unknown") == []  # not ours: nothing changes
    assert (queue.out, queue.waiting) == (3, 6)


def test_an_attempt_in_a_held_slot_hands_its_request_to_the_oldest_waiting() -> None:
    """What makes a long job cheap: no free and no new request per reused slot."""
    queue = SlotRequestQueue(limit=2)
    first, _ = [a for i in range(5) for a in queue.add(attempt(i))]
    assert queue.withdraw(attempt(0)) is None  # attempt 2 inherits its allocation
    assert (queue.out, queue.waiting) == (2, 2)
    # the slot offered for it stands for attempt 2 now: attempt 3 is asked for next
    assert [a.rsplit("/", 1)[0] for a in queue.answered(first)] == [attempt(3)]
    assert (queue.out, queue.waiting) == (2, 1)


def test_a_withdrawn_request_is_freed_only_when_nobody_waits() -> None:
    queue = SlotRequestQueue(limit=4)
    sent = [a for i in range(2) for a in queue.add(attempt(i))]
    assert queue.withdraw(attempt(0)) == sent[0]
    assert queue.withdraw(attempt(0)) is None  # once
    assert (queue.out, queue.waiting) == (1, 0)


def test_a_waiting_attempt_that_got_a_slot_is_never_asked_for() -> None:
    queue = SlotRequestQueue(limit=1)
    queue.add(attempt(0))
    queue.add(attempt(1))
    assert queue.withdraw(attempt(1)) is None
    assert queue.waiting == 0


def test_a_2000_subtask_job_on_four_slots_sends_a_bounded_number_of_messages() -> None:
    """The JobMaster's pattern: every attempt scheduled at once; four slots come; each
    later attempt goes into a slot a finished one left, withdrawing its request."""
    queue = SlotRequestQueue(limit=128)
    requests = [a for i in range(2000) for a in queue.add(attempt(i))]
    for allocation in requests[:4]:  # four slots offered, to the four oldest
        requests += queue.answered(allocation)
    frees = [f for i in range(4, 2000) if (f := queue.withdraw(attempt(i))) is not None]
    assert len(requests) == 128 + 4
    assert len(frees) == 128
    assert (queue.out, queue.waiting) == (0, 0)
