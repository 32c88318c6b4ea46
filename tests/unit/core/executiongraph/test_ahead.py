"""Deploy-ahead: behind a slot's task of a vertex whose tasks are short, attempts wait on
the slot's TaskManager (one behind tasks of 100 ms or more, up to 32 behind the
shortest), so the slot never waits a round trip to the JobMaster between two tasks;
behind long tasks (or before any finished) nothing is deployed ahead."""

from clusterdeck.core.executiongraph import (
    DeployTask,
    FixedDelay,
    JobStatus,
    ReleaseSlot,
    ScheduleRestart,
    SlotRef,
    TaskFailure,
    WithdrawSlotRequest,
)
from clusterdeck.core.executiongraph import ExecutionState as S
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from tests.unit.core.executiongraph.helpers import Harness, vertex, word_count

SLOT = SlotRef("tm-1", 0)
SHORT = 10.0  # seconds; the harness's clock moves one second per step


def sources(parallelism: int) -> JobGraph:
    return JobGraph(name="ahead", kind=JobKind.DATAFLOW,
                    vertices=(vertex("source", parallelism, "source.range", "sink.text"),),
                    edges=())


def one_slot(graph: JobGraph, ahead: float = SHORT, **options) -> Harness:
    harness = Harness(graph, slots={"tm-1": 1}, deploy_ahead=ahead, **options)
    harness.start()
    harness.grant_slots()
    return harness


def run(harness: Harness, subtask: int, vertex_id: str = "source") -> list:
    harness.report(harness.attempt(vertex_id, subtask), S.RUNNING)
    return harness.report(harness.attempt(vertex_id, subtask), S.FINISHED)


def deployed(out: list) -> list[tuple[int, SlotRef]]:
    return [(d.subtask, d.slot) for d in out if isinstance(d, DeployTask)]


def test_nothing_is_deployed_ahead_before_a_task_of_the_vertex_finished() -> None:
    harness = one_slot(sources(3))
    assert deployed(harness.log) == [(0, SLOT)]
    assert harness.state("source", 1) is S.SCHEDULED


def test_behind_short_tasks_one_attempt_waits_in_the_slot_and_takes_it_over() -> None:
    harness = one_slot(sources(4))
    out = run(harness, 0)
    # the slot goes to subtask 1, and subtask 2 is deployed behind it, its request withdrawn
    assert deployed(out) == [(1, SLOT), (2, SLOT)]
    withdrawn = [i.attempt_id for i in out if isinstance(i, WithdrawSlotRequest)]
    assert harness.attempt("source", 2) in withdrawn
    out = run(harness, 1)
    assert not [i for i in out if isinstance(i, ReleaseSlot)]
    assert deployed(out) == [(3, SLOT)]  # 2 holds the slot now; 3 waits behind it
    run(harness, 2)
    run(harness, 3)
    assert harness.scheduler.status is JobStatus.FINISHED
    assert [i.slot for i in harness.logged(ReleaseSlot)] == [SLOT]  # given back once


def test_nothing_is_deployed_ahead_behind_long_tasks() -> None:
    harness = one_slot(sources(3), ahead=0.5)
    out = run(harness, 0)
    assert deployed(out) == [(1, SLOT)]


def test_a_queued_attempt_that_fails_before_its_turn_leaves_the_slot_to_its_holder() -> None:
    harness = one_slot(sources(3), restart=FixedDelay(attempts=3, delay=1.0))
    run(harness, 0)
    out = harness.report(harness.attempt("source", 2), S.FAILED,
                         failure=TaskFailure("DeploymentFailed", "refused"))
    assert not [i for i in out if isinstance(i, ReleaseSlot)]
    out = run(harness, 1)
    assert [i.slot for i in out if isinstance(i, ReleaseSlot)] == [SLOT]


def test_a_lost_taskmanager_fails_the_holder_and_the_queued_attempt() -> None:
    harness = one_slot(word_count(sources=3, reducers=1),
                       restart=FixedDelay(attempts=1, delay=1.0))
    run(harness, 0)
    out = harness.lose("tm-1")
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    assert restart.subtasks == ("source#1", "source#2")
    assert harness.state("source", 1) is S.FAILED and harness.state("source", 2) is S.FAILED


def test_cancelling_the_job_cancels_the_queued_attempt_and_gives_the_slot_back_once() -> None:
    harness = one_slot(sources(4))
    run(harness, 0)
    harness.cancel()
    for subtask in (2, 1):  # the queued one confirms first
        harness.report(harness.attempt("source", subtask), S.CANCELED)
    assert harness.scheduler.status is JobStatus.CANCELED
    assert [i.slot for i in harness.logged(ReleaseSlot)] == [SLOT]


def test_a_job_of_many_subtasks_on_two_slots_finishes_each_subtask_once() -> None:
    harness = Harness(sources(40), slots={"tm-1": 2}, deploy_ahead=SHORT)
    harness.start()
    harness.grant_slots()
    harness.run_to_end(rounds=100)
    assert harness.scheduler.status is JobStatus.FINISHED
    assert all(len(s.attempts) == 1 and s.current.state is S.FINISHED
               for s in harness.graph.subtasks())


def test_behind_the_shortest_tasks_a_slot_queues_as_many_as_cover_a_round_trip() -> None:
    from clusterdeck.core.executiongraph.tasktimes import TaskTimes
    most = TaskTimes.MOST_AHEAD
    harness = one_slot(sources(most + 12))
    harness.tick = lambda seconds=0.001: setattr(harness, "now", harness.now + seconds) \
        or harness.now  # a millisecond per step: tasks of a millisecond or two
    out = run(harness, 0)
    # subtask 1 takes the slot, 2..33 wait behind it, in order, on the slot's TaskManager
    assert deployed(out) == [(n, SLOT) for n in range(1, 2 + most)]
    out = run(harness, 1)
    assert deployed(out) == [(2 + most, SLOT)]  # 2 holds the slot; the queue is topped up
    for subtask in range(2, most + 12):
        run(harness, subtask)
    assert harness.scheduler.status is JobStatus.FINISHED
    assert [i.slot for i in harness.logged(ReleaseSlot)] == [SLOT]  # given back once


def test_a_lost_taskmanager_fails_every_attempt_queued_on_it() -> None:
    harness = one_slot(sources(12), restart=FixedDelay(1, 1.0))
    harness.tick = lambda seconds=0.001: setattr(harness, "now", harness.now + seconds) \
        or harness.now
    run(harness, 0)
    queued = [harness.attempt("source", n) for n in range(2, 10)]
    harness.lose("tm-1")
    assert all(harness.state("source", n) is S.FAILED or
               harness.attempt("source", n) not in queued for n in range(2, 10))
    assert {harness.scheduler.graph.subtask("source", n).attempts[0].state
            for n in range(1, 10)} == {S.FAILED}


def test_how_many_wait_behind_a_task_follows_its_typical_time() -> None:
    from clusterdeck.core.executiongraph.tasktimes import TaskTimes
    times = TaskTimes()
    assert times.ahead("v") == 1  # nothing finished yet
    times._seconds["v"] = 0.001
    assert times.ahead("v") == TaskTimes.MOST_AHEAD
    times._seconds["v"] = 0.02
    assert times.ahead("v") == 5  # 100 ms of them
    times._seconds["v"] = 0.5
    assert times.ahead("v") == 1
