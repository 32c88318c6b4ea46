"""The scheduler fed by hand: lazy deployment, wiring, idempotent updates, cancel, lost TMs."""

from clusterdeck.core.executiongraph import (
    TASKMANAGER_LOST,
    AllocateSlot,
    CancelAttempt,
    DeployTask,
    ExecutionStateChanged,
    FixedDelay,
    JobCanceled,
    JobFinished,
    JobStatus,
    JobStatusChanged,
    Rejected,
    ReleaseSlot,
    ScheduleOrUpdateConsumers,
    ScheduleRestart,
    SlotRef,
    WithdrawSlotRequest,
)
from clusterdeck.core.executiongraph import ExecutionState as S
from clusterdeck.core.protocol.jobgraph import ShipStrategy
from tests.unit.core.executiongraph.helpers import Harness, three_stages, word_count


def finish_sources(harness: Harness, count: int) -> None:
    for subtask in range(count):
        attempt = harness.attempt("source", subtask)
        harness.report(attempt, S.RUNNING)
        harness.report(attempt, S.FINISHED)


# -- running a job -------------------------------------------------------------------------

def test_starting_the_job_runs_it_and_asks_a_slot_for_each_source_subtask_only():
    harness = Harness(word_count(sources=3, reducers=2))

    out = harness.start()

    assert out[0] == JobStatusChanged(JobStatus.CREATED, JobStatus.RUNNING, 1.0)
    assert [r.attempt_id for r in harness.logged(AllocateSlot)] == [
        "job-1/source#0/a0", "job-1/source#1/a0", "job-1/source#2/a0"]
    assert [harness.state("reduce", i) for i in range(2)] == [S.CREATED, S.CREATED]


def test_an_offered_slot_deploys_the_longest_waiting_subtask_into_it():
    harness = Harness(word_count())
    harness.start()

    out = harness.feed(harness.scheduler.slot_offered("tm-2", 1, now=2.0))

    assert out[0] == ExecutionStateChanged("job-1/source#0/a0", "source", 0, 0,
                                           S.SCHEDULED, S.DEPLOYING, 2.0)
    deploy = out[1]
    assert isinstance(deploy, DeployTask)
    assert (deploy.attempt_id, deploy.slot, deploy.parallelism) == (
        "job-1/source#0/a0", SlotRef("tm-2", 1), 3)
    assert deploy.inputs == ()


def test_word_count_runs_to_finished_when_fed_the_right_events():
    harness = Harness(word_count(sources=3, reducers=2))
    harness.start()

    harness.run_to_end()

    assert harness.scheduler.status is JobStatus.FINISHED
    assert harness.graph.progress() == (5, 5)
    assert isinstance(harness.log[-1], JobFinished)
    assert harness.log[-2].new is JobStatus.FINISHED
    assert len(harness.free_slots) == 4  # every slot went back


def test_a_three_stage_job_runs_to_finished_stage_by_stage():
    harness = Harness(three_stages())
    harness.start()

    harness.run_to_end()

    assert harness.scheduler.status is JobStatus.FINISHED
    assert [i.consumer_vertex_id for i in harness.logged(ScheduleOrUpdateConsumers)] == [
        "map", "sink"]


def test_job_finished_carries_what_each_subtask_reported():
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()
    harness.report(harness.attempt("source", 0), S.FINISHED, result={"records": 10})
    harness.grant_slots()
    harness.report(harness.attempt("reduce", 0), S.FINISHED, result={"collected": ["a"]})

    (finished,) = harness.logged(JobFinished)
    assert finished.results == {"source#0": {"records": 10}, "reduce#0": {"collected": ["a"]}}
    assert finished.duration == harness.now - 1.0


def test_a_finished_tasks_slot_goes_to_the_longest_waiting_attempt_then_back():
    """As Flink's JobMaster reuses the slots of its pool: no round trip through the
    ResourceManager while attempts wait; the slot goes back once none does."""
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()

    out = harness.report(harness.attempt("source", 0), S.FINISHED)

    reduce = harness.attempt("reduce", 0)
    assert WithdrawSlotRequest(reduce) in out and ReleaseSlot(SlotRef("tm-1", 0)) not in out
    (deploy,) = [d for d in out if isinstance(d, DeployTask)]
    assert (deploy.attempt_id, deploy.slot) == (reduce, SlotRef("tm-1", 0))
    assert harness.state("reduce", 0) is S.DEPLOYING
    out = harness.report(reduce, S.FINISHED)
    assert ReleaseSlot(SlotRef("tm-1", 0)) in out


def test_a_slot_offered_when_nothing_waits_is_released():
    harness = Harness(word_count())

    assert harness.scheduler.slot_offered("tm-1", 0, now=1.0) == [ReleaseSlot(SlotRef("tm-1", 0))]


def test_a_slot_already_in_use_is_refused():
    harness = Harness(word_count())
    harness.start()
    harness.grant_slots()

    (rejected,) = harness.scheduler.slot_offered("tm-1", 0, now=9.0)

    assert isinstance(rejected, Rejected)
    assert "in use by job-1/source#0/a0" in rejected.reason


# -- lazy deployment and wiring ------------------------------------------------------------

def test_consumers_are_not_deployed_before_every_producer_has_finished():
    harness = Harness(word_count(sources=3, reducers=2))
    harness.start()
    harness.grant_slots()

    finish_sources(harness, 2)
    harness.grant_slots()

    assert [harness.state("reduce", i) for i in range(2)] == [S.CREATED, S.CREATED]
    assert not [d for d in harness.logged(DeployTask) if d.vertex_id == "reduce"]
    assert not harness.logged(ScheduleOrUpdateConsumers)


def test_the_last_producer_finishing_schedules_the_consumers():
    harness = Harness(word_count(sources=3, reducers=2))
    harness.start()
    harness.grant_slots()
    finish_sources(harness, 2)

    last = harness.attempt("source", 2)
    harness.report(last, S.RUNNING)
    out = harness.report(last, S.FINISHED)

    assert ScheduleOrUpdateConsumers("reduce", ("source",)) in out
    assert [r.vertex_id for r in out if isinstance(r, AllocateSlot)] == ["reduce", "reduce"]
    # the first takes the last producer's slot, the second waits for one
    assert [harness.state("reduce", i) for i in range(2)] == [S.DEPLOYING, S.SCHEDULED]


def test_a_hash_consumer_is_deployed_with_its_partition_of_every_finished_producer():
    harness = Harness(word_count(sources=3, reducers=2, strategy=ShipStrategy.HASH))
    harness.start()
    harness.run_to_end()

    deploy = next(d for d in harness.logged(DeployTask) if d.vertex_id == "reduce"
                  and d.subtask == 1)
    (edge_input,) = deploy.inputs
    assert edge_input.ship_strategy is ShipStrategy.HASH
    assert [(p.producer_attempt_id, p.partition) for p in edge_input.partitions] == [
        ("job-1/source#0/a0", 1), ("job-1/source#1/a0", 1), ("job-1/source#2/a0", 1)]


def test_a_broadcast_consumer_is_deployed_with_the_single_partition_of_every_producer():
    harness = Harness(word_count(sources=2, reducers=2, strategy=ShipStrategy.BROADCAST))
    harness.start()
    harness.run_to_end()

    for deploy in (d for d in harness.logged(DeployTask) if d.vertex_id == "reduce"):
        assert [(p.producer_subtask, p.partition) for p in deploy.inputs[0].partitions] == [
            (0, 0), (1, 0)]


def test_a_forward_consumer_is_deployed_with_its_own_producers_partition():
    harness = Harness(three_stages())
    harness.start()
    harness.run_to_end()

    deploy = next(d for d in harness.logged(DeployTask) if d.vertex_id == "map"
                  and d.subtask == 1)
    assert [(p.producer_attempt_id, p.partition) for p in deploy.inputs[0].partitions] == [
        ("job-1/source#1/a0", 0)]


def test_a_producer_is_told_how_many_partitions_to_write_per_output_edge():
    harness = Harness(word_count(sources=3, reducers=2))
    harness.start()
    harness.grant_slots()

    deploy = harness.logged(DeployTask)[0]

    assert [(o.target_vertex_id, o.partitions) for o in deploy.outputs] == [("reduce", 2)]


# -- stale, duplicate and impossible updates -----------------------------------------------

def test_the_same_finished_twice_changes_nothing():
    harness = Harness(word_count(sources=2, reducers=1))
    harness.start()
    harness.grant_slots()
    attempt = harness.attempt("source", 0)
    harness.report(attempt, S.FINISHED)
    before = harness.graph.snapshot()

    assert harness.report(attempt, S.FINISHED) == []
    assert harness.graph.snapshot() == before


def test_an_update_from_a_replaced_attempt_is_rejected_and_changes_nothing():
    harness = Harness(word_count(sources=1, reducers=1), restart=FixedDelay(1, 0.0))
    harness.start()
    harness.grant_slots()
    old = harness.attempt("source", 0)
    harness.report(old, S.FAILED)
    harness.restart_due(harness.logged(ScheduleRestart)[0].due)
    before = harness.graph.snapshot()

    (rejected,) = harness.report(old, S.FINISHED)

    assert isinstance(rejected, Rejected)
    assert rejected.reason == f"stale attempt {old}: replaced by job-1/source#0/a1"
    assert harness.graph.snapshot() == before


def test_an_update_for_an_attempt_the_job_never_issued_is_rejected():
    harness = Harness(word_count())
    harness.start()

    (rejected,) = harness.report("job-1/source#0/a7", S.RUNNING)

    assert isinstance(rejected, Rejected) and "unknown attempt" in rejected.reason


def test_a_task_cannot_report_running_before_it_was_deployed():
    harness = Harness(word_count())
    harness.start()

    (rejected,) = harness.report(harness.attempt("source", 0), S.RUNNING)

    assert isinstance(rejected, Rejected)
    assert harness.state("source", 0) is S.SCHEDULED


def test_a_failure_after_finished_is_rejected():
    harness = Harness(word_count(sources=2, reducers=1))
    harness.start()
    harness.grant_slots()
    attempt = harness.attempt("source", 0)
    harness.report(attempt, S.FINISHED)

    (rejected,) = harness.report(attempt, S.FAILED)

    assert isinstance(rejected, Rejected)
    assert harness.state("source", 0) is S.FINISHED and harness.graph.failures == []


def test_a_task_manager_cannot_report_a_scheduler_only_state():
    harness = Harness(word_count())
    harness.start()
    harness.grant_slots()

    (rejected,) = harness.report(harness.attempt("source", 0), S.SCHEDULED)

    assert isinstance(rejected, Rejected)


def test_a_state_arriving_as_text_from_the_wire_is_understood_and_nonsense_is_rejected():
    harness = Harness(word_count())
    harness.start()
    harness.grant_slots()
    attempt = harness.attempt("source", 0)

    harness.report(attempt, "RUNNING")
    (rejected,) = harness.report(attempt, "EXPLODED")

    assert harness.state("source", 0) is S.RUNNING
    assert isinstance(rejected, Rejected)


def test_starting_twice_is_rejected():
    harness = Harness(word_count())
    harness.start()

    (rejected,) = harness.start()

    assert isinstance(rejected, Rejected)


# -- cancel --------------------------------------------------------------------------------

def test_cancel_leads_every_execution_and_the_job_to_canceled():
    harness = Harness(word_count(sources=3, reducers=2), slots={"tm-1": 2})
    harness.start()
    harness.grant_slots()
    harness.report(harness.attempt("source", 0), S.RUNNING)

    out = harness.cancel()
    cancels = [i for i in out if isinstance(i, CancelAttempt)]
    assert [c.attempt_id for c in cancels] == ["job-1/source#0/a0", "job-1/source#1/a0"]
    assert harness.scheduler.status is JobStatus.CANCELLING
    for cancel in cancels:
        harness.report(cancel.attempt_id, S.CANCELED)

    assert all(e.state is S.CANCELED for e in harness.graph.current_executions())
    assert harness.scheduler.status is JobStatus.CANCELED
    assert isinstance(harness.log[-1], JobCanceled)


def test_a_task_that_finishes_while_being_canceled_counts_as_canceled():
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()
    attempt = harness.attempt("source", 0)
    harness.cancel()

    harness.report(attempt, S.FINISHED)

    assert harness.state("source", 0) is S.CANCELED
    assert harness.scheduler.status is JobStatus.CANCELED


def test_cancel_before_start_cancels_everything_at_once():
    harness = Harness(word_count())

    harness.cancel()

    assert harness.scheduler.status is JobStatus.CANCELED
    assert all(e.state is S.CANCELED for e in harness.graph.current_executions())


def test_cancelling_twice_or_after_the_end_changes_nothing():
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()
    harness.cancel()

    assert harness.cancel() == []


def test_slots_offered_after_cancel_are_given_back():
    harness = Harness(word_count(), slots={"tm-1": 1})
    harness.start()
    harness.cancel()

    assert harness.scheduler.slot_offered("tm-9", 0, now=99.0) == [
        ReleaseSlot(SlotRef("tm-9", 0))]


# -- lost TaskManagers ---------------------------------------------------------------------

def test_a_lost_taskmanager_fails_its_running_executions_with_a_cause_naming_it():
    harness = Harness(word_count(sources=3, reducers=2), restart=FixedDelay(1, 5.0))
    harness.start()
    harness.grant_slots()  # tm-1 gets source#0 and #1, tm-2 gets source#2

    harness.lose("tm-1", cause="heartbeat timeout")

    assert [harness.state("source", i) for i in range(3)] == [S.FAILED, S.FAILED, S.DEPLOYING]
    failure = harness.graph.subtask("source", 0).current.failure
    assert failure.exception_type == TASKMANAGER_LOST
    assert failure.message == "lost TaskManager tm-1: heartbeat timeout"
    assert failure.taskmanager_id == "tm-1"


def test_the_slots_of_a_lost_taskmanager_are_not_released_to_it():
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()

    out = harness.lose("tm-1")

    assert not [i for i in out if isinstance(i, ReleaseSlot)]


def test_losing_a_taskmanager_without_tasks_of_this_job_changes_nothing():
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()

    assert harness.lose("tm-2") == []


def test_losing_a_taskmanager_while_canceling_completes_the_cancel_of_its_tasks():
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()
    harness.cancel()

    harness.lose("tm-1")

    assert harness.state("source", 0) is S.CANCELED
    assert harness.scheduler.status is JobStatus.CANCELED
