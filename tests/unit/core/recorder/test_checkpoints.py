"""What a recording holds of a job's checkpoints: the sizes its subtasks acknowledged,
read from the recorded messages as the TaskManagers sent them."""

from __future__ import annotations

import pytest

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpoints import SharedStateFile, StateHandle
from clusterdeck.core.recorder import checkpoints as recorded
from clusterdeck.core.recorder.checkpoints import recorded_checkpoints, recorded_cluster
from clusterdeck.core.recorder.store import Message, RecordingStore
from clusterdeck.core.rpc import Envelope, encode


def ack(job: str, subtask: str, checkpoint: int, size: int | None,
        shared: tuple[int, ...] = ()) -> bytes:
    state = None if size is None else StateHandle(
        f"chk-{checkpoint}/{subtask}.state", size, "0" * 64,
        tuple(SharedStateFile(f"shared/{n}", n, "0" * 64) for n in shared))
    return encode(Envelope("tell", "taskmanager-1", p.AcknowledgeCheckpoint(
        job, f"{job}/{subtask}/0", subtask, checkpoint, state)), 1 << 20)


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "recording.sqlite"
    store = RecordingStore(path, "c-state", max_bytes=1 << 30, max_age=1e9)
    notice = encode(Envelope("tell", "jobmanager", p.NotifyCheckpointComplete(
        "job-1", "job-1/counts#0/0", 1)), 1 << 20)
    store.add([
        Message(10.0, "rpc/jobmanager", ack("job-1", "counts#0", 1, 100, (400,))),
        Message(10.1, "rpc/taskmanager-1", notice),
        Message(10.2, "rpc/jobmanager", ack("job-1", "counts#1", 1, 100, (300,))),
        Message(10.3, "rpc/jobmanager", ack("job-1", "source#0", 1, None)),
        Message(10.4, "rpc/jobmanager", ack("job-2", "counts#0", 1, 999, (999,))),
        Message(11.0, "rpc/jobmanager", ack("job-1", "counts#1", 2, 100, (300, 50, 50))),
        Message(11.1, "rpc/jobmanager", ack("job-1", "counts#0", 2, 100, (400, 20))),
        Message(11.2, "rpc/jobmanager", ack("job-1", "counts#0", 2, 100, (400, 30))),
        Message(11.3, "rpc/jobmanager", b"not a message AcknowledgeCheckpoint job-1"),
    ], [])
    store.close()
    return path


def test_it_reads_the_sizes_each_subtask_acknowledged_per_checkpoint(recording) -> None:
    found = recorded_checkpoints(recording, "job-1")
    assert [(c.checkpoint_id, c.at) for c in found] == [(1, 10.0), (2, 11.0)]
    first, second = found
    assert [(s.subtask, s.bytes, s.files) for s in first.snapshots] == \
        [("counts#0", 500, 2), ("counts#1", 400, 2), ("source#0", 0, 0)]
    assert first.bytes_by_vertex() == {"counts": 900, "source": 0}
    # counts#0 acknowledged 2 twice (a restarted attempt): its last acknowledgement counts
    assert second.bytes_by_vertex() == {"counts": 530 + 500}
    assert recorded_cluster(recording) == "c-state"


def test_it_keeps_the_newest_checkpoints_only(recording, monkeypatch) -> None:
    monkeypatch.setattr(recorded, "CHECKPOINTS_KEPT", 1)
    assert [c.checkpoint_id for c in recorded_checkpoints(recording, "job-1")] == [2]


def test_a_job_it_never_saw_has_none_and_a_bad_id_is_refused(recording) -> None:
    assert recorded_checkpoints(recording, "job-9") == []
    with pytest.raises(ValueError, match="not a job id"):
        recorded_checkpoints(recording, "job'; --")
