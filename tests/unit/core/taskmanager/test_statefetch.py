"""A restored streaming subtask on a TaskManager that does not see the JobManager's
checkpoint folder asks its JobMaster for its snapshot, a chunk at a time, and keeps it
where it would have been; one it sees is never asked for; a wrong answer fails it."""

from __future__ import annotations

import base64
import hashlib
from concurrent.futures import Future

import pytest

from clusterdeck.core.checkpointing import CheckpointStorage, CheckpointStorageError
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpoints import SharedStateFile, StateHandle
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from clusterdeck.core.taskmanager.statefetch import fetch_restore_state

SNAPSHOT = b'{"windows": [1, 2, 3], "source": 4000}' * 10


class JobMaster:
    """Answers from ``data`` in chunks of ``size`` bytes; ``total`` can lie."""

    def __init__(self, data: bytes, size: int = 64, total: int | None = None) -> None:
        self.data, self.size, self.total = data, size, total
        self.asked: list[p.RequestStateChunk] = []

    def request_state_chunk(self, request: p.RequestStateChunk) -> Future:
        self.asked.append(request)
        piece = self.data[request.offset:request.offset + self.size]
        future: Future = Future()
        future.set_result(p.JobFileChunk(request.job_id, "chk-3/v%230.state", request.offset,
                                         self.total if self.total is not None
                                         else len(self.data),
                                         base64.b64encode(piece).decode()))
        return future


def restoring(handle: StateHandle | None) -> p.SubmitTask:
    return p.SubmitTask("job-1", JobGraph("s", JobKind.STREAMING, ()), "job-1/v#0/a1", "v", 0,
                        1, 1, 0, "alloc", "jobmaster.job-1", "token", "sha", "/work/job-1",
                        restore_checkpoint=3, restore_state=handle)


def handle_of(data: bytes) -> StateHandle:
    return StateHandle("chk-3/v%230.state", len(data), hashlib.sha256(data).hexdigest())


def test_a_snapshot_not_here_is_fetched_in_chunks_and_reads_back_checked(tmp_path):
    storage, jobmaster = CheckpointStorage(tmp_path), JobMaster(SNAPSHOT)
    fetch_restore_state(restoring(handle_of(SNAPSHOT)), storage, jobmaster)
    assert [r.offset for r in jobmaster.asked] == list(range(0, len(SNAPSHOT), 64))
    assert {(r.attempt_id, r.checkpoint_id) for r in jobmaster.asked} == {("job-1/v#0/a1", 3)}
    assert storage.read_state("job-1", handle_of(SNAPSHOT)) == SNAPSHOT


def test_a_snapshot_here_or_none_at_all_asks_nothing(tmp_path):
    storage, jobmaster = CheckpointStorage(tmp_path), JobMaster(SNAPSHOT)
    fetch_restore_state(restoring(None), storage, jobmaster)
    handle = storage.write_state("job-1", 3, "v#0", SNAPSHOT)
    fetch_restore_state(restoring(handle), storage, jobmaster)
    assert jobmaster.asked == []


@pytest.mark.parametrize("jobmaster", [JobMaster(SNAPSHOT, total=10),
                                       JobMaster(SNAPSHOT[:100])],
                         ids=["another size", "cut short"])
def test_an_answer_that_is_not_the_snapshot_fails_the_restore(tmp_path, jobmaster):
    storage = CheckpointStorage(tmp_path)
    with pytest.raises(CheckpointStorageError, match="came from the JobManager as"):
        fetch_restore_state(restoring(handle_of(SNAPSHOT)), storage, jobmaster)
    assert not (tmp_path / "job-1" / "chk-3").exists() or not any(
        (tmp_path / "job-1" / "chk-3").iterdir())


def test_a_handle_naming_another_path_is_refused_before_anything_is_asked(tmp_path):
    jobmaster = JobMaster(SNAPSHOT)
    with pytest.raises(CheckpointStorageError, match="is not a snapshot"):
        fetch_restore_state(restoring(StateHandle("../../etc/passwd", 10, "0" * 64)),
                            CheckpointStorage(tmp_path), jobmaster)
    assert jobmaster.asked == []


def test_the_shared_files_a_handle_names_are_fetched_each_by_its_path(tmp_path):
    class Files(JobMaster):
        def __init__(self, files: dict[str, bytes]) -> None:
            super().__init__(b"")
            self.files = files

        def request_state_chunk(self, request: p.RequestStateChunk) -> Future:
            self.data = self.files[request.shared]
            return super().request_state_chunk(request)

    delta = b"clusterdeck changes 1\n" + b"x" * 100
    path = "shared/v%230/2-0123456789ab.delta"
    handle = handle_of(SNAPSHOT)
    handle = StateHandle(handle.path, handle.size, handle.sha256, (SharedStateFile(
        path, len(delta), hashlib.sha256(delta).hexdigest()),))
    storage, jobmaster = CheckpointStorage(tmp_path), Files({"": SNAPSHOT, path: delta})
    fetch_restore_state(restoring(handle), storage, jobmaster)
    assert {r.shared for r in jobmaster.asked} == {"", path}
    assert (tmp_path / "job-1" / path).read_bytes() == delta
    assert storage.read_state("job-1", handle) == SNAPSHOT
    jobmaster.asked.clear()
    fetch_restore_state(restoring(handle), storage, jobmaster)  # here now: asks nothing
    assert jobmaster.asked == []
