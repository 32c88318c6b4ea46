"""A streaming job's scheduling: every subtask at once, deployed together once each holds
a slot (so a consumer is deployed knowing where its producers run), and a failure
restarts everything connected to it, finished producers too."""

from clusterdeck.core.executiongraph import DeployTask, FixedDelay, JobStatus, ReleaseSlot, SlotRef
from clusterdeck.core.executiongraph import ExecutionState as S
from clusterdeck.core.protocol.jobgraph import JobEdge, JobGraph, JobKind, ShipStrategy
from tests.unit.core.executiongraph.helpers import Harness, vertex


def windowed(sources: int = 2, windows: int = 2) -> JobGraph:
    return JobGraph(name="window-count", kind=JobKind.STREAMING,
                    vertices=(vertex("source", sources, "source.rate", "map"),
                              vertex("window", windows, "window.count", "sink.text")),
                    edges=(JobEdge("source", "window", ShipStrategy.HASH),))


def test_every_subtask_asks_for_a_slot_at_once():
    harness = Harness(windowed(), pipelined=True)
    harness.start()
    assert len(harness.slot_requests) == 4
    assert {harness.state(v, i) for v in ("source", "window") for i in range(2)} == {S.SCHEDULED}


def test_nothing_is_deployed_until_every_subtask_holds_a_slot():
    harness = Harness(windowed(), pipelined=True, slots={"tm-1": 2, "tm-2": 1})
    harness.start()
    harness.grant_slots()
    assert harness.logged(DeployTask) == []  # three slots for four subtasks: all wait
    harness.free_slots.append(SlotRef("tm-3", 0))
    harness.grant_slots()
    deployed = harness.logged(DeployTask)
    assert len(deployed) == 4
    assert {d.slot.taskmanager_id for d in deployed} == {"tm-1", "tm-2", "tm-3"}
    assert all(harness.graph.execution(d.attempt_id).slot == d.slot for d in deployed)


def test_a_failed_consumer_restarts_its_producers_even_finished_ones():
    harness = Harness(windowed(), FixedDelay(3, 0.0), pipelined=True)
    harness.start()
    harness.grant_slots()
    for vertex_id in ("source", "window"):
        for subtask in range(2):
            harness.report(harness.attempt(vertex_id, subtask), S.RUNNING)
    harness.report(harness.attempt("source", 0), S.FINISHED)  # a counted source ended
    failed = harness.attempt("window", 1)
    harness.report(failed, "FAILED")
    for subtask in range(2):  # the cancelled ones confirm
        for vertex_id in ("source", "window"):
            if harness.state(vertex_id, subtask) is S.CANCELING:
                harness.report(harness.attempt(vertex_id, subtask), S.CANCELED)
    harness.feed(harness.scheduler.restart_due(harness.tick()))
    assert {harness.attempt(v, i).rsplit("/", 1)[-1] for v in ("source", "window")
            for i in range(2)} == {"a1"}  # all four: a new attempt each
    assert harness.logged(ReleaseSlot)


def test_a_streaming_job_without_exchanges_restarts_only_the_failed_subtask():
    job = JobGraph(name="rate", kind=JobKind.STREAMING,
                   vertices=(vertex("source", 2, "source.rate", "sink.text"),))
    harness = Harness(job, FixedDelay(3, 0.0), pipelined=True)
    harness.start()
    harness.grant_slots()
    for subtask in range(2):
        harness.report(harness.attempt("source", subtask), S.RUNNING)
    harness.report(harness.attempt("source", 1), "FAILED")
    harness.feed(harness.scheduler.restart_due(harness.tick()))
    assert harness.attempt("source", 0).endswith("a0")
    assert harness.attempt("source", 1).endswith("a1")


def test_a_streaming_job_without_enough_slots_fails_saying_so_after_the_timeout():
    harness = Harness(windowed(), pipelined=True, slots={"tm-1": 3})
    harness.start()
    harness.grant_slots()
    assert harness.feed(harness.scheduler.slots_overdue(harness.now + 10.0, 300.0)) == []
    harness.feed(harness.scheduler.slots_overdue(harness.now + 301.0, 300.0))
    assert harness.scheduler.status is JobStatus.FAILED
    cause = harness.graph.root_cause.failure
    assert cause.exception_type == "NoResourceAvailable"
    assert cause.message.startswith("1 of the job's 4 subtasks got no slot within 300 s")
    assert len(harness.free_slots) == 3  # the slots it held went back
