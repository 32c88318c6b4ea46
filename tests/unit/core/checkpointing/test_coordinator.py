"""The checkpoint coordinator: when it triggers, who must acknowledge, how a checkpoint
completes or fails, and when too many failures fail the job. Pure: time is given."""

from __future__ import annotations

import pytest

from clusterdeck.core.checkpointing import (
    CheckpointCoordinator,
    CheckpointingMode,
    CheckpointOptions,
    CheckpointStatus,
    CheckpointTask,
    CompletedCheckpoint,
    CompletedCheckpointStore,
    StateHandle,
    SubtaskAck,
)
from clusterdeck.core.checkpointing.instructions import (
    CheckpointAborted,
    CheckpointCompleted,
    CheckpointSkipped,
    DiscardCheckpoints,
    DiscardStates,
    FailJob,
    TriggerCheckpoint,
)

TASKS = (CheckpointTask("source#0", "a-s0", source=True),
         CheckpointTask("source#1", "a-s1", source=True),
         CheckpointTask("sink#0", "a-k0"))


def handle(name: str, size: int = 10) -> StateHandle:
    return StateHandle(f"chk-1/{name}.state", size, "0" * 64)


def ack(name: str, size: int = 10, alignment: float = 0.0) -> SubtaskAck:
    return SubtaskAck(handle(name, size), alignment)


def coordinator(**options) -> CheckpointCoordinator:
    return CheckpointCoordinator("job-1", CheckpointOptions(**{"interval": 10.0, **options}),
                                 now=100.0)


def acknowledge_all(c: CheckpointCoordinator, checkpoint_id: int, now: float) -> list:
    out: list = []
    for task in TASKS:
        out += c.acknowledge(checkpoint_id, task.subtask_id, task.attempt_id,
                             ack(task.subtask_id), now)
    return out


def test_the_first_checkpoint_is_due_an_interval_after_the_start_and_goes_to_the_sources():
    c = coordinator()
    assert c.next_trigger() == 110.0
    assert c.trigger(110.0, TASKS) == [TriggerCheckpoint(1, 110.0, CheckpointingMode.EXACTLY_ONCE,
                                                         ("a-s0", "a-s1"))]
    assert c.in_progress == 1 and c.next_trigger() is None and c.expires() == 710.0


def test_checkpointing_off_is_never_due():
    assert CheckpointCoordinator("job-1", CheckpointOptions(), now=0.0).next_trigger() is None


def test_a_checkpoint_completes_when_every_task_acknowledged_and_sinks_are_told():
    c = coordinator()
    c.trigger(110.0, TASKS)
    assert c.acknowledge(1, "source#0", "a-s0", ack("source#0"), 110.5) == []
    assert c.acknowledge(1, "source#1", "a-s1", ack("source#1"), 110.6) == []
    done = c.acknowledge(1, "sink#0", "a-k0", SubtaskAck(None, alignment=0.25), 111.0)
    expected = CompletedCheckpoint("job-1", 1, 110.0, 111.0, {
        "source#0": handle("source#0"), "source#1": handle("source#1")})
    assert done == [CheckpointCompleted(expected, ("a-s0", "a-s1", "a-k0"))]
    assert c.latest() == expected and c.in_progress is None
    record = c.history()[-1]
    assert (record.status, record.acknowledged, record.expected, record.size,
            record.alignment, record.duration) == (CheckpointStatus.COMPLETED, 3, 3, 20,
                                                   0.25, 1.0)
    assert c.next_trigger() == 120.0  # an interval after the trigger


def test_min_pause_counts_from_the_end_of_the_previous_checkpoint():
    c = coordinator(min_pause=8.0)
    c.trigger(110.0, TASKS)
    acknowledge_all(c, 1, 115.0)
    assert c.next_trigger() == 123.0


def test_one_checkpoint_at_a_time_and_only_when_every_task_runs():
    c = coordinator()
    waiting = (*TASKS[:2], CheckpointTask("sink#0", "a-k0", running=False))
    assert c.trigger(110.0, waiting) == [
        CheckpointSkipped("not every task is running (sink#0 not)")]
    assert c.in_progress is None and c.next_trigger() == 120.0  # tried again an interval on
    c.trigger(120.0, TASKS)
    assert c.trigger(125.0, TASKS) == [CheckpointSkipped("checkpoint 1 is still in progress")]
    assert c.trigger(126.0, TASKS[2:]) == [CheckpointSkipped(
        "checkpoint 1 is still in progress")]


def test_a_job_without_sources_cannot_checkpoint():
    assert coordinator().trigger(110.0, TASKS[2:]) == [
        CheckpointSkipped("the job has no source task to start barriers")]


def test_acknowledgements_of_no_pending_checkpoint_have_their_state_discarded():
    c = coordinator()
    c.trigger(110.0, TASKS)
    late = ack("source#0")
    assert c.acknowledge(7, "source#0", "a-s0", late, 111.0) == [DiscardStates((late.state,))]
    assert c.acknowledge(1, "source#0", "an-old-attempt", late, 111.0) == [
        DiscardStates((late.state,))]
    assert c.acknowledge(1, "nobody#3", "a-x", SubtaskAck(), 111.0) == []
    assert c.history()[-1].acknowledged == 0


def test_a_resent_acknowledgement_counts_once():
    c = coordinator()
    c.trigger(110.0, TASKS)
    first = ack("source#0")
    c.acknowledge(1, "source#0", "a-s0", first, 110.5)
    assert c.acknowledge(1, "source#0", "a-s0", first, 110.6) == []
    other = SubtaskAck(StateHandle("chk-1/source%230.state.2", 3, "1" * 64))
    assert c.acknowledge(1, "source#0", "a-s0", other, 110.7) == [DiscardStates((other.state,))]
    assert c.history()[-1].acknowledged == 1


def test_a_decline_aborts_the_checkpoint_discards_what_was_acknowledged_and_fails_the_job():
    c = coordinator()  # tolerable_failures = 0: the first failed checkpoint fails the job
    c.trigger(110.0, TASKS)
    c.acknowledge(1, "source#0", "a-s0", ack("source#0"), 110.5)
    out = c.decline(1, "sink#0", "a-k0", "disk full", 111.0)
    assert out[:2] == [CheckpointAborted(1, "sink#0 declined: disk full", ("a-s0", "a-s1", "a-k0")),
                       DiscardStates((handle("source#0"),))]
    assert isinstance(out[2], FailJob)
    assert "tolerable-failed-checkpoints = 0" in out[2].reason
    assert "checkpoint 1 sink#0 declined: disk full" in out[2].reason
    assert c.history()[-1].status is CheckpointStatus.FAILED and c.latest() is None


def test_failures_are_tolerated_up_to_the_bound_and_a_completed_checkpoint_resets_the_count():
    c = coordinator(tolerable_failures=2, timeout=5.0)
    for now in (110.0, 120.0):
        c.trigger(now, TASKS)
        assert c.expire(now + 4.9) == []
        assert not any(isinstance(i, FailJob) for i in c.expire(now + 5.0))
    c.trigger(130.0, TASKS)
    assert acknowledge_all(c, 3, 131.0)[0].checkpoint.checkpoint_id == 3
    for now in (140.0, 150.0):
        c.trigger(now, TASKS)
        assert not any(isinstance(i, FailJob) for i in c.expire(now + 5.0))
    c.trigger(160.0, TASKS)
    out = c.expire(165.0)
    assert "expired after 5 s with 3 of 3 tasks not acknowledged" in out[0].reason
    assert isinstance(out[-1], FailJob) and out[-1].reason.startswith("3 checkpoints failed")


def test_a_failover_aborts_what_is_in_progress_without_counting_it():
    c = coordinator()
    c.trigger(110.0, TASKS)
    c.acknowledge(1, "source#0", "a-s0", ack("source#0"), 110.5)
    assert c.abort_in_progress(111.0, "the job fails over") == [
        CheckpointAborted(1, "the job fails over", ("a-s0", "a-s1", "a-k0")),
        DiscardStates((handle("source#0"),))]
    assert c.abort_in_progress(112.0, "again") == []


def test_a_replaced_attempt_is_never_told_of_a_checkpoint_after_its_replacement():
    """The sink's attempt a-k0 is replaced (its TaskManager was cut off and declared lost)
    by a-k1: what a-k0 acknowledges after the heal, of the aborted checkpoint or of the new
    one, counts for nothing, and only a-k1 hears that the new one completed (a sink
    commits only then: the stale attempt commits nothing)."""
    c = coordinator()
    c.trigger(110.0, TASKS)
    c.abort_in_progress(111.0, "a-k0 is FAILED")
    replaced = (*TASKS[:2], CheckpointTask("sink#0", "a-k1"))
    c.trigger(120.0, replaced)
    stale = ack("sink#0")
    assert c.acknowledge(1, "sink#0", "a-k0", stale, 121.0) == [DiscardStates((stale.state,))]
    assert c.acknowledge(2, "sink#0", "a-k0", stale, 121.0) == [DiscardStates((stale.state,))]
    out = []
    for task in replaced:
        out += c.acknowledge(2, task.subtask_id, task.attempt_id, ack(task.subtask_id), 122.0)
    (completed,) = [i for i in out if isinstance(i, CheckpointCompleted)]
    assert completed.notify == ("a-s0", "a-s1", "a-k1")


def test_a_task_finishing_before_it_acknowledged_aborts_the_checkpoint_uncounted():
    c = coordinator()   # no failure tolerated
    c.trigger(110.0, TASKS)
    c.acknowledge(1, "source#0", "a-s0", ack("source#0"), 110.5)
    assert c.task_finished("source#0", "a-s0", 110.6) == []   # it took part
    assert c.task_finished("source#1", "a-old", 110.6) == []  # not the attempt waited for
    assert c.task_finished("source#1", "a-s1", 110.7) == [
        CheckpointAborted(1, "source#1 finished before it took part", ("a-s0", "a-s1", "a-k0")),
        DiscardStates((handle("source#0"),))]
    assert c.in_progress is None and c.history()[-1].status is CheckpointStatus.ABORTED
    assert (c.failed_count, c.aborted_count) == (0, 1)
    assert c.trigger(120.0, TASKS[1:])[0] == TriggerCheckpoint(
        2, 120.0, CheckpointingMode.EXACTLY_ONCE, ("a-s1",))   # not failed: it goes on


def test_completed_checkpoints_beyond_the_retained_ones_are_discarded_newest_kept():
    c = coordinator(retained=2)
    discarded = []
    for checkpoint_id in (1, 2, 3, 4):
        c.trigger(100.0 + 10 * checkpoint_id, TASKS)
        out = acknowledge_all(c, checkpoint_id, 101.0 + 10 * checkpoint_id)
        discarded += [i.checkpoint_ids for i in out if isinstance(i, DiscardCheckpoints)]
    assert discarded == [(1,), (2,)]
    assert [k.checkpoint_id for k in c.store.all()] == [3, 4]


def test_after_a_jobmanager_failover_numbering_goes_on_from_the_recovered_checkpoints():
    recovered = [CompletedCheckpoint("job-1", n, 0.0, 1.0) for n in (7, 5, 6)]
    store = CompletedCheckpointStore(2, recovered)
    assert [k.checkpoint_id for k in store.recovered_surplus()] == [5]
    c = CheckpointCoordinator("job-1", CheckpointOptions(interval=1.0, retained=2), now=0.0,
                              store=store)
    assert c.latest().checkpoint_id == 7
    assert c.trigger(1.0, TASKS)[0].checkpoint_id == 8


def test_the_history_is_bounded():
    from clusterdeck.core.checkpointing.coordinator import HISTORY
    c = coordinator(tolerable_failures=10 ** 6, timeout=1.0)
    for n in range(HISTORY + 5):
        c.trigger(110.0 + 10 * n, TASKS)
        c.expire(111.0 + 10 * n)
    assert len(c.history()) == HISTORY and c.history()[-1].checkpoint_id == HISTORY + 5


@pytest.mark.parametrize("options", [dict(interval=-1.0), dict(interval=1.0, timeout=0.0),
                                     dict(tolerable_failures=-1), dict(retained=0)])
def test_options_that_make_no_sense_are_refused(options):
    with pytest.raises(ValueError):
        CheckpointOptions(**options).checked()


def test_a_finished_tasks_last_state_is_carried_into_later_checkpoints_and_kept_on_disk(
        tmp_path):
    from clusterdeck.core.checkpointing import CheckpointStorage
    storage = CheckpointStorage(tmp_path)
    c = coordinator()
    c.trigger(110.0, TASKS)
    for task in TASKS:
        state = storage.write_state("job-1", 1, task.subtask_id, b"{}")
        c.acknowledge(1, task.subtask_id, task.attempt_id, SubtaskAck(state), 111.0)
    storage.commit(c.latest())
    running = TASKS[1:]  # source#0 finished after checkpoint 1: it takes part no more
    c.trigger(121.0, running)
    out = []
    for task in running:
        state = storage.write_state("job-1", 2, task.subtask_id, b"{}")
        out += c.acknowledge(2, task.subtask_id, task.attempt_id, SubtaskAck(state), 122.0)
    latest = c.latest()
    assert latest.states["source#0"].path == "chk-1/source%230.state"
    discard = next(i for i in out if isinstance(i, DiscardCheckpoints))
    assert discard.checkpoint_ids == (1,) and "chk-1/source%230.state" in discard.keep
    storage.discard("job-1", discard.checkpoint_ids, discard.keep)
    assert storage.read_state("job-1", latest.states["source#0"]) == b"{}"
    assert sorted(p.name for p in (tmp_path / "job-1" / "chk-1").iterdir()) == [
        "source%230.state"]  # the rest went, its metadata too: it is no checkpoint now
    assert [c.checkpoint_id for c in storage.completed("job-1")[0]] == []  # 2 not committed here
