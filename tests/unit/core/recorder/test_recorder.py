"""The flight recorder's pieces without a cluster: the store and its retention, the log
follower across rotations and restarts, the writer's accounting, exports."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import psutil
import pytest

from clusterdeck.core.cli.main import main as cli_main
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.recorder import recorder as recorder_module
from clusterdeck.core.recorder.export import RecordingError, describe, export
from clusterdeck.core.recorder.logsearch import processes as log_processes
from clusterdeck.core.recorder.logsearch import search as search_logs
from clusterdeck.core.recorder.logtail import MAX_LINE, LogTail
from clusterdeck.core.recorder.recorder import Recorder, saved_positions
from clusterdeck.core.recorder.replay import RecordedEvent, replay
from clusterdeck.core.recorder.replay import samples as recorded_samples
from clusterdeck.core.recorder.sampler import ProcessSampler
from clusterdeck.core.recorder.store import (
    LogLine,
    Message,
    RecordingStore,
    Sample,
    connect,
    job_of,
    log_lines,
    messages,
    samples,
)
from clusterdeck.core.rpc import Envelope, encode
from tests.waiting import wait_for

MiB = 1024 * 1024


def store(tmp_path: Path, max_bytes: int = 64 * MiB, max_age: float = 3600.0
          ) -> RecordingStore:
    return RecordingStore(tmp_path / "recording.sqlite", "c1", max_bytes=max_bytes,
                          max_age=max_age)


def result_payload(job_id: str, status: p.JobStatus, cause: str = "") -> bytes:
    result = p.JobResult(job_id, "job-" + job_id, status, root_cause={
        "exception_type": "ValueError", "message": cause} if cause else None)
    return encode(Envelope("event", "jobmanager", result), 256 * 1024)


@pytest.mark.parametrize(("topic", "job"), [
    ("events/jobs/j1", "j1"), ("state/jobs/j1", "j1"), ("state/results/j1", "j1"),
    ("events/output/j1", "j1"), ("events/cluster", None), ("state/joblist", None),
    ("rpc/jobmaster/j1/taskmanager-1", None), ("state/jobs", None)])
def test_a_message_is_filed_under_the_job_its_topic_names(topic, job):
    assert job_of(topic) == job


def test_messages_and_log_lines_are_kept_as_they_came(tmp_path):
    recording = store(tmp_path)
    recording.add([Message(1.0, "events/jobs/j1", b"\x00raw"), Message(2.0, "state/x", b"")],
                  [LogLine(1.5, "jobmanager", "started")])
    recording.close()
    with connect(tmp_path / "recording.sqlite", readonly=True) as db:
        assert messages(db) == [Message(1.0, "events/jobs/j1", b"\x00raw"),
                                Message(2.0, "state/x", b"")]
        assert messages(db, ["j1"]) == [Message(1.0, "events/jobs/j1", b"\x00raw")]
        assert log_lines(db) == [LogLine(1.5, "jobmanager", "started")]


def test_rows_older_than_the_age_limit_are_dropped(tmp_path):
    recording = store(tmp_path, max_age=100.0)
    recording.add([Message(at, "t", b"x") for at in (10.0, 950.0)],
                  [LogLine(at, "p", "l") for at in (10.0, 950.0)])
    assert recording.prune(now=1000.0) == 2
    assert [m.at for m in messages(recording._db)] == [950.0]
    assert [x.at for x in log_lines(recording._db)] == [950.0]


def test_the_recording_stays_within_its_size_dropping_the_oldest_first(tmp_path):
    recording = store(tmp_path, max_bytes=2 * MiB)
    for batch in range(20):  # 20 x 50 x 10 kB = 10 MB offered
        recording.add([Message(batch * 100.0 + i, "t", bytes(10_000)) for i in range(50)], [])
        recording.prune(now=batch * 100.0)
    assert recording.size() <= 2 * MiB
    kept = [m.at for m in messages(recording._db)]
    assert kept and kept[-1] == 19 * 100.0 + 49  # the newest stays
    assert min(kept) > 1000.0  # the oldest went
    size_before = (tmp_path / "recording.sqlite").stat().st_size
    recording.add([Message(3000.0 + i, "t", bytes(10_000)) for i in range(50)], [])
    recording.prune(now=3000.0)
    # freed pages are reused: the file does not keep growing
    assert (tmp_path / "recording.sqlite").stat().st_size <= size_before + MiB


def write(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def test_the_log_follower_reads_whole_lines_from_every_process(tmp_path):
    write(tmp_path / "jobmanager.log", "one\ntwo\npart")
    write(tmp_path / "taskmanager-1.log", "tm\n")
    tail = LogTail(tmp_path)
    assert sorted((x.process, x.line) for x in tail.poll()) == [
        ("jobmanager", "one"), ("jobmanager", "two"), ("taskmanager-1", "tm")]
    write(tmp_path / "jobmanager.log", "ial\n")
    assert [x.line for x in tail.poll()] == ["partial"]
    assert tail.poll() == []
    tail.close()


def test_no_line_is_lost_or_repeated_across_a_rotation(tmp_path):
    log = tmp_path / "taskmanager-1.log"
    write(log, "a\n")
    tail = LogTail(tmp_path)
    assert [x.line for x in tail.poll()] == ["a"]
    write(log, "b\n")
    log.rename(tmp_path / "taskmanager-1.log.1")  # what RotatingFileHandler does
    write(log, "c\n")
    assert [x.line for x in tail.poll()] == ["b", "c"]
    tail.close()


def test_a_restarted_follower_goes_on_where_the_last_one_stopped(tmp_path):
    log = tmp_path / "jobmanager.log"
    write(log, "a\nb\n")
    first = LogTail(tmp_path)
    first.poll()
    positions = first.positions()
    first.close()
    write(log, "c\n")
    second = LogTail(tmp_path, positions)
    assert [x.line for x in second.poll()] == ["c"]
    second.close()


def test_an_endless_line_is_cut(tmp_path):
    write(tmp_path / "p.log", "x" * (3 * MAX_LINE) + "\n")
    tail = LogTail(tmp_path)
    (line,) = tail.poll()
    assert len(line.line) <= MAX_LINE
    tail.close()


def test_saved_positions_that_cannot_be_read_are_ignored():
    assert saved_positions('{"jobmanager": [5, 10]}') == {"jobmanager": (5, 10)}
    for text in (None, "", "[", '{"a": 1}', '{"a": ["x", 1]}', "[1, 2]"):
        assert saved_positions(text) == {}


def test_the_writer_stores_what_arrived_and_says_what_it_could_not_keep(tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(recorder_module, "QUEUE_LIMIT", 3)
    recording = store(tmp_path)
    writer = Recorder(recording, LogTail(tmp_path / "no-logs"), NoSamples())
    for index in range(5):
        writer.received(f"events/jobs/j{index}", b"payload")
    assert writer.flush() == 4  # three messages, one line about the two lost
    (lost,) = log_lines(recording._db)
    assert lost.process == "recorder" and "2 messages were not recorded" in lost.line
    assert [m.topic for m in messages(recording._db)] == [
        "events/jobs/j0", "events/jobs/j1", "events/jobs/j2"]
    assert writer.flush() == 0


class NoSamples(ProcessSampler):
    def sample(self, now: float) -> list[Sample]:
        return []


def presence(status: p.PresenceStatus, pid: int, host: str) -> Message:
    data = encode(Envelope("event", "taskmanager-1", p.Presence(
        "taskmanager-1", "taskmanager", status, "i1", pid, host, 1.0)), 256 * 1024)
    return Message(1.0, "presence/taskmanager-1", data)


def test_the_sampler_follows_the_processes_that_announce_themselves_on_this_host():
    sampler = ProcessSampler(host="here")
    assert [x.process for x in sampler.sample(5.0)] == ["recorder"]
    sampler.saw(presence(p.PresenceStatus.ONLINE, os.getpid(), "elsewhere"))
    sampler.saw(Message(1.0, "presence/taskmanager-1", b"\xff garbage"))
    sampler.saw(Message(1.0, "presence/taskmanager-1", b""))
    assert [x.process for x in sampler.sample(5.0)] == ["recorder"]
    sampler.saw(presence(p.PresenceStatus.ONLINE, os.getpid(), "here"))
    (_, taskmanager) = sampler.sample(6.0)
    assert (taskmanager.at, taskmanager.process) == (6.0, "taskmanager-1")
    assert taskmanager.rss > 0 and taskmanager.threads >= 1 and taskmanager.cpu_percent >= 0
    sampler.saw(presence(p.PresenceStatus.OFFLINE, os.getpid(), "here"))
    assert [x.process for x in sampler.sample(7.0)] == ["recorder"]


@pytest.mark.integration
def test_a_process_counts_with_its_children_like_a_taskmanager_with_its_jvm():
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        "'x = bytearray(80_000_000); import time; time.sleep(60)'])")])
    try:
        child = wait_for(lambda: next(iter(psutil.Process(parent.pid).children()), None), 10,
                         "the grandchild")
        wait_for(lambda: child.memory_info().rss > 70_000_000, 10, "its 80 MB")
        sampler = ProcessSampler(host="here")
        sampler.saw(presence(p.PresenceStatus.ONLINE, parent.pid, "here"))
        (_, taskmanager) = sampler.sample(1.0)
        alone = psutil.Process(parent.pid).memory_info().rss
        assert taskmanager.rss >= alone + 70_000_000
        assert taskmanager.threads >= 2
    finally:
        for process in psutil.Process(parent.pid).children(recursive=True):
            process.kill()
        parent.kill()
        parent.wait(10)


@pytest.mark.integration
def test_a_process_that_is_gone_is_no_longer_sampled():
    sampler = ProcessSampler(host="here")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    sampler.saw(presence(p.PresenceStatus.ONLINE, child.pid, "here"))
    assert [x.process for x in sampler.sample(1.0)] == ["recorder"]


def test_samples_are_stored_and_pruned_like_the_rest(tmp_path):
    recording = store(tmp_path, max_age=100.0)
    recording.add([], [], [Sample(10.0, "jobmanager", 12.5, 1000, 7),
                           Sample(950.0, "jobmanager", 3.0, 2000, 8)])
    recording.prune(now=1000.0)
    assert samples(recording._db) == [Sample(950.0, "jobmanager", 3.0, 2000, 8)]


def recording_with_two_jobs(tmp_path: Path) -> Path:
    recording = store(tmp_path)
    recording.add([
        Message(10.0, "events/jobs/a", b"{}"),
        Message(11.0, "state/results/a", result_payload("a", p.JobStatus.FAILED, "bad row")),
        Message(11.5, "rpc/taskexecutor/taskmanager-1/jobmanager", b"{}"),
        Message(50.0, "events/jobs/b", b"{}"),
        Message(51.0, "state/results/b", result_payload("b", p.JobStatus.FINISHED)),
        Message(52.0, "state/results/b", b""),  # a cleared retained result
    ], [LogLine(10.5, "taskmanager-1", "a's line"), LogLine(50.5, "jobmanager", "b's")],
        [Sample(10.2, "taskmanager-1", 80.0, 300 * 2**20, 20),
         Sample(50.2, "jobmanager", 40.0, 100 * 2**20, 12)])
    recording.close()
    return tmp_path / "recording.sqlite"


def test_an_export_is_one_file_that_says_how_each_job_ended(tmp_path):
    source = recording_with_two_jobs(tmp_path)
    target = tmp_path / "handed-over.cdrec"
    summary = export(source, target)
    assert [f.name for f in tmp_path.iterdir() if f.name.startswith("handed-over")] == [
        "handed-over.cdrec"]
    assert summary == describe(target)
    assert target.stat().st_mode & 0o777 == 0o600
    assert (summary.cluster, summary.messages, summary.log_lines) == ("c1", 6, 2)
    assert [(j.job_id, j.status, j.root_cause) for j in summary.jobs] == [
        ("a", "FAILED", "ValueError: bad row"), ("b", "FINISHED", "")]
    assert [(x.process, x.cpu_percent) for x in summary.processes] == [
        ("jobmanager", 40.0), ("taskmanager-1", 80.0)]


def test_an_export_of_one_job_keeps_it_and_what_happened_while_it_ran(tmp_path):
    source = recording_with_two_jobs(tmp_path)
    summary = export(source, tmp_path / "a.cdrec", ["a"])
    assert [j.job_id for j in summary.jobs] == ["a"]
    assert [x.process for x in summary.processes] == ["taskmanager-1"]
    with connect(tmp_path / "a.cdrec", readonly=True) as db:
        assert [m.topic for m in messages(db)] == [
            "events/jobs/a", "state/results/a", "rpc/taskexecutor/taskmanager-1/jobmanager"]
        assert [x.line for x in log_lines(db)] == ["a's line"]


def test_exports_refuse_what_they_cannot_do_and_leave_nothing_behind(tmp_path):
    source = recording_with_two_jobs(tmp_path)
    with pytest.raises(RecordingError, match="nothing of job zzz"):
        export(source, tmp_path / "z.cdrec", ["zzz"])
    (tmp_path / "exists.cdrec").write_bytes(b"")
    with pytest.raises(RecordingError, match="exists"):
        export(source, tmp_path / "exists.cdrec")
    not_a_recording = tmp_path / "notes.txt"
    not_a_recording.write_text("hello " * 1000)
    with pytest.raises(RecordingError, match="not a recording"):
        export(not_a_recording, tmp_path / "x.cdrec")
    with pytest.raises(RecordingError, match="not a recording"):
        describe(not_a_recording)
    with pytest.raises(FileNotFoundError):
        describe(tmp_path / "missing.cdrec")
    assert sorted(f.name for f in tmp_path.iterdir()
                  if not f.name.startswith("recording.sqlite")) == ["exists.cdrec", "notes.txt"]


def test_a_recording_with_garbage_payloads_still_describes(tmp_path):
    recording = store(tmp_path)
    recording.add([Message(1.0, "state/results/x", b"\xff not json"),
                   Message(2.0, "state/results/y", b'{"v": 99}')], [])
    recording.close()
    summary = describe(tmp_path / "recording.sqlite")
    assert summary.messages == 2 and summary.jobs == ()


def test_the_store_is_written_in_wal_mode_and_readable_by_its_owner_only(tmp_path):
    store(tmp_path).close()
    assert (tmp_path / "recording.sqlite").stat().st_mode & 0o777 == 0o600
    db = sqlite3.connect(tmp_path / "recording.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_a_recording_reads_back_as_a_watcher_would_have_received_it(tmp_path):
    recording = store(tmp_path)
    ask = encode(Envelope("ask", "client-x", p.RequestJobResult("j1"), correlation_id="c:1",
                          reply_to="client-x"), 256 * 1024)
    recording.add([
        Message(0.5, "state/results/j1", result_payload("j1", p.JobStatus.RUNNING)),
        Message(1.0, "state/results/j1", result_payload("j1", p.JobStatus.FAILED, "bad")),
        Message(2.0, "rpc/dispatcher/c1.client", ask),
        Message(3.0, "rpc/dispatcher/c1.client", b"\xff not a message"),
        Message(3.5, "state/results/j2", result_payload("j2", p.JobStatus.FINISHED)),
        Message(4.0, "state/results/j2", b""),  # cleared at last: nothing to show
        Message(5.0, "events/cluster", b"\xff"),  # unreadable event: skipped
    ], [])
    recording.close()
    # of a state topic only its last message: the superseded RUNNING result is not read
    result, asked, garbage = replay(tmp_path / "recording.sqlite")
    assert isinstance(result, RecordedEvent) and result.topic == "state/results/j1"
    assert result.message.status is p.JobStatus.FAILED
    assert result.message.root_cause["message"] == "bad"
    assert (asked.at, asked.channel, asked.receiver, asked.sender, asked.type_name) == (
        2.0, "rpc", "dispatcher", "client-x", "RequestJobResult")
    assert garbage.sender == "?" and garbage.error


def test_the_last_hour_of_samples_reads_back_for_the_load_plot(tmp_path):
    recording = store(tmp_path)
    recording.add([], [], [Sample(at, "taskmanager-1", at / 100, int(at), 9)
                           for at in (10.0, 4000.0, 7000.0)])
    recording.close()
    assert [sample for batch in recorded_samples(tmp_path / "recording.sqlite")
            for sample in batch] == [
        (4000.0, "taskmanager-1", 40.0, 4000), (7000.0, "taskmanager-1", 70.0, 7000)]


def recording_with_logs(tmp_path: Path) -> Path:
    recording = store(tmp_path)
    recording.add([], [
        LogLine(1.0, "jobmanager", "2026-11-25 20:57:22,222 INFO jobmanager x: leading"),
        LogLine(2.0, "taskmanager-1", "2026-11-25 20:57:52,648 ERROR taskmanager t: attempt "
                "j1/v#3/a0 failed: ValueError: record 777 is bad"),
        LogLine(2.1, "taskmanager-1", "ValueError: record 777 is bad"),  # no level
        LogLine(3.0, "taskmanager-1", "26/11/25 20:57:52 WARN Spark: a Spark line"),
        LogLine(4.0, "taskmanager-2", "26/11/25 20:57:54 ERROR Executor: Exception in task"),
    ])
    recording.close()
    return tmp_path / "recording.sqlite"


def test_one_log_across_processes_is_searched_by_process_level_and_text(tmp_path):
    path = recording_with_logs(tmp_path)
    with closing(connect(path, readonly=True)) as db:
        assert log_processes(db) == ["jobmanager", "taskmanager-1", "taskmanager-2"]
        assert [x.at for x in search_logs(db)] == [1.0, 2.0, 2.1, 3.0, 4.0]
        assert [x.at for x in search_logs(db, text="RECORD 777")] == [2.0, 2.1]
        assert [x.at for x in search_logs(db, processes=["taskmanager-2", "jobmanager"])
                ] == [1.0, 4.0]
        assert [x.at for x in search_logs(db, level="ERROR")] == [2.0, 4.0]
        assert [x.at for x in search_logs(db, level="WARNING")] == [2.0, 3.0, 4.0]
        assert [x.at for x in search_logs(db, level="INFO", limit=2)] == [1.0, 2.0]
        with pytest.raises(ValueError, match="level must be one of"):
            search_logs(db, level="LOUD")


def test_record_logs_prints_the_lines_and_refuses_what_is_not_a_recording(tmp_path, capsys):
    path = recording_with_logs(tmp_path)
    assert cli_main(["record", "logs", str(path), "--grep", "777", "--process",
                     "taskmanager-1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all("taskmanager-1 | " in line for line in out)
    assert out[1].endswith("| ValueError: record 777 is bad")
    (tmp_path / "notes.txt").write_text("hello " * 1000)
    assert cli_main(["record", "logs", str(tmp_path / "notes.txt")]) == 1
    assert "is not a recording" in capsys.readouterr().err
