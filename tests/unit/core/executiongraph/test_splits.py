"""Input splits: handed out one at a time, local first, and returned when an attempt fails."""

import pytest

from clusterdeck.core.executiongraph import (
    AssignSplit,
    DeployTask,
    FixedDelay,
    InputSplitAssigner,
    JobStatus,
    Rejected,
    ScheduleRestart,
)
from clusterdeck.core.executiongraph import ExecutionState as S
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.jobgraph import InputSplit
from tests.unit.core.executiongraph.helpers import Harness, word_count


def splits(count: int, hosts: dict[int, tuple[str, ...]] | None = None) -> list[InputSplit]:
    hosts = hosts or {}
    return [InputSplit(split_id=i, vertex_id="source", path=f"/data/part-{i}.txt",
                       hosts=hosts.get(i, ())) for i in range(count)]


def test_every_split_is_handed_out_once_and_then_none():
    assigner = InputSplitAssigner({"source": splits(3)})

    handed = [assigner.next_split("source", 0, host=None) for _ in range(4)]

    assert [s.split_id if s else None for s in handed] == [0, 1, 2, None]
    assert assigner.kept("source") == {0: 1, 1: 1, 2: 1}


def test_a_vertex_without_splits_gets_none():
    assert InputSplitAssigner().next_split("source", 0, host="a") is None


def test_a_split_stored_on_the_requesters_host_is_preferred():
    assigner = InputSplitAssigner({"source": splits(3, hosts={2: ("host-b",)})})

    assert assigner.next_split("source", 0, host="host-b").split_id == 2


def test_a_split_bound_to_another_host_is_never_handed_out_here():
    assigner = InputSplitAssigner({"source": splits(3, hosts={0: ("host-a",), 1: ("host-a",)})})

    assert assigner.next_split("source", 0, host="host-z").split_id == 2  # unbound
    assert assigner.next_split("source", 0, host="host-z") is None
    assert assigner.next_split("source", 0, host=None) is None
    assert [s.split_id for s in assigner.remaining("source")] == [0, 1]
    assert assigner.next_split("source", 1, host="host-a").split_id == 0


def test_returned_splits_go_back_to_the_pool_and_are_counted():
    assigner = InputSplitAssigner({"source": splits(3)})
    assigner.next_split("source", 0, host=None)
    assigner.next_split("source", 1, host=None)

    returned = assigner.return_splits("source", 0)

    assert [s.split_id for s in returned] == [0]
    assert [s.split_id for s in assigner.remaining("source")] == [0, 2]
    assert assigner.returned("source") == {0: 1}
    assert assigner.held_by("source", 0) == []
    assert [s.split_id for s in assigner.held_by("source", 1)] == [1]


def test_a_running_source_is_answered_with_its_next_split_and_the_attempt_remembers_it():
    harness = Harness(word_count(sources=1, reducers=1),
                      splits=InputSplitAssigner({"source": splits(2)}))
    harness.start()
    harness.grant_slots()
    attempt = harness.attempt("source", 0)

    answers = [harness.scheduler.request_split(attempt, host="tm-1") for _ in range(3)]

    assert [a[0].split.split_id if a[0].split else None for a in answers] == [0, 1, None]
    assert all(isinstance(a[0], AssignSplit) for a in answers)
    assert [s.split_id for s in harness.graph.execution(attempt).input_splits] == [0, 1]


def test_a_source_that_is_not_running_cannot_take_splits():
    harness = Harness(word_count(sources=1, reducers=1),
                      splits=InputSplitAssigner({"source": splits(2)}))
    harness.start()

    (rejected,) = harness.scheduler.request_split(harness.attempt("source", 0), host=None)

    assert isinstance(rejected, Rejected)
    assert len(harness.scheduler.splits.remaining("source")) == 2


def test_the_splits_of_a_failed_attempt_are_reassigned_and_each_is_kept_once():
    assigner = InputSplitAssigner({"source": splits(4)})
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(1, 1.0),
                      splits=assigner)
    harness.start()
    harness.grant_slots()
    first, second = harness.attempt("source", 0), harness.attempt("source", 1)
    harness.scheduler.request_split(first, host=None)   # split 0
    harness.scheduler.request_split(second, host=None)  # split 1
    harness.scheduler.request_split(first, host=None)   # split 2
    out = harness.report(first, S.FAILED)
    assert harness.graph.root_cause.input_splits == (0, 2)

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    harness.restart_due(restart.due)
    harness.grant_slots()
    rerun = harness.attempt("source", 0)
    taken = []
    while (answer := harness.scheduler.request_split(rerun, host=None)[0].split) is not None:
        taken.append(answer.split_id)
    harness.scheduler.request_split(second, host=None)
    harness.run_to_end()

    assert taken == [0, 2, 3]
    assert harness.scheduler.status is JobStatus.FINISHED
    assert assigner.kept("source") == {0: 1, 1: 1, 2: 1, 3: 1}
    assert assigner.handed_out("source") == {0: 2, 1: 1, 2: 2, 3: 1}


def test_a_replaced_attempt_cannot_take_more_splits():
    harness = Harness(word_count(sources=1, reducers=1), restart=FixedDelay(1, 0.0),
                      splits=InputSplitAssigner({"source": splits(2)}))
    harness.start()
    harness.grant_slots()
    old = harness.attempt("source", 0)
    (restart,) = [i for i in harness.report(old, S.FAILED) if isinstance(i, ScheduleRestart)]
    harness.restart_due(restart.due)

    (rejected,) = harness.scheduler.request_split(old, host=None)

    assert isinstance(rejected, Rejected) and "stale" in rejected.reason


def test_splits_a_restored_subtask_consumed_leave_the_pool_held_by_it_and_count_once():
    assigner = InputSplitAssigner({"source": splits(4)})

    taken = assigner.restore_consumed("source", 1, [3, 0])

    assert [s.split_id for s in taken] == [3, 0]
    assert [s.split_id for s in assigner.remaining("source")] == [1, 2]
    assert [s.split_id for s in assigner.held_by("source", 1)] == [3, 0]
    assert assigner.kept("source") == {0: 1, 3: 1}


def test_restoring_a_split_that_is_not_in_the_pool_is_refused_and_changes_nothing():
    assigner = InputSplitAssigner({"source": splits(2)})
    assigner.next_split("source", 0, host=None)  # split 0 is out

    with pytest.raises(ValueError, match="not in the pool"):
        assigner.restore_consumed("source", 1, [1, 0])
    with pytest.raises(ValueError, match="twice"):
        assigner.restore_consumed("source", 1, [1, 1])

    assert [s.split_id for s in assigner.remaining("source")] == [1]
    assert assigner.held_by("source", 1) == []


def test_a_source_finishing_with_splits_only_another_host_reads_fails_saying_where():
    assigner = InputSplitAssigner({"source": splits(3, hosts={1: ("host-a",)})})
    harness = Harness(word_count(sources=2, reducers=1), splits=assigner)
    harness.start()
    harness.grant_slots()
    first, second = harness.attempt("source", 0), harness.attempt("source", 1)
    while harness.scheduler.request_split(first, host="host-z")[0].split is not None:
        pass
    assert harness.scheduler.request_split(second, host="host-z")[0].split is None
    harness.report(first, S.FINISHED)  # another subtask may still run on host-a
    assert harness.graph.execution(first).state is S.FINISHED

    harness.report(second, S.FINISHED)

    assert harness.graph.execution(second).state is S.FAILED
    cause = harness.graph.root_cause
    assert cause.exception_type == "InputSplitUnreadable"
    assert "host-a" in cause.message and "/data/part-1.txt" in cause.message
    assert harness.scheduler.status is not JobStatus.FINISHED


def test_each_part_of_a_generated_input_goes_to_its_own_subtask():
    """A range cut into four parts: the first subtask to ask takes its own part only,
    however often it asks, and every other subtask then gets its own."""
    parts = [InputSplit(split_id=i, vertex_id="source", part=i, parts=4) for i in range(4)]
    assigner = InputSplitAssigner({"source": parts})

    first = [assigner.next_split("source", 0, host=None) for _ in range(3)]
    assert [s.part if s else None for s in first] == [0, None, None]
    assert [assigner.next_split("source", subtask, host=None).part
            for subtask in (3, 1, 2)] == [3, 1, 2]

    assigner.return_splits("source", 1)  # its attempt failed: the part waits for it
    assert assigner.next_split("source", 0, host=None) is None
    assert assigner.next_split("source", 1, host=None).part == 1


def test_a_generated_sources_part_goes_with_its_deployment_and_again_with_a_rerun():
    parts = [InputSplit(split_id=i, vertex_id="source", part=i, parts=3) for i in range(3)]
    harness = Harness(word_count(sources=3, reducers=1), restart=FixedDelay(1, 0.0),
                      splits=InputSplitAssigner({"source": parts}))
    harness.start()
    harness.grant_slots()

    deploys = {d.subtask: d for d in harness.logged(DeployTask) if d.vertex_id == "source"}
    assert {s: [x.part for x in d.splits] for s, d in deploys.items()} == {
        0: [0], 1: [1], 2: [2]}
    assert harness.scheduler.request_split(harness.attempt("source", 1), None) == [
        AssignSplit(harness.attempt("source", 1), None)]  # it has all of its input

    harness.report(harness.attempt("source", 1), S.FAILED,
                   failure=TaskFailure("ValueError", "boom"))
    harness.restart_due(harness.logged(ScheduleRestart)[0].due)
    harness.grant_slots()
    rerun = [d for d in harness.logged(DeployTask) if d.subtask == 1 and d.attempt == 1]
    assert [[x.part for x in d.splits] for d in rerun] == [[1]]


def test_a_file_sources_subtasks_pull_their_splits():
    harness = Harness(word_count(sources=2, reducers=1),
                      splits=InputSplitAssigner({"source": splits(4)}))
    harness.start()
    harness.grant_slots()

    assert [d.splits for d in harness.logged(DeployTask)] == [None, None]
