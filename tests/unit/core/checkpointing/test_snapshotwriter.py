"""The asynchronous part of a task's snapshots: written on a worker thread, the outcome on
the task's inbox, failures as a reason, and a bound on snapshots in flight."""

from __future__ import annotations

import json
import queue
import threading
import time

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.checkpointing.snapshotwriter import (
    MAX_PENDING,
    SnapshotWriter,
    SnapshotWritten,
)


def outcome_of(inbox: queue.SimpleQueue, writer: SnapshotWriter) -> SnapshotWritten:
    outcome = inbox.get(timeout=10)
    writer.taken()
    return outcome


def test_a_snapshot_is_written_off_the_callers_thread_and_its_handle_reads_back(tmp_path):
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    storage = CheckpointStorage(tmp_path)
    writer = SnapshotWriter(storage, "job-1", "vertex-0#1", inbox)
    threads = []
    original = storage.write_state

    def recording(*args):
        threads.append(threading.current_thread())
        return original(*args)

    storage.write_state = recording
    started = time.monotonic()
    assert writer.submit(3, {"chain": {"values": [["a", 1]]}}, 0.25, started) == ""
    outcome = outcome_of(inbox, writer)
    assert (outcome.checkpoint_id, outcome.alignment, outcome.started) == (3, 0.25, started)
    assert outcome.handle is not None and not outcome.error
    assert threads and threads[0] is not threading.current_thread()
    assert json.loads(storage.read_state("job-1", outcome.handle)) == {
        "chain": {"values": [["a", 1]]}}
    assert writer.pending == 0
    writer.close()


def test_a_snapshot_that_cannot_be_written_comes_back_as_a_reason(tmp_path):
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    (tmp_path / "job-1").write_text("a file where the job's folder goes")
    writer = SnapshotWriter(CheckpointStorage(tmp_path), "job-1", "vertex-0#0", inbox)
    assert writer.submit(1, {"chain": None}, 0.0, time.monotonic()) == ""
    outcome = outcome_of(inbox, writer)
    assert outcome.handle is None and "its snapshot could not be written" in outcome.error
    assert writer.submit(2, {"state": object()}, 0.0, time.monotonic()) == ""
    assert "not JSON serializable" in outcome_of(inbox, writer).error
    writer.close()


def test_past_its_bound_a_writer_refuses_new_snapshots_until_an_outcome_is_taken(tmp_path):
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    storage = CheckpointStorage(tmp_path)
    release = threading.Event()
    original = storage.write_state

    def slow(*args):
        release.wait(10)
        return original(*args)

    storage.write_state = slow
    writer = SnapshotWriter(storage, "job-1", "vertex-0#0", inbox)
    for checkpoint_id in range(1, MAX_PENDING + 1):
        assert writer.submit(checkpoint_id, {}, 0.0, time.monotonic()) == ""
    refused = writer.submit(MAX_PENDING + 1, {}, 0.0, time.monotonic())
    assert "still being written" in refused
    release.set()
    assert [outcome_of(inbox, writer).checkpoint_id for _ in range(MAX_PENDING)] == list(
        range(1, MAX_PENDING + 1))   # in order
    assert writer.submit(MAX_PENDING + 1, {}, 0.0, time.monotonic()) == ""
    assert outcome_of(inbox, writer).handle is not None
    writer.close()
