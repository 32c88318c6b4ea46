"""The job store: durable writes, a restart that finds every job it can read and sets
aside, loudly, every folder it cannot, and the Dispatcher's answer when a write fails."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager import jobstore
from clusterdeck.core.jobmanager.dispatcher import Dispatcher
from clusterdeck.core.jobmanager.jobstore import (
    BrokenRecordError,
    JobRecord,
    JobStore,
    write_atomically,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.gateways import DispatcherGateway, ResourceManagerGateway
from clusterdeck.core.protocol.jobgraph import (
    JobEdge,
    JobGraph,
    JobKind,
    JobVertex,
    OperatorSpec,
    ShipStrategy,
)
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import LocalBus, LocalRpcService, to_data
from tests.waiting import wait_for

TOKEN = "f" * 32
SOURCE = JobVertex("source", "source", 2, (OperatorSpec("op-1", "source.range", "range"),))
SINK = JobVertex("sink", "sink", 1, (OperatorSpec("op-2", "sink.collect", "collect"),))
GRAPH = JobGraph("job", JobKind.DATAFLOW, (SOURCE, SINK),
                 (JobEdge("source", "sink", ShipStrategy.REBALANCE),))
ARTIFACT = b"PK not really a zip"
SHA256 = hashlib.sha256(ARTIFACT).hexdigest()


def record(job_id: str, submitted_at: float = 1.0, **changes: object) -> JobRecord:
    return replace(JobRecord(job_id, GRAPH, SHA256, submitted_at=submitted_at,
                             status=JobStatus.RUNNING), **changes)


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "jobs")


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path os.fsync is called on, in order (the descriptor's target, from /proc)."""
    paths: list[Path] = []
    real_fsync = os.fsync

    def recording_fsync(descriptor: int) -> None:
        paths.append(Path(os.readlink(f"/proc/self/fd/{descriptor}")))
        real_fsync(descriptor)
    monkeypatch.setattr(os, "fsync", recording_fsync)
    return paths


def add_folder(store: JobStore, name: str, job_json: bytes | None) -> Path:
    folder = store.root / name
    folder.mkdir()
    (folder / jobstore.ARTIFACT).write_bytes(ARTIFACT)
    if job_json is not None:
        (folder / jobstore.RECORD).write_bytes(job_json)
    return folder


def as_json(stored: JobRecord) -> bytes:
    return json.dumps(to_data(stored)).encode()


# -- durable writes ------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name fds")
def test_a_new_job_is_synced_file_by_file_then_its_folder_then_the_store(
        store: JobStore, synced: list[Path]) -> None:
    store.add(record("job-1"), ARTIFACT)
    folder = store.folder("job-1").resolve()
    root = store.root.resolve()
    assert synced == [folder / f".{jobstore.ARTIFACT}.{os.getpid()}.tmp", folder,
                      folder / f".{jobstore.RECORD}.{os.getpid()}.tmp", folder, root]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name fds")
def test_an_update_is_synced_before_it_replaces_the_record(
        store: JobStore, synced: list[Path]) -> None:
    stored = record("job-1")
    store.add(stored, ARTIFACT)
    synced.clear()
    store.update(stored, status=JobStatus.FINISHED)
    folder = store.folder("job-1").resolve()
    assert synced == [folder / f".{jobstore.RECORD}.{os.getpid()}.tmp", folder]


def test_a_failed_write_keeps_the_old_content_and_leaves_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "job.json"
    path.write_bytes(b"old")

    def disk_full(_descriptor: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_atomically(path, b"new")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.json"]


def test_a_job_that_cannot_be_stored_leaves_nothing_so_it_can_be_submitted_again(
        store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    real_replace = os.replace

    def disk_full_at_the_record(source: Path, target: Path) -> None:
        if Path(target).name == jobstore.RECORD:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(source, target)
    monkeypatch.setattr(os, "replace", disk_full_at_the_record)
    with pytest.raises(jobstore.JobStoreFull) as full:
        store.add(record("job-1"), ARTIFACT)
    assert f"the JobManager's job store {store.root} is full (No space left on device)" \
        in str(full.value)  # named by its role, not a bare ENOSPC on a file deep inside
    assert full.value.errno == errno.ENOSPC
    assert not store.folder("job-1").exists()
    monkeypatch.setattr(os, "replace", real_replace)
    store.add(record("job-1"), ARTIFACT)
    assert [r.job_id for r in store.load_all().records] == ["job-1"]


# -- loading on a restart --------------------------------------------------------------------


def test_every_broken_folder_is_set_aside_and_every_readable_job_loads(
        store: JobStore, caplog: pytest.LogCaptureFixture) -> None:
    store.add(record("later", submitted_at=3.0), ARTIFACT)
    store.add(record("earlier", submitted_at=2.0), ARTIFACT)
    broken = {
        "not-json": b"{not json",
        "not-utf8": b"\xff\xfe{}",
        "not-a-record": b'{"job_id": "not-a-record"}',
        "no-record": None,
        "a..b": as_json(record("a..b")),
        "renamed": as_json(record("another-id")),
        "nested": b"[" * 100_000 + b"]" * 100_000,
    }
    for name, content in broken.items():
        add_folder(store, name, content)
    with caplog.at_level(logging.ERROR, logger=jobstore.__name__):
        stored = store.load_all()
    assert [r.job_id for r in stored.records] == ["earlier", "later"]
    assert sorted(s.name for s in stored.set_aside) == sorted(broken)
    for aside in stored.set_aside:
        assert aside.moved_to == store.root / f"{aside.name}.broken"
        assert aside.moved_to.is_dir() and not (store.root / aside.name).exists()
        assert aside.name in caplog.text
    reasons = {s.name: s.reason for s in stored.set_aside}
    assert "is not a job record" in reasons["not-json"]
    assert "no job.json" in reasons["no-record"]
    assert "not a job id" in reasons["a..b"]
    assert "'another-id'" in reasons["renamed"]
    again = store.load_all()  # set aside once, not reported on every start
    assert [r.job_id for r in again.records] == ["earlier", "later"] and not again.set_aside


def test_a_folder_set_aside_twice_keeps_both_copies(store: JobStore) -> None:
    add_folder(store, "twice", b"{")
    store.load_all()
    add_folder(store, "twice", b"{")
    (aside,) = store.load_all().set_aside
    assert aside.moved_to == store.root / "twice.2.broken"
    assert (store.root / "twice.broken").is_dir()


def test_a_missing_or_changed_artifact_is_a_broken_record(store: JobStore) -> None:
    stored = record("job-1")
    store.add(stored, ARTIFACT)
    store.check_artifact(stored)
    store.artifact_path("job-1").write_bytes(b"something else")
    with pytest.raises(BrokenRecordError, match="not the one submitted"):
        store.check_artifact(stored)
    store.artifact_path("job-1").unlink()
    with pytest.raises(BrokenRecordError, match="is missing"):
        store.check_artifact(stored)


# -- the same submission sent again ---------------------------------------------------------


def test_a_submission_sent_again_matches_its_record_read_back_from_disk(
        store: JobStore) -> None:
    stored = record("job-1", args=("a", "b"), restart_strategy={"restart-strategy.type": "none"},
                    task_timeout=5.0)
    store.add(stored, ARTIFACT)
    (read_back,) = store.load_all().records
    request = p.SubmitJob("job-1", GRAPH, "upload-2", SHA256, ("a", "b"),
                          {"restart-strategy.type": "none"}, 5.0)
    assert read_back.matches(request)
    assert not read_back.matches(replace(request, artifact_sha256="0" * 64))
    assert not read_back.matches(replace(request, graph=replace(GRAPH, name="other")))
    assert not read_back.matches(replace(request, args=("a",)))
    assert not read_back.matches(replace(request, task_timeout=0.0))


# -- the Dispatcher when the store cannot be written -----------------------------------------


def test_a_job_whose_end_cannot_be_stored_fails_with_that_cause_and_the_client_hears_it(
        store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.add(record("job-1", submitted_at=time.time(), status=JobStatus.FINISHED,
                     result=p.JobResult("job-1", "job", JobStatus.FINISHED, duration=1.0)),
              ARTIFACT)
    bus = LocalBus()
    jobmanager = LocalRpcService(bus, "jobmanager", ask_timeout=5.0)
    client = LocalRpcService(bus, "client-0123456789ab", ask_timeout=5.0)
    heard: list[p.JobResult] = []
    client.subscribe(topics.job_result("job-1"), lambda _t, message: heard.append(message))
    dispatcher = Dispatcher(Config({"cluster.id": "unit-jobstore"}), jobmanager.gateway(
        ResourceManagerGateway, "resourcemanager", TOKEN), store, store.root.parent / "work",
        TOKEN)
    try:
        jobmanager.start_endpoint(dispatcher)

        def disk_full(*_args: object, **_changes: object) -> JobRecord:
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(store, "update", disk_full)
        dispatcher.run_async(dispatcher._job_ended, "job-1", p.JobResult(
            "job-1", "job", JobStatus.FINISHED, duration=2.0, accumulators={"lines": 3}))
        (result,) = wait_for(lambda: list(heard), 10, "the job's result published")
        assert result.status == JobStatus.FAILED
        assert result.root_cause["exception_type"] == jobstore.STORE_WRITE_FAILED
        assert "ended FINISHED" in result.root_cause["message"]
        assert "No space left on device" in result.root_cause["message"]
        assert result.accumulators == {"lines": 3}  # what the job did is still shown
        asked = client.gateway(DispatcherGateway, "dispatcher", TOKEN).request_job_result(
            "job-1").result(10)
        assert asked == result
    finally:
        client.close()
        jobmanager.close()
