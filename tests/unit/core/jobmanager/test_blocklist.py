"""A job's blocklist: a TaskManager whose host failed an attempt (a full disk) gets none of
the job's new work for a while, from the ResourceManager's pool, from the job's own slots
or from offers made before the block, and gets it again when the block ends."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from clusterdeck.core.executiongraph import (
    CancelAttempt,
    DeployTask,
    JobStatus,
    ReleaseSlot,
    SlotRef,
)
from clusterdeck.core.executiongraph import ExecutionState as S
from clusterdeck.core.executiongraph.causes import CauseLinker
from clusterdeck.core.jobmanager.blocklist import Blocklist, vouched
from clusterdeck.core.jobmanager.jobslots import JobSlots
from clusterdeck.core.jobmanager.slotpool import PendingRequest, SlotPool
from clusterdeck.core.jobmanager.slotrequests import SlotRequestQueue
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.causes import CauseKind
from clusterdeck.core.protocol.failures import DISK_FULL, FailureRecord, TaskFailure
from tests.unit.core.executiongraph.helpers import Harness, word_count
from tests.unit.core.executiongraph.test_ahead import sources

FULL = "tm-full"
TIMEOUT = 60.0


class Call:
    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    """The JobMaster's ``schedule``, run by hand; ``due`` holds (delay, call)."""

    def __init__(self) -> None:
        self.due: list[tuple[float, Call]] = []

    def schedule(self, delay: float, fn: Callable[[], None]) -> Call:
        self.due.append((delay, Call(fn)))
        return self.due[-1][1]

    def run_all(self) -> None:
        due, self.due = self.due, []
        for _, call in due:
            if not call.cancelled:
                call.fn()


class Recorder:
    def __init__(self) -> None:
        self.blocked: list[tuple[FailureRecord, str]] = []
        self.changes = 0

    def told(self, failure: FailureRecord, summary: str, taskmanager_id: str) -> None:
        assert summary.startswith(f"TaskManager {taskmanager_id} blocked")
        self.blocked.append((failure, summary))

    def changed(self) -> None:
        self.changes += 1


def failure(exception_type: str = DISK_FULL, taskmanager_id: str | None = FULL,
            at: float = 1000.0, attempt: str = "job/source#0/a0") -> FailureRecord:
    return FailureRecord(attempt, "source", 0, 0, taskmanager_id,
                         TaskFailure(exception_type, f"TaskManager {taskmanager_id}'s work "
                                     "dir /w is full (0 bytes free)"), at)


def blocklist(timeout: float = TIMEOUT) -> tuple[Blocklist, Timers, Recorder]:
    timers, recorder = Timers(), Recorder()
    return Blocklist(timeout, timers.schedule, recorder.told, recorder.changed), timers, \
        recorder


# -- the blocklist ---------------------------------------------------------------------------

def test_a_full_disk_blocks_its_taskmanager_for_the_timeout_and_says_so() -> None:
    blocks, timers, recorder = blocklist()

    block, = blocks.failed(failure(at=1000.0))

    assert block.until == 1000.0 + TIMEOUT
    assert FULL in blocks and blocks.blocked() == (FULL,)
    assert [delay for delay, _ in timers.due] == [TIMEOUT]
    (_, summary), = recorder.blocked
    assert summary.startswith(f"TaskManager {FULL} blocked until 00:17:40 UTC")
    assert "DiskFull" in summary and "work dir /w is full" in summary
    assert recorder.changes == 1


def test_the_block_ends_with_its_timer() -> None:
    blocks, timers, recorder = blocklist()
    blocks.failed(failure())

    timers.run_all()

    assert FULL not in blocks and blocks.blocked() == ()
    assert recorder.changes == 2  # started, ended: the requests out go again each time


def test_the_blocks_of_a_job_that_ended_end_with_it_and_their_timers_are_cancelled() -> None:
    slots, blocks, timers, resource_manager = job_slots()
    blocks.failed(failure())

    slots.release_all()

    assert FULL not in blocks and [call.cancelled for _, call in timers.due] == [True]
    timers.run_all()
    slots.send()
    assert resource_manager.take() == ([], [])


def test_a_failure_of_the_tasks_own_does_not_block() -> None:
    blocks, timers, recorder = blocklist()

    assert blocks.failed(failure("ValueError")) == ()
    assert blocks.failed(None) == ()
    assert blocks.failed(failure(taskmanager_id=None)) == ()
    assert blocks.blocked() == () and not timers.due and not recorder.blocked


def test_a_timeout_of_zero_never_blocks() -> None:
    blocks, _, _ = blocklist(timeout=0.0)

    assert blocks.failed(failure()) == () and FULL not in blocks


def test_a_later_failure_makes_the_block_longer_and_the_first_timer_ends_nothing() -> None:
    blocks, timers, recorder = blocklist()
    blocks.failed(failure(at=1000.0))
    (_, first), = timers.due

    longer, = blocks.failed(failure(at=1030.0))
    first.fn()  # had it run before it was cancelled

    assert longer.until == 1030.0 + TIMEOUT and first.cancelled
    assert FULL in blocks and len(recorder.blocked) == 2 and recorder.changes == 1
    timers.due[-1][1].fn()
    assert FULL not in blocks


def test_a_siblings_failure_of_the_same_moment_makes_it_longer_untold() -> None:
    blocks, timers, recorder = blocklist()
    blocks.failed(failure(at=1000.0))

    longer, = blocks.failed(failure(at=1001.0, attempt="job/source#1/a0"))

    assert longer.until == 1001.0 + TIMEOUT
    assert len(timers.due) == 2 and len(recorder.blocked) == 1


def test_a_siblings_failure_heard_late_changes_nothing() -> None:
    blocks, timers, recorder = blocklist()
    blocks.failed(failure(at=1000.0))

    assert blocks.failed(failure(at=990.0, attempt="job/source#1/a0")) == ()
    assert len(timers.due) == 1 and len(recorder.blocked) == 1


def unreachable(reporter: str, *silent: str, at: float = 1000.0,
                exception_type: str = "PartitionNotFound") -> FailureRecord:
    """A consumer on ``reporter`` whose fetches from ``silent`` got no answer."""
    return FailureRecord("job/reduce#0/a0", "reduce", 0, 0, reporter, TaskFailure(
        exception_type, "result partition not found: ... did not answer",
        lost_producers=("job/source#0/a0",), unreachable=silent), at)


def test_a_producers_taskmanager_that_did_not_answer_a_fetch_is_blocked_not_the_consumers(
        ) -> None:
    blocks, _, recorder = blocklist()

    block, = blocks.failed(unreachable("tm-consumer", "tm-silent"))

    assert block.taskmanager_id == "tm-silent" and blocks.blocked() == ("tm-silent",)
    (_, summary), = recorder.blocked
    assert "PartitionNotFound (its data service did not answer tm-consumer)" in summary


def test_a_blocked_taskmanagers_word_against_another_blocks_nothing() -> None:
    """Two machines parted from each other: each one's consumers blame the other. The
    first blame blocks one; the blocked one's blame of the other would leave the job
    nowhere to run."""
    blocks, _, _ = blocklist()
    blocks.failed(unreachable("tm-a", "tm-b"))

    assert blocks.failed(unreachable("tm-b", "tm-a", at=1001.0)) == ()
    assert blocks.blocked() == ("tm-b",)


def test_the_jobmanager_that_got_no_answer_from_a_taskmanager_blocks_it() -> None:
    blocks, _, recorder = blocklist()

    block, = blocks.failed(unreachable("tm-silent", "tm-silent",
                                       exception_type="ResultNotFetched"))

    assert block.taskmanager_id == "tm-silent"
    assert "did not answer the JobManager" in recorder.blocked[0][1]


class Graph:
    """What ``vouched`` reads of an ExecutionGraph: attempts' hosts and the producer
    subtasks a subtask reads now."""

    def __init__(self, hosts: dict[str, str], reads_from: tuple[str, ...] = ()) -> None:
        self.hosts, self.reads_from = hosts, reads_from

    def execution(self, attempt_id: str) -> SimpleNamespace | None:
        host = self.hosts.get(attempt_id)
        return None if host is None else SimpleNamespace(
            taskmanager_id=host, vertex_id=attempt_id.split("#")[0], subtask=0)

    def subtask(self, vertex_id: str, subtask: int) -> tuple[str, int]:
        return vertex_id, subtask

    def producers_of(self, _subtask: object) -> list[SimpleNamespace]:
        return [SimpleNamespace(current=SimpleNamespace(taskmanager_id=host))
                for host in self.reads_from]


def test_a_failure_may_name_as_unreachable_only_its_lost_producers_hosts() -> None:
    graph = Graph({"job/source#0/a0": "tm-silent", "job/source#1/a0": "tm-other",
                   "job/reduce#0/a0": "tm-consumer"})
    reported = TaskFailure("PartitionNotFound", "m", lost_producers=("job/source#0/a0",),
                           unreachable=("tm-silent", "tm-innocent", "tm-silent"))

    kept = vouched(reported, graph, "job/reduce#0/a0")  # type: ignore[arg-type]

    assert kept is not None and kept.unreachable == ("tm-silent",)
    assert vouched(None, graph, "job/reduce#0/a0") is None  # type: ignore[arg-type]
    many = TaskFailure("PartitionNotFound", "m",
                       lost_producers=("job/source#0/a0", "job/source#1/a0"),
                       unreachable=(*(f"tm-{i}" for i in range(1000)), "tm-other"))
    assert vouched(many, graph, "x").unreachable == ("tm-other",)  # type: ignore[arg-type]


def test_a_stream_consumer_may_name_the_hosts_of_the_producers_it_reads_now() -> None:
    graph = Graph({"job/window#0/a1": "tm-consumer"}, reads_from=("tm-a", "tm-b"))
    reported = TaskFailure("ChannelError", "nothing served within 30 s",
                           unreachable=("tm-b", "tm-elsewhere"))

    kept = vouched(reported, graph, "job/window#0/a1")  # type: ignore[arg-type]

    assert kept is not None and kept.unreachable == ("tm-b",)


def test_the_block_goes_under_its_failure_in_the_chain_of_causes() -> None:
    causes = CauseLinker(lambda _attempt: FULL, "jobmanager", lambda _line: None)
    record = failure()
    causes.observe([], [record], None)

    causes.taskmanager_blocked(record, "TaskManager tm-full blocked until 00:17:40 UTC", FULL)

    chain = causes.chain()
    assert chain is not None
    failed, blocked = chain.events
    assert failed.kind is CauseKind.ATTEMPT_FAILED
    assert (blocked.kind, blocked.cause_id, blocked.taskmanager_id) == (
        CauseKind.TASKMANAGER_BLOCKED, failed.id, FULL)


def test_a_block_of_a_producers_taskmanager_names_it_not_the_consumers() -> None:
    causes = CauseLinker(lambda _attempt: "tm-consumer", "jobmanager", lambda _line: None)
    record = unreachable("tm-consumer", "tm-silent")
    causes.observe([], [record], None)

    causes.taskmanager_blocked(record, "TaskManager tm-silent blocked until ...", "tm-silent")

    chain = causes.chain()
    assert chain is not None and chain.events[-1].taskmanager_id == "tm-silent"


# -- the ResourceManager's pool --------------------------------------------------------------

def request(n: int, blocked: frozenset[str] = frozenset()) -> PendingRequest:
    return PendingRequest("job", f"alloc-{n}", "jobmaster.job", blocked)


def test_a_request_gets_no_slot_of_a_taskmanager_its_job_blocked() -> None:
    pool = SlotPool()
    pool.add_taskmanager(FULL, 4)
    pool.add_taskmanager("tm-ok", 1)
    pool.request(request(0, frozenset({FULL})))

    (made,) = pool.assign()

    assert made.slot.resource_id == "tm-ok"


def test_a_blocked_request_waits_while_a_younger_one_goes_on() -> None:
    pool = SlotPool()
    pool.add_taskmanager(FULL, 1)
    pool.request(request(0, frozenset({FULL})))
    pool.request(request(1))

    (made,) = pool.assign()

    assert (made.request.allocation_id, made.slot.resource_id) == ("alloc-1", FULL)
    assert pool.pending == 1


def test_a_request_asked_again_without_the_block_takes_the_slot_in_its_place() -> None:
    pool = SlotPool()
    pool.add_taskmanager(FULL, 1)
    pool.request(request(0, frozenset({FULL})))
    pool.request(request(1, frozenset({FULL})))
    assert pool.assign() == []

    pool.request(request(0))  # the block ended: the JobMaster sends its requests again
    pool.request(request(1))

    (made,) = pool.assign()
    assert made.request.allocation_id == "alloc-0"


# -- the job's slot requests -----------------------------------------------------------------

def test_an_offer_refused_sends_its_attempt_first_in_line_again() -> None:
    queue = SlotRequestQueue(limit=1)
    (first,) = queue.add("a0")
    assert queue.add("a1") == []

    (again,) = queue.again(first)

    assert again.startswith("a0/") and again != first
    assert queue.out_allocations() == [again] and queue.waiting == 1


class ResourceManager:
    def __init__(self) -> None:
        self.batches: list[p.SlotRequests] = []

    def slot_requests(self, batch: p.SlotRequests) -> None:
        self.batches.append(batch)

    def release_job_slots(self, _request: p.ReleaseJobSlots) -> None:
        pass

    def take(self) -> tuple[list[p.RequestSlot], list[p.FreeSlot]]:
        requests = [r for batch in self.batches for r in batch.requests]
        frees = [f for batch in self.batches for f in batch.frees]
        self.batches.clear()
        return requests, frees


def job_slots() -> tuple[JobSlots, Blocklist, Timers, ResourceManager]:
    timers, recorder, resource_manager = Timers(), Recorder(), ResourceManager()
    holder: list[JobSlots] = []
    blocks = Blocklist(TIMEOUT, timers.schedule, recorder.told,
                       lambda: holder[0].blocklist_changed())
    slots = JobSlots("job", "jobmaster.job", resource_manager,  # type: ignore[arg-type]
                     lambda _fn: None, blocks)
    holder.append(slots)
    return slots, blocks, timers, resource_manager


def offer(allocation_id: str, taskmanager_id: str) -> p.OfferSlot:
    return p.OfferSlot(allocation_id, taskmanager_id, f"taskexecutor.{taskmanager_id}",
                       "host", 0)


def test_requests_carry_the_blocklist_and_go_again_when_it_changes() -> None:
    slots, blocks, timers, resource_manager = job_slots()
    slots.request("job/source#0/a0")
    slots.send()
    (sent,), _ = resource_manager.take()
    assert sent.blocked == ()

    blocks.failed(failure())
    slots.send()
    (again,), _ = resource_manager.take()
    timers.run_all()
    slots.send()
    (after,), _ = resource_manager.take()

    assert again.allocation_id == sent.allocation_id and again.blocked == (FULL,)
    assert after.allocation_id == sent.allocation_id and after.blocked == ()


def test_an_offer_of_a_blocked_taskmanager_is_handed_back_and_asked_for_again() -> None:
    slots, blocks, _, resource_manager = job_slots()
    slots.request("job/source#0/a0")
    slots.send()
    (sent,), _ = resource_manager.take()
    blocks.failed(failure())
    slots.send()
    resource_manager.take()

    assert slots.offered(offer(sent.allocation_id, FULL)) is None
    slots.send()
    (asked,), (freed,) = resource_manager.take()

    assert freed.allocation_id == sent.allocation_id
    assert asked.allocation_id != sent.allocation_id and asked.blocked == (FULL,)
    assert not slots.knows(FULL)
    assert slots.offered(offer(asked.allocation_id, "tm-ok")) == SlotRef("tm-ok", 0)


# -- the scheduler ---------------------------------------------------------------------------

def test_a_slot_of_a_blocked_taskmanager_goes_back_rather_than_to_a_waiting_attempt() -> None:
    harness = Harness(word_count(sources=1, reducers=1), slots={FULL: 1},
                      avoid=frozenset({FULL}))
    harness.start()
    harness.grant_slots()

    out = harness.report(harness.attempt("source", 0), S.FINISHED)

    assert ReleaseSlot(SlotRef(FULL, 0)) in out
    assert not [d for d in out if isinstance(d, DeployTask)]
    assert harness.state("reduce", 0) is S.SCHEDULED


def test_attempts_sent_to_a_taskmanager_blocked_now_but_not_started_run_elsewhere() -> None:
    """Behind short tasks the slot of the full disk holds one attempt being deployed and
    one queued behind it when the block starts: both are cancelled there and run again on
    another TaskManager, counting no failure; its slot goes back."""
    avoid: set[str] = set()
    harness = Harness(sources(3), slots={FULL: 1}, deploy_ahead=10.0, avoid=avoid)
    harness.start()
    harness.grant_slots()
    harness.report(harness.attempt("source", 0), S.RUNNING)
    harness.report(harness.attempt("source", 0), S.FINISHED)
    unstarted = [harness.attempt("source", 1), harness.attempt("source", 2)]
    assert [harness.state("source", i) for i in (1, 2)] == [S.DEPLOYING, S.DEPLOYING]

    avoid.add(FULL)
    out = harness.feed(harness.scheduler.leave_avoided(harness.tick()))
    for attempt_id in unstarted:
        harness.report(attempt_id, S.CANCELED)

    assert sorted(c.attempt_id for c in out if isinstance(c, CancelAttempt)) == unstarted
    assert [r.slot for r in harness.logged(ReleaseSlot)] == [SlotRef(FULL, 0)]
    assert [harness.state("source", i) for i in (1, 2)] == [S.SCHEDULED, S.SCHEDULED]
    assert harness.graph.failures == []
    harness.free_slots.clear()
    harness.free_slots.append(SlotRef("tm-ok", 0))
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    assert {d.slot.taskmanager_id for d in harness.logged(DeployTask)
            if d.attempt_id not in unstarted and d.subtask} == {"tm-ok"}


def test_nothing_is_left_when_no_attempt_waits_to_start_on_a_blocked_taskmanager() -> None:
    harness = Harness(word_count(sources=1, reducers=1), slots={FULL: 1},
                      avoid=frozenset({FULL}))
    harness.start()
    harness.grant_slots()
    harness.report(harness.attempt("source", 0), S.RUNNING)

    assert harness.scheduler.leave_avoided(harness.tick()) == []
