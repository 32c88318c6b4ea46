"""Failures: restarts under a strategy, the failure history, regions, full failover and
giving up."""

import pytest

from clusterdeck.core.executiongraph import (
    TASKMANAGER_LOST,
    AllocateSlot,
    CancelAttempt,
    DeployTask,
    ExponentialDelay,
    FixedDelay,
    JobFailed,
    JobStatus,
    JobStatusChanged,
    NewAttempt,
    NoRestart,
    ReleaseSlot,
    ScheduleOrUpdateConsumers,
    ScheduleRestart,
    SlotRef,
    TaskFailure,
    failover_region,
)
from clusterdeck.core.executiongraph import ExecutionState as S
from tests.unit.core.executiongraph.helpers import (
    Harness,
    three_stages,
    through_the_wire,
    word_count,
)

BOOM = TaskFailure("ValueError", "boom",
                   "Traceback (most recent call last):\n  ...\nValueError: boom")


def fail(harness: Harness, vertex_id: str, subtask: int, message: str = "boom"):
    return harness.report(harness.attempt(vertex_id, subtask), S.FAILED,
                          failure=TaskFailure("ValueError", message))


def test_a_failed_subtask_is_restarted_with_a_new_attempt_after_the_fixed_delay():
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(attempts=2, delay=5.0))
    harness.start()
    harness.grant_slots()

    out = fail(harness, "source", 1)
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert (restart.delay, restart.due, restart.subtasks) == (5.0, harness.now + 5.0, ("source#1",))
    assert restart.failed_attempt_ids == ("job-1/source#1/a0",)
    assert harness.scheduler.status is JobStatus.RUNNING

    out = harness.restart_due(restart.due)
    assert NewAttempt("job-1/source#1/a1", "source", 1, 1, "job-1/source#1/a0",
                      restart.due) in out
    assert harness.state("source", 1) is S.SCHEDULED

    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    assert [e.state for e in harness.graph.subtask("source", 1).attempts] == [
        S.FAILED, S.FINISHED]


def test_a_restart_does_not_happen_before_it_is_due():
    harness = Harness(word_count(sources=1, reducers=1), restart=FixedDelay(attempts=1, delay=5.0))
    harness.start()
    harness.grant_slots()
    fail(harness, "source", 0)

    assert harness.restart_due(harness.now + 4.0) == []
    assert harness.state("source", 0) is S.FAILED


def test_the_job_fails_once_the_attempts_are_used_up_with_the_first_failure_as_root_cause():
    harness = Harness(word_count(sources=1, reducers=1), restart=FixedDelay(attempts=2, delay=1.0))
    harness.start()
    for number in range(3):
        harness.grant_slots()
        out = fail(harness, "source", 0, message=f"failure {number}")
        restarts = [i for i in out if isinstance(i, ScheduleRestart)]
        if restarts:
            harness.restart_due(restarts[0].due)

    assert harness.scheduler.status is JobStatus.FAILED
    (failed,) = harness.logged(JobFailed)
    assert failed.root_cause.message == "failure 0"
    assert failed.root_cause.attempt_id == "job-1/source#0/a0"
    assert [f.message for f in harness.graph.failures] == ["failure 0", "failure 1", "failure 2"]
    assert [e.attempt for e in harness.graph.subtask("source", 0).attempts] == [0, 1, 2]


def test_without_a_restart_strategy_the_first_failure_fails_the_job():
    harness = Harness(word_count(sources=1, reducers=1), restart=NoRestart())
    harness.start()
    harness.grant_slots()

    fail(harness, "source", 0)

    assert harness.scheduler.status is JobStatus.FAILED
    assert [e.state for e in harness.graph.current_executions()] == [S.FAILED, S.CANCELED]


def test_giving_up_cancels_the_running_tasks_before_the_job_is_failed():
    harness = Harness(word_count(sources=2, reducers=1))
    harness.start()
    harness.grant_slots()

    out = fail(harness, "source", 0)

    assert [i.new for i in out if isinstance(i, JobStatusChanged)] == [JobStatus.FAILING]
    assert CancelAttempt("job-1/source#1/a0", "tm-1") in out
    harness.report("job-1/source#1/a0", S.CANCELED)
    assert harness.scheduler.status is JobStatus.FAILED


def test_a_late_failure_while_failing_is_recorded_but_the_root_cause_stays_the_first():
    harness = Harness(word_count(sources=2, reducers=1))
    harness.start()
    harness.grant_slots()
    fail(harness, "source", 0, message="first")

    fail(harness, "source", 1, message="second")

    assert harness.scheduler.status is JobStatus.FAILED
    assert harness.logged(JobFailed)[0].root_cause.message == "first"


def test_the_failure_history_keeps_attempt_vertex_subtask_taskmanager_cause_and_time():
    harness = Harness(word_count(sources=1, reducers=1), restart=FixedDelay(1, 0.0))
    harness.start()
    harness.grant_slots()

    out = harness.report(harness.attempt("source", 0), S.FAILED, failure=BOOM)

    (record,) = harness.graph.failures
    assert out[0].new is S.FAILED and out[0].failure == record
    assert (record.attempt_id, record.vertex_id, record.subtask, record.taskmanager_id) == (
        "job-1/source#0/a0", "source", 0, "tm-1")
    assert (record.exception_type, record.message) == ("ValueError", "boom")
    assert record.failure.traceback.endswith("ValueError: boom")
    assert record.timestamp == harness.now
    snapshot = through_the_wire(harness.graph.snapshot())
    assert snapshot.failures[0].traceback == BOOM.traceback
    assert snapshot.root_cause is not None
    assert snapshot.root_cause.attempt_id == "job-1/source#0/a0"
    assert snapshot.vertices[0].subtasks[0].attempts[0].failure.message == "boom"


def test_a_failure_without_a_reported_cause_is_still_recorded():
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()

    harness.report(harness.attempt("source", 0), S.FAILED)

    assert harness.graph.root_cause.exception_type == "UnknownFailure"


def test_a_task_that_reports_canceled_unasked_has_failed():
    harness = Harness(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()

    harness.report(harness.attempt("source", 0), S.CANCELED)

    assert harness.state("source", 0) is S.FAILED
    assert harness.graph.root_cause.exception_type == "UnexpectedCancellation"


def test_a_failed_consumer_reruns_alone_reading_the_same_producer_partitions():
    harness = Harness(word_count(sources=2, reducers=2), restart=FixedDelay(1, 2.0))
    harness.start()
    harness.grant_slots()
    harness.run_deployed()
    harness.grant_slots()

    out = fail(harness, "reduce", 1)
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("reduce#1",)
    harness.restart_due(restart.due)
    harness.run_to_end()

    assert harness.scheduler.status is JobStatus.FINISHED
    assert [len(harness.graph.subtask("source", i).attempts) for i in range(2)] == [1, 1]
    first, second = [d for d in harness.logged(DeployTask) if d.vertex_id == "reduce"
                     and d.subtask == 1]
    assert second.attempt_id == "job-1/reduce#1/a1"
    assert second.inputs == first.inputs


def test_losing_a_taskmanager_is_one_failure_event_and_its_tasks_restart_on_other_slots():
    harness = Harness(word_count(sources=3, reducers=1), restart=FixedDelay(attempts=1, delay=1.0))
    harness.start()
    harness.grant_slots()

    out = harness.lose("tm-1")
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "source#1")
    harness.restart_due(restart.due)
    harness.run_to_end()

    assert harness.scheduler.status is JobStatus.FINISHED
    reruns = [d for d in harness.logged(DeployTask) if d.attempt == 1]
    assert {d.slot.taskmanager_id for d in reruns} == {"tm-2"}
    assert [f.exception_type for f in harness.graph.failures] == [TASKMANAGER_LOST] * 2


def test_a_restart_waits_longer_each_time_under_exponential_delay():
    harness = Harness(word_count(sources=1, reducers=1),
                      restart=ExponentialDelay(initial=1.0, max=8.0, jitter=0.0))
    harness.start()
    delays = []
    for _ in range(3):
        harness.grant_slots()
        (restart,) = [i for i in fail(harness, "source", 0) if isinstance(i, ScheduleRestart)]
        delays.append(restart.delay)
        harness.restart_due(restart.due)

    assert delays == [1.0, 2.0, 4.0]


def test_cancel_during_a_pending_restart_drops_the_restart():
    harness = Harness(word_count(sources=1, reducers=1), restart=FixedDelay(1, 5.0))
    harness.start()
    harness.grant_slots()
    (restart,) = [i for i in fail(harness, "source", 0) if isinstance(i, ScheduleRestart)]

    harness.cancel()

    assert harness.scheduler.status is JobStatus.CANCELED
    assert harness.restart_due(restart.due) == []
    assert len(harness.graph.subtask("source", 0).attempts) == 1


def test_the_failover_region_of_a_subtask_is_itself_while_partitions_survive():
    harness = Harness(three_stages())
    harness.start()
    harness.run_to_end()
    sink = harness.graph.subtask("sink", 0)

    assert failover_region(harness.graph, [sink]) == [sink]


def test_with_local_partitions_a_lost_producer_is_recomputed_before_its_consumer_reruns():
    harness = Harness(word_count(sources=2, reducers=1), slots={"tm-1": 1, "tm-2": 2},
                      restart=FixedDelay(1, 1.0), partitions_outlive_taskmanagers=False)
    harness.start()
    harness.grant_slots()  # source#0 on tm-1, source#1 on tm-2
    harness.run_deployed()
    harness.grant_slots()  # reduce#0 on tm-2
    harness.report(harness.attempt("reduce", 0), S.RUNNING)

    out = harness.lose("tm-2")
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#1", "reduce#0")
    harness.restart_due(restart.due)
    assert harness.state("source", 1) is S.SCHEDULED
    assert harness.state("reduce", 0) is S.CREATED

    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    assert harness.logged(ScheduleOrUpdateConsumers)[-1].consumer_vertex_id == "reduce"
    rerun = next(d for d in harness.logged(DeployTask) if d.attempt_id == "job-1/reduce#0/a1")
    assert [p.producer_attempt_id for p in rerun.inputs[0].partitions] == [
        "job-1/source#0/a0", "job-1/source#1/a1"]


def _source_finished_on_tm1_and_its_consumer_running_elsewhere() -> Harness:
    harness = Harness(word_count(sources=2, reducers=1), slots={"tm-1": 1, "tm-2": 2},
                      restart=FixedDelay(1, 1.0))
    harness.start()
    harness.grant_slots()  # source#0 on tm-1, source#1 on tm-2
    harness.run_deployed()
    harness.grant_slots()  # reduce#0 on tm-2
    harness.report(harness.attempt("reduce", 0), S.RUNNING)
    assert harness.deployments()[harness.attempt("reduce", 0)].slot.taskmanager_id == "tm-2"
    return harness


def test_partitions_lost_with_a_taskmanager_rerun_their_producers_at_once_with_the_cause():
    harness = _source_finished_on_tm1_and_its_consumer_running_elsewhere()
    finished_on_tm1 = harness.attempt("source", 0)

    out = harness.feed(harness.scheduler.taskmanager_lost(
        "tm-1", "heartbeat timeout", harness.tick(), partitions_kept=lambda _: False))

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "reduce#0")  # source#1 keeps its result
    assert harness.state("reduce", 0) is S.CANCELING
    (record,) = harness.graph.failures
    assert record.attempt_id == finished_on_tm1
    assert record.failure.message == \
        "result partitions lost with TaskManager tm-1: heartbeat timeout"
    harness.report(harness.attempt("reduce", 0), S.CANCELED)
    harness.restart_due(restart.due)
    assert harness.state("source", 0) is S.SCHEDULED
    assert len(harness.graph.subtask("source", 1).attempts) == 1
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED


def test_partitions_a_lost_taskmanager_leaves_readable_keep_their_producer_and_consumers():
    harness = _source_finished_on_tm1_and_its_consumer_running_elsewhere()

    out = harness.feed(harness.scheduler.taskmanager_lost(
        "tm-1", "heartbeat timeout", harness.tick(), partitions_kept=lambda _: True))

    assert not [i for i in out if isinstance(i, ScheduleRestart)]
    assert harness.state("reduce", 0) is S.RUNNING
    assert harness.graph.failures == []


def test_with_local_partitions_lost_output_is_recomputed_and_its_consumers_run_again():
    harness = Harness(three_stages(), restart=FixedDelay(1, 0.0),
                      partitions_outlive_taskmanagers=False)
    harness.start()
    harness.grant_slots()  # source#0 and #1 on tm-1
    harness.run_deployed()  # map#0 takes the last source's slot on tm-1, map#1 waits
    assert {d.slot.taskmanager_id for d in harness.deployments().values()} == {"tm-1"}

    out = harness.lose("tm-1")

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "source#1", "map#0", "map#1")
    assert [harness.state("map", i) for i in range(2)] == [S.FAILED, S.CANCELED]
    assert any("result partitions lost with TaskManager tm-1: heartbeat timeout" in f.message
               for f in harness.graph.failures)
    harness.restart_due(restart.due)
    assert [harness.state("map", i) for i in range(2)] == [S.CREATED, S.CREATED]
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    map_inputs = {d.inputs[0].partitions[0].producer_attempt_id
                  for d in harness.logged(DeployTask) if d.vertex_id == "map" and d.attempt}
    assert map_inputs == {"job-1/source#0/a1", "job-1/source#1/a1"}


def test_a_restart_waits_for_the_cancel_of_a_running_region_member():
    harness = Harness(word_count(sources=1, reducers=2), restart=FixedDelay(1, 1.0),
                      slots={"tm-1": 1, "tm-2": 1}, partitions_outlive_taskmanagers=False)
    harness.start()
    harness.grant_slots()  # source#0 on tm-1
    harness.run_deployed()  # reduce#0 takes its slot on tm-1
    harness.grant_slots()  # reduce#1 on tm-2
    harness.run_deployed(finish=False)

    out = harness.lose("tm-1")
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "reduce#0", "reduce#1")
    assert restart.failed_attempt_ids == ("job-1/reduce#0/a0", "job-1/source#0/a0")
    assert CancelAttempt("job-1/reduce#1/a0", "tm-2") in out

    assert harness.restart_due(restart.due) == []
    out = harness.report("job-1/reduce#1/a0", S.CANCELED)
    assert [i.attempt_id for i in out if isinstance(i, NewAttempt)] == [
        "job-1/source#0/a1", "job-1/reduce#0/a1", "job-1/reduce#1/a1"]
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED


def test_the_failure_history_keeps_the_slot_and_the_attempts_start_and_end_times():
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(1, 0.0))
    harness.start()
    harness.grant_slots()  # source#0 on tm-1 slot 0, source#1 on tm-1 slot 1
    deployed_at = harness.graph.subtask("source", 1).current.start_time

    fail(harness, "source", 1)

    (record,) = harness.graph.failures
    assert (record.taskmanager_id, record.slot_index) == ("tm-1", 1)
    assert (record.start_time, record.timestamp) == (deployed_at, harness.now)
    data = record.to_dict()
    assert (data["slot_index"], data["start_time"], data["end_time"]) == (
        1, deployed_at, harness.now)


# -- partitions a consumer could not find ----------------------------------------------------


def partition_not_found(*producers: str) -> TaskFailure:
    return TaskFailure("PartitionNotFound", "result partition not found: ...",
                       lost_producers=producers)


def consumer_reading(harness: Harness) -> str:
    """Run the sources to their end and the reducer to RUNNING; its attempt id."""
    harness.start()
    harness.grant_slots()
    harness.run_deployed()
    harness.grant_slots()
    harness.report(harness.attempt("reduce", 0), S.RUNNING)
    return harness.attempt("reduce", 0)


def test_a_partition_not_found_restarts_the_producer_before_the_consumer_reads_again():
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(1, 1.0))
    consumer = consumer_reading(harness)

    out = harness.report(consumer, S.FAILED, failure=partition_not_found("job-1/source#1/a0"))

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#1", "reduce#0")
    assert restart.failed_attempt_ids == ("job-1/reduce#0/a0",)
    assert harness.graph.subtask("source", 1).current.partitions_lost
    harness.restart_due(restart.due)
    assert harness.state("source", 1) is S.SCHEDULED
    assert harness.state("reduce", 0) is S.CREATED  # waits for the new partitions
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    assert [len(harness.graph.subtask("source", i).attempts) for i in range(2)] == [1, 2]
    rerun = next(d for d in harness.logged(DeployTask) if d.attempt_id == "job-1/reduce#0/a1")
    assert [p.producer_attempt_id for p in rerun.inputs[0].partitions] == [
        "job-1/source#0/a0", "job-1/source#1/a1"]


def test_other_running_consumers_of_a_lost_partition_run_again_on_the_new_one():
    harness = Harness(word_count(sources=1, reducers=2), restart=FixedDelay(1, 1.0),
                      slots={"tm-1": 3})
    harness.start()
    harness.grant_slots()
    harness.run_deployed()
    harness.grant_slots()
    harness.run_deployed(finish=False)

    out = harness.report(harness.attempt("reduce", 0), S.FAILED,
                         failure=partition_not_found("job-1/source#0/a0"))

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "reduce#0", "reduce#1")
    assert CancelAttempt("job-1/reduce#1/a0", "tm-1") in out


def test_a_failure_without_lost_producers_reruns_the_consumer_alone():
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(1, 1.0))
    consumer = consumer_reading(harness)

    out = harness.report(consumer, S.FAILED, failure=BOOM)

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("reduce#0",)
    assert not any(s.current.partitions_lost for s in harness.graph.vertex("source").subtasks)


def test_lost_producers_that_are_not_the_consumers_current_producers_are_ignored():
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(1, 1.0))
    consumer = consumer_reading(harness)

    out = harness.report(consumer, S.FAILED, failure=partition_not_found(
        "job-1/source#1/a7", "job-1/reduce#0/a0", "another-job/source#0/a0"))

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("reduce#0",)


def test_under_full_failover_a_partition_not_found_reruns_the_lost_producer_too():
    harness = full(word_count(sources=2, reducers=1))
    consumer = consumer_reading(harness)

    out = harness.report(consumer, S.FAILED, failure=partition_not_found("job-1/source#0/a0"))

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "reduce#0")
    harness.restart_due(restart.due)
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    assert [len(harness.graph.subtask("source", i).attempts) for i in range(2)] == [2, 1]


def test_when_restarts_run_out_the_job_fails_with_the_partition_not_found_as_root_cause():
    harness = Harness(word_count(sources=1, reducers=1), restart=NoRestart())
    consumer = consumer_reading(harness)

    harness.report(consumer, S.FAILED, failure=partition_not_found("job-1/source#0/a0"))

    assert harness.scheduler.status is JobStatus.FAILED
    (failed,) = harness.logged(JobFailed)
    assert failed.root_cause.exception_type == "PartitionNotFound"
    assert failed.root_cause.failure.lost_producers == ("job-1/source#0/a0",)
    assert through_the_wire(harness.graph.snapshot()).root_cause == failed.root_cause


# -- full failover -------------------------------------------------------------------------

def full(job_graph, **options) -> Harness:
    options.setdefault("restart", FixedDelay(attempts=2, delay=5.0))
    return Harness(job_graph, failover="full", **options)


def test_an_unknown_failover_strategy_is_refused():
    with pytest.raises(ValueError, match="failover"):
        Harness(word_count(), failover="pipelined")


def test_under_full_failover_a_failure_cancels_every_running_task_and_the_job_restarts():
    harness = full(word_count(sources=3, reducers=1), slots={"tm-1": 2, "tm-2": 2})
    harness.start()
    harness.grant_slots()

    out = fail(harness, "source", 0)

    assert JobStatusChanged(JobStatus.RUNNING, JobStatus.RESTARTING, harness.now) in out
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "source#1", "source#2", "reduce#0")
    assert restart.failed_attempt_ids == ("job-1/source#0/a0",)
    assert {c.attempt_id for c in out if isinstance(c, CancelAttempt)} == {
        "job-1/source#1/a0", "job-1/source#2/a0"}
    assert harness.state("reduce", 0) is S.CANCELED
    assert harness.scheduler.status is JobStatus.RESTARTING


def test_a_full_restart_waits_for_every_cancel_then_reruns_every_unfinished_subtask():
    harness = full(word_count(sources=3, reducers=1))
    harness.start()
    harness.grant_slots()  # source#0, #1 on tm-1, source#2 on tm-2
    harness.report(harness.attempt("source", 2), S.FINISHED)
    (restart,) = [i for i in fail(harness, "source", 0) if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "source#1", "reduce#0")

    assert harness.restart_due(restart.due) == []
    out = harness.report("job-1/source#1/a0", S.CANCELED)

    assert [i.new for i in out if isinstance(i, JobStatusChanged)] == [JobStatus.RUNNING]
    assert [i.attempt_id for i in out if isinstance(i, NewAttempt)] == [
        "job-1/source#0/a1", "job-1/source#1/a1", "job-1/reduce#0/a1"]
    assert [harness.state("source", i) for i in range(3)] == [S.SCHEDULED, S.SCHEDULED,
                                                              S.FINISHED]
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    assert [c.new for c in harness.logged(JobStatusChanged)] == [
        JobStatus.RUNNING, JobStatus.RESTARTING, JobStatus.RUNNING, JobStatus.FINISHED]
    assert len(harness.graph.subtask("source", 2).attempts) == 1


def test_a_full_restart_does_not_happen_before_its_backoff():
    harness = full(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()
    (restart,) = [i for i in fail(harness, "source", 0) if isinstance(i, ScheduleRestart)]

    assert harness.restart_due(restart.due - 1.0) == []
    assert harness.scheduler.status is JobStatus.RESTARTING
    out = harness.restart_due(restart.due)
    assert harness.scheduler.status is JobStatus.RUNNING
    assert [i.attempt_id for i in out if isinstance(i, AllocateSlot)] == ["job-1/source#0/a1"]


def test_a_failed_consumer_under_full_failover_reruns_on_the_finished_producers_output():
    harness = full(word_count(sources=2, reducers=2))
    harness.start()
    harness.grant_slots()
    harness.run_deployed()
    harness.grant_slots()

    out = fail(harness, "reduce", 1)  # both reducers took the sources' slots on tm-1
    assert CancelAttempt("job-1/reduce#0/a0", "tm-1") in out
    harness.report("job-1/reduce#0/a0", S.CANCELED)
    harness.restart_due(harness.logged(ScheduleRestart)[0].due)
    harness.run_to_end()

    assert harness.scheduler.status is JobStatus.FINISHED
    assert [len(harness.graph.subtask("source", i).attempts) for i in range(2)] == [1, 1]
    reruns = [d for d in harness.logged(DeployTask) if d.attempt == 1]
    assert [d.attempt_id for d in reruns] == ["job-1/reduce#0/a1", "job-1/reduce#1/a1"]
    assert {p.producer_attempt_id for d in reruns for p in d.inputs[0].partitions} == {
        "job-1/source#0/a0", "job-1/source#1/a0"}


def test_a_full_restart_is_one_failure_for_the_restart_strategy_and_giving_up_still_fails():
    harness = full(word_count(sources=2, reducers=1), restart=FixedDelay(attempts=1, delay=0.0))
    harness.start()
    harness.grant_slots()
    fail(harness, "source", 0)
    harness.report("job-1/source#1/a0", S.FAILED)  # a cancelled task may die failing
    harness.restart_due(harness.now)
    harness.grant_slots()

    fail(harness, "source", 0)
    harness.report("job-1/source#1/a1", S.CANCELED)

    assert harness.scheduler.status is JobStatus.FAILED
    assert [c.new for c in harness.logged(JobStatusChanged)] == [
        JobStatus.RUNNING, JobStatus.RESTARTING, JobStatus.RUNNING, JobStatus.FAILING,
        JobStatus.FAILED]


def test_slots_offered_while_restarting_are_given_back():
    harness = full(word_count(sources=1, reducers=1))
    harness.start()
    harness.grant_slots()
    fail(harness, "source", 0)

    assert harness.scheduler.slot_offered("tm-2", 1, harness.tick()) == [
        ReleaseSlot(SlotRef("tm-2", 1))]


def test_cancelling_a_restarting_job_drops_the_restart_and_cancels_the_job():
    harness = full(word_count(sources=2, reducers=1))
    harness.start()
    harness.grant_slots()
    (restart,) = [i for i in fail(harness, "source", 0) if isinstance(i, ScheduleRestart)]

    harness.cancel()
    assert harness.scheduler.status is JobStatus.CANCELLING
    harness.report("job-1/source#1/a0", S.CANCELED)

    assert harness.scheduler.status is JobStatus.CANCELED
    assert harness.restart_due(restart.due) == []


def test_a_taskmanager_lost_while_restarting_is_absorbed_by_the_full_restart():
    harness = full(word_count(sources=2, reducers=1), slots={"tm-1": 1, "tm-2": 2},
                   partitions_outlive_taskmanagers=False)
    harness.start()
    harness.grant_slots()  # source#0 on tm-1, source#1 on tm-2
    harness.report(harness.attempt("source", 1), S.FINISHED)
    (restart,) = [i for i in fail(harness, "source", 0) if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#0", "reduce#0")

    harness.lose("tm-2")  # takes source#1's partitions, which reduce#0 still needs
    out = harness.restart_due(restart.due)

    assert harness.scheduler.status is JobStatus.RUNNING
    assert [i.attempt_id for i in out if isinstance(i, NewAttempt)] == [
        "job-1/source#0/a1", "job-1/source#1/a1", "job-1/reduce#0/a1"]
    assert [c.new for c in harness.logged(JobStatusChanged)].count(JobStatus.RESTARTING) == 1
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
