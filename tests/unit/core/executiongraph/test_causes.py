"""The chain of causes: the scheduler's events fed to the linker as the JobMaster feeds
them, and the tree that comes out."""

from __future__ import annotations

from dataclasses import replace

from clusterdeck.core.executiongraph import ExecutionState as S
from clusterdeck.core.executiongraph import FixedDelay, ScheduleRestart
from clusterdeck.core.executiongraph.causes import LATE_LOSS, CauseLinker
from clusterdeck.core.protocol.causes import (
    EVENTS_KEPT,
    SIBLINGS_KEPT,
    CarriedBy,
    CauseChain,
    CauseEvent,
    CauseKind,
    check_cause_chain,
)
from clusterdeck.core.protocol.failures import TASKMANAGER_LOST, TaskFailure
from tests.unit.core.executiongraph.helpers import Harness, through_the_wire, word_count


class Linked:
    """A harness whose events also go to a CauseLinker, with the message of each."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.notes: list[str] = []
        self.causes = CauseLinker(self._host_of, "jobmanager", self.notes.append)

    def _host_of(self, attempt_id: str) -> str | None:
        execution = self.harness.graph.execution(attempt_id)
        return execution.taskmanager_id if execution is not None else None

    def lose(self, taskmanager_id: str, cause: str = "process exited") -> list:
        harness = self.harness
        carried_by = CarriedBy("TaskManagerLost", "resourcemanager", harness.tick())
        self.causes.taskmanager_lost(taskmanager_id, cause, carried_by)
        out = harness.feed(harness.scheduler.taskmanager_lost(taskmanager_id, cause,
                                                              harness.now))
        self.causes.observe(out, harness.graph.failures, carried_by)
        return out

    def fail(self, attempt_id: str, failure: TaskFailure) -> list:
        sender = self._host_of(attempt_id) or "?"
        out = self.harness.report(attempt_id, S.FAILED, failure=failure)
        self.causes.observe(out, self.harness.graph.failures,
                            CarriedBy("UpdateTaskExecutionStates", sender, self.harness.now))
        return out

    def chain(self) -> CauseChain:
        chain = self.causes.chain()
        assert chain is not None
        check_cause_chain(chain)
        return chain


def running(harness: Harness) -> Linked:
    harness.start()
    harness.grant_slots()
    return Linked(harness)


def kinds_under(chain: CauseChain, event: CauseEvent) -> list[tuple[CauseKind, list]]:
    return [(child.kind, kinds_under(chain, child)) for child in chain.children(event.id)]


def test_a_lost_taskmanager_is_the_root_of_the_attempts_it_ran_and_their_restart() -> None:
    linked = running(Harness(word_count(sources=3, reducers=1), restart=FixedDelay(1, 1.0)))

    linked.lose("tm-1")

    chain = linked.chain()
    (root,) = chain.roots()
    assert root.kind is CauseKind.TASKMANAGER_LOST and root.taskmanager_id == "tm-1"
    assert root.carried_by == CarriedBy("TaskManagerLost", "resourcemanager", root.at)
    assert root.log_lines[0].process == "jobmanager"
    assert "TaskManager tm-1 lost: process exited" in root.log_lines[0].line
    failed = chain.children(root.id)
    assert [e.kind for e in failed] == [CauseKind.ATTEMPT_FAILED] * 2
    assert {e.attempt_id for e in failed} == {"job-1/source#0/a0", "job-1/source#1/a0"}
    assert kinds_under(chain, failed[0]) == [(CauseKind.REGION_RESTARTED, [])]
    assert "a region of 2 subtask(s) restarts in 1 s" in linked.notes
    assert linked.causes.root_failure().exception_type == TASKMANAGER_LOST


def test_a_failure_with_no_earlier_cause_is_a_root_with_its_task_log_as_evidence() -> None:
    linked = running(Harness(word_count(sources=1, reducers=1), restart=FixedDelay(1, 1.0)))
    source = linked.harness.attempt("source", 0)

    linked.fail(source, TaskFailure("ValueError", "bad record", log_excerpt=("a", "b")))

    (root,) = linked.chain().roots()
    assert (root.kind, root.attempt_id, root.summary) == (
        CauseKind.ATTEMPT_FAILED, source, "ValueError: bad record")
    assert root.carried_by.type == "UpdateTaskExecutionStates"
    assert root.carried_by.sender == "tm-1"
    assert [(line.process, line.line) for line in root.log_lines] == [("tm-1", "a"),
                                                                        ("tm-1", "b")]


def test_a_partition_not_found_heard_before_its_producers_loss_goes_under_the_loss() -> None:
    """Restart loops' side effect: the consumer's error comes first, the loss of the
    TaskManager that held the partitions after it; the loss is the job's root cause."""
    harness = Harness(word_count(sources=2, reducers=1), slots={"tm-1": 1, "tm-2": 2},
                      restart=FixedDelay(2, 1.0))
    linked = running(harness)
    harness.run_deployed()
    harness.grant_slots()
    consumer = harness.attempt("reduce", 0)
    harness.report(consumer, S.RUNNING)
    producer = harness.attempt("source", 0)
    assert linked._host_of(producer) == "tm-1"

    linked.fail(consumer, TaskFailure("PartitionNotFound", "result partition not found",
                                      lost_producers=(producer,)))
    assert [e.kind for e in linked.chain().roots()] == [CauseKind.ATTEMPT_FAILED]
    linked.lose("tm-1")

    chain = linked.chain()
    (root,) = chain.roots()
    assert root.kind is CauseKind.TASKMANAGER_LOST
    under = {e.attempt_id: e for e in chain.children(root.id)}
    assert under[consumer].summary.startswith("PartitionNotFound")
    assert kinds_under(chain, under[consumer]) == [(CauseKind.REGION_RESTARTED, [])]


def test_a_failure_naming_a_lost_taskmanager_goes_under_it_but_not_one_of_a_like_name() -> None:
    harness = Harness(word_count(sources=2, reducers=1), slots={"tm-1": 1, "tm-10": 2},
                      restart=FixedDelay(3, 1.0))
    linked = running(harness)
    harness.report(harness.attempt("source", 1), S.RUNNING)
    linked.lose("tm-1")
    peer = harness.attempt("source", 1)

    linked.fail(peer, TaskFailure("ChannelError", "the connection to a channel on tm-1 "
                                  "was lost"))
    loss = linked.chain().roots()[0]
    assert peer in {e.attempt_id for e in linked.chain().children(loss.id)}

    other = Linked(Harness(word_count(sources=2, reducers=1), slots={"tm-1": 1, "tm-10": 2},
                           restart=FixedDelay(3, 1.0)))
    other.harness.start()
    other.harness.grant_slots()
    other.lose("tm-1")
    other.fail(other.harness.attempt("source", 1),
               TaskFailure("ChannelError", "lost the channel on tm-10"))
    assert len(other.chain().roots()) == 2


def test_a_failure_long_before_a_loss_stays_a_root_cause_of_its_own() -> None:
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(3, 1.0))
    linked = running(harness)
    linked.fail(harness.attempt("source", 1), TaskFailure("ChannelError", "peer tm-1 gone"))
    harness.tick(LATE_LOSS + 1)

    linked.lose("tm-1")

    assert [e.kind for e in linked.chain().roots()] == [CauseKind.ATTEMPT_FAILED,
                                                        CauseKind.TASKMANAGER_LOST]


def test_a_checkpoint_aborted_by_a_failover_goes_under_its_restart_and_so_does_the_restore(
        ) -> None:
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(1, 1.0),
                      pipelined=True)
    linked = running(harness)
    out = linked.lose("tm-1")
    failed = next(i.attempt_id for i in out if getattr(i, "new", None) is S.FAILED)
    linked.causes.checkpoints_aborted((7,), failed, f"{failed} is FAILED", harness.now, None)
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    for member in restart.subtasks:
        vertex_id, _, index = member.partition("#")
        linked.causes.restored(vertex_id, int(index), 6, restart.due, None)

    chain = linked.chain()
    (root,) = chain.roots()
    restarted = next(e for e in chain.events if e.kind is CauseKind.REGION_RESTARTED)
    assert kinds_under(chain, restarted) == [(CauseKind.CHECKPOINT_ABORTED, []),
                                             (CauseKind.RESTORED, [])]
    restore = chain.children(restarted.id)[1]
    assert restore.checkpoint_id == 6 and restore.more == len(restart.subtasks) - 1
    assert restore.summary == f"{len(restart.subtasks)} subtask(s) restored from checkpoint 6"
    assert chain.children(restarted.id)[0].summary.startswith("checkpoint 7 aborted")
    assert restarted.cause_id in {e.id for e in chain.children(root.id)}


def test_giving_up_is_an_event_under_the_failure_that_ended_the_job() -> None:
    linked = running(Harness(word_count(sources=1, reducers=1)))  # no restart
    linked.fail(linked.harness.attempt("source", 0), TaskFailure("ValueError", "bad"))

    chain = linked.chain()
    (root,) = chain.roots()
    assert kinds_under(chain, root) == [(CauseKind.JOB_FAILED, [])]


def test_a_chain_stays_bounded_keeps_the_first_tree_and_counts_what_it_left_out() -> None:
    harness = Harness(word_count(sources=1, reducers=1),
                      restart=FixedDelay(EVENTS_KEPT * 2, 0.0))
    linked = running(harness)
    first = harness.attempt("source", 0)
    for _ in range(EVENTS_KEPT):
        linked.fail(harness.attempt("source", 0), TaskFailure("ValueError", "again"))
        (restart,) = [i for i in harness.log if isinstance(i, ScheduleRestart)][-1:]
        harness.restart_due(restart.due)
        harness.grant_slots()

    chain = linked.chain()
    assert len(chain.events) <= EVENTS_KEPT and chain.dropped > 0
    assert chain.events[0].attempt_id == first
    assert through_the_wire(replace(harness.graph.snapshot(), causes=chain)).causes == chain


def test_past_a_few_failures_under_one_cause_the_rest_are_counted() -> None:
    sources = SIBLINGS_KEPT + 3
    harness = Harness(word_count(sources=sources, reducers=1), slots={"tm-1": sources},
                      restart=FixedDelay(1, 1.0))
    linked = running(harness)

    linked.lose("tm-1")

    chain = linked.chain()
    failed = chain.children(chain.roots()[0].id)
    assert len(failed) == SIBLINGS_KEPT
    assert failed[-1].more == 3
    assert kinds_under(chain, failed[0]) == [(CauseKind.REGION_RESTARTED, [])]
