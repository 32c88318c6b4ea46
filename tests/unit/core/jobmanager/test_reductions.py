"""A large job's snapshot is reduced to fit in one message, never dropped."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from clusterdeck.core.jobmanager.reductions import reductions
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpointstats import (
    CheckpointStats,
    CheckpointStatsSnapshot,
    CheckpointStatus,
    RestoredCheckpointStats,
)
from clusterdeck.core.protocol.failures import FailureRecord, TaskFailure
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import (
    AttemptSnapshot,
    JobGraphSnapshot,
    JobProgress,
    OperatorSnapshot,
    SubtaskSnapshot,
    Truncation,
    VertexSnapshot,
)
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.rpc import Envelope, FrameTooLargeError, decode, encode, to_data

S = ExecutionState
FRAMESIZE = 256 * 1024  # rpc.framesize's default


def big_snapshot(subtasks: int, attempts: int) -> JobGraphSnapshot:
    failure = FailureRecord("j/v#0/a0", "v", 0, 0, "tm-1", TaskFailure(
        "ValueError", "bad", "x" * 10_000, ("line",) * 40), timestamp=1.0)
    states = [S.RUNNING if i % 2 else S.FINISHED for i in range(subtasks)]
    return JobGraphSnapshot(
        job_id="j", name="big", epoch=0, kind=JobKind.DATAFLOW, status=JobStatus.RUNNING,
        status_timestamps={JobStatus.CREATED: 0.0, JobStatus.RUNNING: 0.5},
        progress=JobProgress(states.count(S.FINISHED), subtasks),
        failures=(failure,) * 50, root_cause=failure,
        vertices=(VertexSnapshot(
            "v", "map", subtasks, is_source=False, is_sink=False,
            operators=(OperatorSnapshot("op-1", "map", "map"),),
            state_counts={state: states.count(state) for state in set(states)},
            subtasks=tuple(
                SubtaskSnapshot(f"v#{i}", i, states[i], f"j/v#{i}/a{attempts - 1}", tuple(
                    AttemptSnapshot(f"j/v#{i}/a{n}", n, states[i] if n == attempts - 1
                                    else S.FAILED, failure=failure)
                    for n in range(attempts)))
                for i in range(subtasks))),))


def size(snapshot: JobGraphSnapshot) -> int:
    return len(json.dumps(to_data(snapshot)))


def test_each_reduction_is_smaller_and_says_what_it_left_out() -> None:
    full, current, counts = (candidate for _, candidate in reductions(big_snapshot(200, 3)))
    assert size(full) > size(current) > size(counts)
    assert not full.truncated
    assert current.truncated is Truncation.ATTEMPTS
    assert all(len(s.attempts) == 1 for s in current.vertices[0].subtasks)
    assert counts.truncated is Truncation.SUBTASKS
    assert counts.vertices[0].state_counts == {S.RUNNING: 100, S.FINISHED: 100}


def test_the_current_attempt_and_the_root_cause_survive_the_reduction() -> None:
    _, current, counts = (candidate for _, candidate in reductions(big_snapshot(10, 4)))
    subtask = current.vertices[0].subtasks[3]
    assert subtask.attempts[0].attempt_id == subtask.attempt_id
    assert counts.root_cause is not None
    assert counts.root_cause.exception_type == "ValueError"
    assert len(counts.root_cause.traceback) <= 2000


def test_a_reduction_of_a_snapshot_too_large_for_a_frame_fits_and_decodes_whole() -> None:
    """What the JobMaster does: publish the first reduction the codec lets through."""
    full, *reduced = (candidate for _, candidate in reductions(big_snapshot(2000, 3)))
    with pytest.raises(FrameTooLargeError):
        encode(Envelope("event", "jobmaster.j", p.JobSnapshot("j", full)), FRAMESIZE)
    for candidate in reduced:
        try:
            data = encode(Envelope("event", "jobmaster.j", p.JobSnapshot("j", candidate)),
                          FRAMESIZE)
        except FrameTooLargeError:
            continue
        assert len(data) <= FRAMESIZE
        assert decode(data, FRAMESIZE).message == p.JobSnapshot("j", candidate)
        assert candidate.truncated is not Truncation.NONE
        return
    pytest.fail("no reduction of the snapshot fits rpc.framesize")


def test_reductions_start_where_asked_and_build_none_before(monkeypatch) -> None:
    """A large job's snapshot only grows: the JobMaster starts from the reduction that
    fitted last time, and the ones before it cost nothing."""
    import clusterdeck.core.jobmanager.reductions as module

    snapshot = big_snapshot(10, 2)
    monkeypatch.setattr(module, "_REDUCTIONS", (
        lambda s: pytest.fail("the full snapshot was built"),
        lambda s: pytest.fail("the checkpoint history was dropped"),
        lambda s: pytest.fail("the current attempts were built"),
        module._REDUCTIONS[3]))
    ((level, counts),) = reductions(snapshot, 3)
    assert (level, counts.truncated) == (3, Truncation.SUBTASKS)


def with_checkpoints(snapshot: JobGraphSnapshot) -> JobGraphSnapshot:
    """The snapshot of a streaming job whose checkpoints failed with long reasons."""
    history = tuple(CheckpointStats(n, CheckpointStatus.FAILED, float(n), 0.5,
                                    failure="declined: " + "x" * 290)
                    for n in range(40, 20, -1))
    latest = CheckpointStats(19, CheckpointStatus.COMPLETED, 19.0, 0.4, 2048, 2, 2)
    return replace(snapshot, kind=JobKind.STREAMING, checkpoints=CheckpointStatsSnapshot(
        completed=19, failed=21, in_progress=0, latest=latest,
        restored=RestoredCheckpointStats(19, 41.0), history=history))


def test_the_checkpoint_history_is_dropped_first_and_the_rest_of_the_summary_stays() -> None:
    full = with_checkpoints(big_snapshot(10, 2))

    levels = list(reductions(full))

    assert [level for level, _ in levels] == [0, 1, 2, 3]
    (_, whole), (_, no_history), (_, current), (_, counts) = levels
    assert whole is full
    assert no_history.truncated is Truncation.CHECKPOINTS
    assert no_history.vertices == full.vertices and no_history.failures == full.failures
    assert full.checkpoints is not None and no_history.checkpoints is not None
    assert no_history.checkpoints.history == ()
    assert no_history.checkpoints == replace(full.checkpoints, history=())
    for reduced in (current, counts):
        assert reduced.checkpoints == no_history.checkpoints
    assert size(full) > size(no_history) > size(current) > size(counts)


def test_a_streaming_snapshot_too_large_only_by_its_history_keeps_its_subtasks() -> None:
    full = with_checkpoints(big_snapshot(4, 1))
    frame = size(replace(full, checkpoints=replace(full.checkpoints, history=()))) + 1000
    assert size(full) > frame

    fitted = []
    for level, candidate in reductions(full):
        try:
            data = encode(Envelope("event", "jobmaster.j", p.JobSnapshot("j", candidate)), frame)
        except FrameTooLargeError:
            continue
        fitted.append(level)
        break
    assert fitted == [1]
    received = decode(data, frame).message.graph
    assert received.truncated is Truncation.CHECKPOINTS
    assert len(received.vertices[0].subtasks[0].attempts) == 1 == len(
        full.vertices[0].subtasks[0].attempts)
    assert received.checkpoints.latest.checkpoint_id == 19


def test_a_batch_snapshot_has_no_checkpoint_history_to_drop() -> None:
    """A level that would leave nothing out is passed over, not encoded in vain."""
    assert [level for level, _ in reductions(big_snapshot(4, 2))] == [0, 2, 3]
    assert [level for level, _ in reductions(big_snapshot(4, 2), 1)] == [2, 3]
