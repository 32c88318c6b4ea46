"""A streaming job's checkpoint summary travels in its snapshot as typed data: it survives
the codec whole, a batch job's and an older sender's snapshot carry none, and a malformed
summary is refused on receipt like any other malformed message."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpointstats import (
    CheckpointStats,
    CheckpointStatsSnapshot,
    CheckpointStatus,
    RestoredCheckpointStats,
)
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, JobProgress
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import CodecError, Envelope, decode, encode

FRAME = 256 * 1024
JOB_ID = "job-1"


def batch_snapshot() -> JobGraphSnapshot:
    return JobGraphSnapshot(job_id=JOB_ID, name="batch", epoch=0, kind=JobKind.DATAFLOW,
                            status=JobStatus.RUNNING, status_timestamps={JobStatus.RUNNING: 1.0},
                            progress=JobProgress(0, 2), vertices=())


def streaming_snapshot() -> JobGraphSnapshot:
    completed = CheckpointStats(7, CheckpointStatus.COMPLETED, 100.0, 0.75, 4096, 2, 2, 0.01)
    return replace(batch_snapshot(), kind=JobKind.STREAMING,
                   checkpoints=CheckpointStatsSnapshot(
                       completed=7, failed=1, in_progress=1, latest=completed,
                       restored=RestoredCheckpointStats(6, 95.0), history=(
                           CheckpointStats(9, CheckpointStatus.IN_PROGRESS, 102.0,
                                           acknowledged=1, expected=2),
                           CheckpointStats(8, CheckpointStatus.FAILED, 101.0, 0.5,
                                           failure="sink#0 declined: disk full"),
                           completed)))


def sent(snapshot: JobGraphSnapshot) -> bytes:
    return encode(Envelope("event", "jobmaster.job-1", p.JobSnapshot(JOB_ID, snapshot)), FRAME)


def test_a_checkpoint_summary_survives_the_codec_with_its_statuses_as_enums() -> None:
    snapshot = streaming_snapshot()

    received = decode(sent(snapshot), FRAME).message.graph

    assert received == snapshot
    assert received.checkpoints is not None
    assert all(isinstance(s.status, CheckpointStatus) for s in received.checkpoints.history)
    assert received.checkpoints.history[0].duration is None


def test_a_batch_jobs_snapshot_carries_no_summary() -> None:
    assert decode(sent(batch_snapshot()), FRAME).message.graph.checkpoints is None


def test_a_snapshot_of_a_sender_without_checkpoint_summaries_still_decodes() -> None:
    document = json.loads(sent(batch_snapshot()))
    del document["body"]["graph"]["checkpoints"]

    received = decode(json.dumps(document).encode(), FRAME).message.graph

    assert received.checkpoints is None and received == batch_snapshot()


def checkpoints_of(document: dict[str, Any]) -> dict[str, Any]:
    return document["body"]["graph"]["checkpoints"]


SPOILERS: list[tuple[Callable[[dict[str, Any]], None], str]] = [
    (lambda d: checkpoints_of(d)["history"][0].update(status="DONE"),
     "'DONE' is not a CheckpointStatus"),
    (lambda d: checkpoints_of(d).update(history={}), "expected a list"),
    (lambda d: checkpoints_of(d)["history"][1].update(size="4 KiB"), "expected a whole number"),
    (lambda d: checkpoints_of(d).update(completed=True), "JobSnapshot.graph.checkpoints"),
    (lambda d: checkpoints_of(d)["latest"].pop("checkpoint_id"),
     "JobSnapshot.graph.checkpoints.latest: missing field 'checkpoint_id'"),
    (lambda d: checkpoints_of(d)["restored"].update(checkpoint_id=6.5),
     "JobSnapshot.graph.checkpoints.restored.checkpoint_id"),
    (lambda d: checkpoints_of(d)["history"][2].update(colour="red"), "unknown field(s) colour"),
    (lambda d: checkpoints_of(d)["history"][1].update(failure=["disk", "full"]),
     "expected a string"),
    (lambda d: d["body"]["graph"].update(checkpoints="none"), "JobSnapshot.graph.checkpoints"),
]


@pytest.mark.parametrize(("spoil", "complaint"), SPOILERS)
def test_a_malformed_checkpoint_summary_is_refused_on_receipt(
        spoil: Callable[[dict[str, Any]], None], complaint: str) -> None:
    document = json.loads(sent(streaming_snapshot()))
    spoil(document)
    with pytest.raises(CodecError, match=re.escape(complaint)):
        decode(json.dumps(document).encode(), FRAME)
