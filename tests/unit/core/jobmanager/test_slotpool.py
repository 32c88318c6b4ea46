"""The ResourceManager's slot pool: no slot is ever given out twice."""

from __future__ import annotations

from clusterdeck.core.jobmanager.slotpool import PendingRequest, SlotId, SlotPool


def request(n: int, job: str = "job") -> PendingRequest:
    return PendingRequest(job, f"alloc-{n}", "jobmaster.job")


def test_requests_are_matched_with_free_slots_oldest_first() -> None:
    pool = SlotPool()
    pool.add_taskmanager("tm-1", 1)
    for n in range(2):
        pool.request(request(n))
    (made,) = pool.assign()
    assert made.request.allocation_id == "alloc-0"
    assert pool.pending == 1
    pool.free("alloc-0")
    (made,) = pool.assign()
    assert made.request.allocation_id == "alloc-1"


def test_work_is_spread_over_taskmanagers() -> None:
    pool = SlotPool()
    pool.add_taskmanager("tm-1", 2)
    pool.add_taskmanager("tm-2", 2)
    for n in range(2):
        pool.request(request(n))
    assert {a.slot.resource_id for a in pool.assign()} == {"tm-1", "tm-2"}


def test_a_lost_taskmanager_takes_its_allocations_out_of_the_pool() -> None:
    pool = SlotPool()
    pool.add_taskmanager("tm-1", 1)
    pool.request(request(0))
    pool.assign()
    (lost,) = pool.remove_taskmanager("tm-1")
    assert lost.slot == SlotId("tm-1", 0)
    assert pool.free_count("tm-1") == 0


def test_slots_busy_on_a_returning_taskmanager_are_not_given_out_until_reported_free() -> None:
    pool = SlotPool()
    pool.add_taskmanager("tm-1", 2, busy={0})
    pool.request(request(0))
    pool.request(request(1))
    (made,) = pool.assign()
    assert made.slot == SlotId("tm-1", 1)
    assert pool.report("tm-1", free={1}) is False
    assert pool.report("tm-1", free={0}) is True
    (made,) = pool.assign()
    assert made.slot == SlotId("tm-1", 0)


def test_releasing_a_job_drops_its_slots_and_its_waiting_requests() -> None:
    pool = SlotPool()
    pool.add_taskmanager("tm-1", 1)
    pool.request(request(0, "a"))
    pool.request(request(1, "a"))
    pool.assign()
    pool.release_job("a")
    assert pool.pending == 0
    assert pool.free_count("tm-1") == 1


def test_a_taskmanager_still_starting_spark_gets_work_only_when_no_other_slot_is_free() -> None:
    pool = SlotPool()
    pool.add_taskmanager("tm-1", 2, busy={0})
    pool.add_taskmanager("tm-2", 2, spark_ready=False)  # restarted: more free, not ready
    pool.request(request(0))
    (made,) = pool.assign()
    assert made.slot.resource_id == "tm-1"
    pool.request(request(1))
    (made,) = pool.assign()
    assert made.slot.resource_id == "tm-2"


def test_a_taskmanager_whose_spark_came_up_is_worth_an_assignment_round() -> None:
    pool = SlotPool()
    pool.add_taskmanager("tm-1", 1, spark_ready=False)
    assert pool.report("tm-1", free={0}, spark_ready=False) is False
    assert pool.report("tm-1", free={0}, spark_ready=True) is True
    assert pool.report("tm-1", free={0}, spark_ready=True) is False
