"""Recovery after a JobManager restart: restored finished subtasks, epochs, stale attempts."""

import pytest

from clusterdeck.core.executiongraph import (
    AllocateSlot,
    DeployTask,
    ExecutionGraph,
    FinishedSubtask,
    FixedDelay,
    IllegalTransition,
    InputSplitAssigner,
    JobFinished,
    JobStatus,
    JobStatusChanged,
    NewAttempt,
    Rejected,
    ScheduleOrUpdateConsumers,
    ScheduleRestart,
    attempt_id_of,
    epoch_of,
)
from clusterdeck.core.executiongraph import ExecutionState as S
from clusterdeck.core.protocol.jobgraph import InputSplit
from tests.unit.core.executiongraph.helpers import (
    JOB_ID,
    Harness,
    through_the_wire,
    word_count,
)


def source_splits(count: int) -> InputSplitAssigner:
    return InputSplitAssigner({"source": [
        InputSplit(split_id=i, vertex_id="source", path=f"/data/part-{i}.txt")
        for i in range(count)]})


def finished(vertex_id: str, subtask: int, attempt: int = 0, epoch: int = 0,
             splits: tuple[int, ...] = (), result: object = None) -> FinishedSubtask:
    return FinishedSubtask(vertex_id, subtask, attempt_id_of(JOB_ID, vertex_id, subtask,
                                                             attempt, epoch),
                           attempt, result, splits)


def recovered(records: list[FinishedSubtask], sources: int = 3, reducers: int = 2,
              splits: int = 6, **options) -> Harness:
    """A word count in epoch 1 whose first run finished ``records``."""
    harness = Harness(word_count(sources, reducers), splits=source_splits(splits), epoch=1,
                      **options)
    harness.scheduler.restore_finished(records)
    return harness


def take_every_split(harness: Harness, attempt_id: str) -> list[int]:
    taken = []
    while (split := harness.scheduler.request_split(attempt_id, host=None)[0].split):
        taken.append(split.split_id)
    return taken


# -- restoring finished subtasks -----------------------------------------------------------

def test_a_restored_subtask_is_finished_with_the_restored_attempt_as_current():
    harness = recovered([finished("source", 0, attempt=2, splits=(0, 3), result="r0")])

    current = harness.graph.subtask("source", 0).current
    assert (current.attempt_id, current.attempt, current.state) == (
        "job-1/source#0/a2", 2, S.FINISHED)
    assert current.result == "r0" and current.restored
    assert [split.split_id for split in current.input_splits] == [0, 3]
    assert harness.graph.execution("job-1/source#0/a2") is current
    assert harness.graph.execution("job-1/source#0/e1a0") is None


def test_a_recovered_word_count_runs_only_the_unfinished_source_on_the_splits_left_over():
    harness = recovered([finished("source", 0, splits=(0, 3), result="r0"),
                         finished("source", 1, splits=(1, 4), result="r1")])

    harness.start()

    assert [r.attempt_id for r in harness.logged(AllocateSlot)] == ["job-1/source#2/e1a0"]
    assert [harness.state("reduce", i) for i in range(2)] == [S.CREATED, S.CREATED]
    harness.grant_slots()
    assert take_every_split(harness, harness.attempt("source", 2)) == [2, 5]
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    reduce_inputs = [d.inputs[0].partitions for d in harness.logged(DeployTask)
                     if d.vertex_id == "reduce"]
    assert [[p.producer_attempt_id for p in refs] for refs in reduce_inputs] == [
        ["job-1/source#0/a0", "job-1/source#1/a0", "job-1/source#2/e1a0"]] * 2
    assert harness.scheduler.splits.kept("source") == {i: 1 for i in range(6)}
    (done,) = harness.logged(JobFinished)
    assert (done.results["source#0"], done.results["source#1"]) == ("r0", "r1")


def test_splits_a_source_held_without_finishing_are_handed_out_again():
    harness = recovered([finished("source", 0, splits=(0,)), finished("source", 1, splits=(1,))],
                        splits=4)
    harness.start()
    harness.grant_slots()

    assert [s.split_id for s in harness.scheduler.splits.remaining("source")] == [2, 3]


def test_a_restored_job_whose_consumer_has_nothing_restored_reruns_the_consumer_only():
    harness = recovered([finished("source", i, splits=(i, i + 3)) for i in range(3)])

    out = harness.start()

    assert ScheduleOrUpdateConsumers("reduce", ("source",)) in out
    assert [r.attempt_id for r in harness.logged(AllocateSlot)] == [
        "job-1/reduce#0/e1a0", "job-1/reduce#1/e1a0"]
    harness.run_to_end()
    assert harness.scheduler.status is JobStatus.FINISHED
    assert {d.vertex_id for d in harness.logged(DeployTask)} == {"reduce"}


def test_a_consumer_with_some_subtasks_restored_reruns_only_the_others():
    harness = recovered([*(finished("source", i, splits=(i, i + 3)) for i in range(3)),
                         finished("reduce", 0, result="counts")])

    harness.start()
    harness.run_to_end()

    assert [d.attempt_id for d in harness.logged(DeployTask)] == ["job-1/reduce#1/e1a0"]
    assert harness.logged(JobFinished)[0].results == {"reduce#0": "counts"}


def test_a_job_restored_complete_finishes_at_once_with_the_restored_results():
    harness = recovered([*(finished("source", i, result=f"s{i}") for i in range(3)),
                         *(finished("reduce", i, result=f"r{i}") for i in range(2))])

    out = harness.start()

    assert [i.new for i in out if isinstance(i, JobStatusChanged)] == [
        JobStatus.RUNNING, JobStatus.FINISHED]
    assert out[-1] == JobFinished(0.0, {"source#0": "s0", "source#1": "s1", "source#2": "s2",
                                        "reduce#0": "r0", "reduce#1": "r1"})
    assert harness.logged(AllocateSlot) == []


def test_progress_counts_restored_subtasks_as_finished():
    harness = recovered([finished("source", 0), finished("source", 1)])

    assert harness.graph.progress() == (2, 5)


def test_the_snapshot_shows_the_epoch_and_which_attempts_were_restored():
    harness = recovered([finished("source", 0)])

    snapshot = through_the_wire(harness.graph.snapshot())

    assert snapshot.epoch == 1
    sources = snapshot.vertices[0].subtasks
    assert [s.attempts[0].restored for s in sources] == [True, False, False]
    assert sources[1].attempt_id == "job-1/source#1/e1a0"


def test_a_new_attempt_after_a_failure_continues_the_numbering_in_the_new_epoch():
    harness = recovered([finished("source", 0), finished("source", 1)], splits=0,
                        restart=FixedDelay(1, 0.0))
    harness.start()
    harness.grant_slots()
    out = harness.report(harness.attempt("source", 2), S.FAILED)

    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    out = harness.restart_due(restart.due)

    assert [i.attempt_id for i in out if isinstance(i, NewAttempt)] == ["job-1/source#2/e1a1"]


def test_cancelling_a_restored_job_before_it_starts_cancels_only_what_did_not_finish():
    harness = recovered([finished("source", 0)])

    harness.cancel()

    assert harness.scheduler.status is JobStatus.CANCELED
    assert harness.state("source", 0) is S.FINISHED
    assert harness.state("source", 1) is S.CANCELED


def test_restoring_after_the_job_started_is_refused():
    harness = Harness(word_count(), epoch=1)
    harness.start()

    with pytest.raises(IllegalTransition):
        harness.scheduler.restore_finished([finished("source", 0)])


@pytest.mark.parametrize(("record", "complaint"), [
    (finished("sink", 0), "no vertex"),
    (finished("source", 7), "no subtask"),
    (FinishedSubtask("source", 0, "job-1/source#1/a0", 0), "not attempt 0 of source#0"),
    (FinishedSubtask("source", 0, "job-9/source#0/a0", 0), "not attempt 0"),
    (finished("source", 0, epoch=1), "epoch 1 is not before"),
    (finished("source", 0, splits=(99,)), "split 99"),
])
def test_a_record_that_does_not_fit_the_job_is_refused(record, complaint):
    harness = Harness(word_count(), splits=source_splits(6), epoch=1)

    with pytest.raises(ValueError, match=complaint):
        harness.scheduler.restore_finished([record])


def test_a_refused_batch_of_records_changes_nothing():
    harness = Harness(word_count(), splits=source_splits(6), epoch=1)
    before = harness.graph.snapshot()

    with pytest.raises(ValueError, match="consumed twice"):
        harness.scheduler.restore_finished([finished("source", 0, splits=(0, 1)),
                                            finished("source", 1, splits=(1,))])
    with pytest.raises(ValueError, match="restored twice"):
        harness.scheduler.restore_finished([finished("source", 0), finished("source", 0)])

    assert harness.graph.snapshot() == before
    assert len(harness.scheduler.splits.remaining("source")) == 6


# -- epochs --------------------------------------------------------------------------------

def test_epoch_zero_keeps_the_short_attempt_id():
    assert ExecutionGraph(word_count(), JOB_ID).subtask("source", 0).current.attempt_id == (
        "job-1/source#0/a0")


def test_attempt_ids_of_a_later_epoch_carry_it_and_differ_from_every_earlier_one():
    ids = [{e.attempt_id for e in ExecutionGraph(word_count(), JOB_ID, epoch=epoch)
            .current_executions()} for epoch in range(3)]

    assert "job-1/reduce#1/e2a0" in ids[2]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])


def test_the_epoch_is_read_back_from_an_attempt_id():
    assert [epoch_of("job-1/source#0/a3"), epoch_of("job-1/source#0/e4a3"),
            epoch_of("job-1/source#0")] == [0, 4, None]


def test_a_negative_epoch_is_refused():
    with pytest.raises(ValueError, match="epoch"):
        ExecutionGraph(word_count(), JOB_ID, epoch=-1)


def test_a_stale_update_from_an_attempt_of_an_earlier_epoch_is_rejected():
    harness = recovered([finished("source", 0)])
    harness.start()
    harness.grant_slots()
    before = harness.graph.snapshot()

    (rejected,) = harness.report("job-1/source#1/a0", S.FINISHED)

    assert isinstance(rejected, Rejected)
    assert rejected.reason == ("stale attempt job-1/source#1/a0: from epoch 0, the job now "
                               "runs epoch 1")
    assert harness.graph.snapshot() == before


def test_a_repeated_finished_from_a_restored_attempt_changes_nothing_and_a_failure_is_refused():
    harness = recovered([finished("source", 0)])
    harness.start()

    assert harness.report("job-1/source#0/a0", S.FINISHED) == []
    (rejected,) = harness.report("job-1/source#0/a0", S.FAILED)
    assert isinstance(rejected, Rejected)
    assert harness.state("source", 0) is S.FINISHED and harness.graph.failures == []
