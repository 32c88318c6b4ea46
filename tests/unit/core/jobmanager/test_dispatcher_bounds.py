"""The Dispatcher stays bounded however long the cluster lives: the job list in pages and a
retained window that fit a message, retention of ended jobs, and bounded uploads. A real
Dispatcher on the in-process transport, its job store in a temporary folder."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager.dispatcher import Dispatcher
from clusterdeck.core.jobmanager.jobstore import RECORD, JobRecord, JobStore
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.gateways import DispatcherGateway, ResourceManagerGateway
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, JobVertex, OperatorSpec
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import LocalBus, LocalRpcService, RemoteError, to_data
from tests.waiting import wait_for

TOKEN = "f" * 32
FRAME = 16 * 1024  # small, so a few hundred jobs already need pages
STARTED = time.time() - 3600.0  # an hour ago: well within jobstore.retention.max-age
GRAPH = JobGraph("job", JobKind.DATAFLOW, (JobVertex("v", "v", 1, (
    OperatorSpec("op-1", "source.range", "range"),)),))


def ended_record(i: int) -> JobRecord:
    job_id = f"{i:016x}"
    return JobRecord(job_id, GRAPH, "sha", submitted_at=STARTED + i, status=JobStatus.FINISHED,
                     result=p.JobResult(job_id, "job", JobStatus.FINISHED, duration=0.5))


def prefill(root: Path, count: int) -> None:
    """Records written as the store writes them, without its syncs: thousands in a second."""
    for i in range(count):
        record = ended_record(i)
        (root / record.job_id).mkdir(parents=True)
        (root / record.job_id / RECORD).write_text(json.dumps(to_data(record)))


class Harness:
    def __init__(self, tmp_path: Path, jobs: int, **settings: object) -> None:
        self.config = Config({"cluster.id": f"unit-{uuid.uuid4().hex[:8]}",
                              "rpc.framesize": FRAME, **settings})
        self.store_root = tmp_path / "jobs"
        self.store_root.mkdir()
        self.work_root = tmp_path / "work"
        prefill(self.store_root, jobs)
        bus = LocalBus()
        self.jobmanager = LocalRpcService(bus, "jobmanager", framesize=FRAME, ask_timeout=5.0)
        self.client = LocalRpcService(bus, "client-0123456789ab", framesize=FRAME,
                                      ask_timeout=5.0)
        self.lists: list[p.JobList] = []
        self._lock = threading.Lock()
        self.client.subscribe(topics.JOB_LIST, self._on_list)
        self.dispatcher = Dispatcher(
            self.config, self.jobmanager.gateway(ResourceManagerGateway, "resourcemanager",
                                                 TOKEN),
            JobStore(self.store_root), self.work_root, TOKEN)
        self.gateway = self.client.gateway(DispatcherGateway, "dispatcher", TOKEN)

    def _on_list(self, _topic: str, message: object) -> None:
        if isinstance(message, p.JobList):
            with self._lock:
                self.lists.append(message)

    def start(self) -> Harness:
        self.jobmanager.start_endpoint(self.dispatcher)
        return self

    def page(self, offset: int, limit: int = 0) -> p.JobList:
        return self.gateway.ask(p.RequestJobList(offset, limit)).result(10)

    def latest_list(self) -> p.JobList | None:
        with self._lock:
            return self.lists[-1] if self.lists else None

    def close(self) -> None:
        self.client.close()
        self.jobmanager.close()


@pytest.fixture
def harness(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Harness]:
    jobs, settings = request.param
    running = Harness(tmp_path, jobs, **settings)
    try:
        yield running.start()
    finally:
        running.close()


@pytest.mark.parametrize("harness", [(700, {})], indirect=True)
def test_pages_list_every_job_once_newest_first_each_within_the_frame(harness) -> None:
    first = harness.page(0)
    assert first.total == 700
    assert 10 < len(first.jobs) < 700  # a 16 KiB frame holds about a hundred
    seen: list[str] = []
    while len(seen) < 700:
        page = harness.page(len(seen))
        assert page.jobs, f"an empty page at {len(seen)} of {page.total}"
        seen.extend(summary.job_id for summary in page.jobs)
    assert seen == [f"{i:016x}" for i in reversed(range(700))]
    assert harness.page(700).jobs == ()


@pytest.mark.parametrize("harness", [(50, {})], indirect=True)
def test_a_page_holds_at_most_its_limit_and_a_negative_offset_is_refused(harness) -> None:
    page = harness.page(10, limit=5)
    assert [s.job_id for s in page.jobs] == [f"{i:016x}" for i in (39, 38, 37, 36, 35)]
    assert (page.total, page.offset) == (50, 10)
    with pytest.raises(RemoteError, match="must not be negative"):
        harness.page(-1)


@pytest.mark.parametrize("harness", [(700, {"jobmanager.job-list.retained": 500})],
                         indirect=True)
def test_the_retained_list_is_a_window_that_fits_and_says_how_many_there_are(harness) -> None:
    window = wait_for(harness.latest_list, 10, "the retained job list")
    assert window.total == 700
    assert 10 < len(window.jobs) < 500  # the frame, not the setting, bounds it here
    assert window.jobs[0].job_id == f"{699:016x}"


@pytest.mark.parametrize("harness", [(300, {"jobstore.retention.max-jobs": 120})],
                         indirect=True)
def test_retention_at_start_deletes_the_oldest_ended_jobs_and_their_files(
        harness, tmp_path: Path) -> None:
    wait_for(lambda: len(harness.dispatcher.jobs) == 120, 10, "the store trimmed in memory")
    wait_for(lambda: len(list(harness.store_root.iterdir())) == 120, 20,
             "the store folders deleted")
    assert sorted(path.name for path in harness.store_root.iterdir()) == \
        sorted(f"{i:016x}" for i in range(180, 300))
    assert wait_for(harness.latest_list, 10, "the job list").total in (300, 120)
    wait_for(lambda: (harness.latest_list() or p.JobList(())).total == 120, 10,
             "a job list without the deleted jobs")
    assert harness.page(0, 1000).total == 120


def test_retention_deletes_work_dirs_and_attempt_logs_of_deleted_jobs(tmp_path: Path) -> None:
    harness = Harness(tmp_path, 5, **{"jobstore.retention.max-jobs": 2})
    logs = paths.cluster_log_dir(harness.config["cluster.id"]) / "attempts"
    logs.mkdir(parents=True)
    for i in range(5):
        (harness.work_root / f"{i:016x}" / "collect").mkdir(parents=True)
        (logs / f"{i:016x}_v-0_a0.log").write_text("line\n")
    try:
        harness.start()
        wait_for(lambda: len(list(logs.iterdir())) == 2, 20, "attempt logs deleted")
        assert sorted(path.name for path in harness.work_root.iterdir()) == \
            [f"{i:016x}" for i in (3, 4)]
        assert sorted(path.name for path in logs.iterdir()) == \
            [f"{i:016x}_v-0_a0.log" for i in (3, 4)]
    finally:
        harness.close()


def chunk(upload_id: str, index: int, total: int, size: int) -> p.UploadArtifactChunk:
    return p.UploadArtifactChunk(upload_id, index, total,
                                 base64.b64encode(b"z" * size).decode(), "sha")


def submit(upload_id: str) -> p.SubmitJob:
    return p.SubmitJob(uuid.uuid4().hex[:16], GRAPH, upload_id, "sha")


@pytest.mark.parametrize("harness", [(0, {"jobmanager.max-artifact-size": "5 KiB"})],
                         indirect=True)
def test_an_upload_past_max_artifact_size_is_refused_naming_the_limit_and_dropped(
        harness) -> None:
    for index in (0, 1):
        harness.gateway.upload_artifact_chunk(chunk("big", index, 3, 2048)).result(10)
    with pytest.raises(RemoteError, match=r"jobmanager\.max-artifact-size = 5120 bytes"):
        harness.gateway.upload_artifact_chunk(chunk("big", 2, 3, 2048)).result(10)
    with pytest.raises(RemoteError, match="no artifact was uploaded as big"):
        harness.gateway.submit_job(submit("big")).result(10)


@pytest.mark.parametrize("harness", [(0, {"jobmanager.upload-timeout": 0.3})], indirect=True)
def test_an_upload_not_submitted_in_time_is_dropped(harness) -> None:
    harness.gateway.upload_artifact_chunk(chunk("slow", 0, 2, 100)).result(10)
    wait_for(lambda: not harness.dispatcher._uploads, 10, "the upload dropped")
    with pytest.raises(RemoteError, match="no artifact was uploaded as slow"):
        harness.gateway.submit_job(submit("slow")).result(10)


@pytest.mark.parametrize("harness", [(0, {"jobmanager.max-uploads": 2})], indirect=True)
def test_uploads_beyond_max_uploads_at_once_are_refused(harness) -> None:
    for upload_id in ("one", "two"):
        harness.gateway.upload_artifact_chunk(chunk(upload_id, 0, 2, 100)).result(10)
    harness.gateway.upload_artifact_chunk(chunk("one", 1, 2, 100)).result(10)  # known: fine
    with pytest.raises(RemoteError, match=r"jobmanager\.max-uploads"):
        harness.gateway.upload_artifact_chunk(chunk("three", 0, 1, 100)).result(10)


@pytest.mark.parametrize("harness", [(0, {})], indirect=True)
def test_a_submitted_upload_leaves_no_bytes_behind_for_its_expiry_timer(harness) -> None:
    """The timer refers to the upload's chunks until jobmanager.upload-timeout: at ten jobs
    a second that kept about 6,000 artifacts alive (found by benchmarks/soak.py)."""
    harness.gateway.upload_artifact_chunk(chunk("done", 0, 1, 4096)).result(10)
    dispatcher = harness.dispatcher
    held = dispatcher.call_async(lambda: dispatcher._uploads["done"]).result(10)
    with pytest.raises(RemoteError, match="checksum does not match"):
        harness.gateway.submit_job(submit("done")).result(10)
    assert held == {}
    assert dispatcher.call_async(lambda: dict(dispatcher._upload_bytes)).result(10) == {}


@pytest.mark.parametrize("harness", [(3, {})], indirect=True)
def test_the_job_list_goes_out_again_only_when_a_status_or_progress_changed(harness) -> None:
    """A script's Spark work reports its counts twice a second with the same stages done:
    the whole retained list must not go out (and be recorded) for each."""
    wait_for(harness.latest_list, 10, "the first job list")
    job_id = f"{2:016x}"
    before = len(harness.lists)
    for progress in ((1, 3), (1, 3), (1, 3), (2, 3)):
        harness.dispatcher.run_async(harness.dispatcher._job_status_changed, job_id,
                                     JobStatus.FINISHED, *progress)
    wait_for(lambda: len(harness.lists) >= before + 2, 10, "two lists")
    # The page's answer comes after every list the four calls sent, on the same transport.
    assert harness.page(0).jobs[0].job_id == job_id
    assert len(harness.lists) == before + 2, "an unchanged progress published the list again"
