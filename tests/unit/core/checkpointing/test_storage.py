"""Checkpoints on disk: whole files only, checked on reading, complete only once their
metadata is written, confined to their job's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterdeck.core.checkpointing import (
    CheckpointStorage,
    CheckpointStorageError,
    CompletedCheckpoint,
    StateHandle,
)


def test_a_snapshot_reads_back_as_written(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path)
    state = storage.write_state("job-1", 3, "source#0", b'{"offset": 1200}')
    assert state.path == "chk-3/source%230.state" and state.size == 16
    assert storage.read_state("job-1", state) == b'{"offset": 1200}'
    assert [p.name for p in (tmp_path / "job-1" / "chk-3").iterdir()] == ["source%230.state"]


def test_a_changed_or_missing_snapshot_is_refused_with_the_reason(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path)
    state = storage.write_state("job-1", 3, "sink#1", b"0123456789")
    (tmp_path / "job-1" / state.path).write_bytes(b"0123456788")
    with pytest.raises(CheckpointStorageError, match="not what was written"):
        storage.read_state("job-1", state)
    (tmp_path / "job-1" / state.path).unlink()
    with pytest.raises(CheckpointStorageError, match="cannot be read"):
        storage.read_state("job-1", state)
    with pytest.raises(CheckpointStorageError, match="over the limit"):
        storage.read_state("job-1", StateHandle(state.path, 11, state.sha256), limit=10)


@pytest.mark.parametrize("path", ["../job-2/chk-1/x.state", "chk-1/../../etc.state",
                                  "/etc/passwd", "chk-1/x.txt", "chk-x/y.state"])
def test_a_handle_names_only_a_snapshot_of_its_own_job(tmp_path: Path, path: str) -> None:
    with pytest.raises(CheckpointStorageError, match="is not a snapshot of a checkpoint"):
        CheckpointStorage(tmp_path).read_state("job-1", StateHandle(path, 1, "0" * 64))


@pytest.mark.parametrize("job_id", ["", "..", "a/b", "."])
def test_a_job_id_is_one_folder_name(tmp_path: Path, job_id: str) -> None:
    with pytest.raises(CheckpointStorageError, match="is not a job id"):
        CheckpointStorage(tmp_path).write_state(job_id, 1, "s#0", b"")


def test_only_committed_checkpoints_are_completed_the_others_say_why(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path)
    states = {"source#0": storage.write_state("job-1", 1, "source#0", b"a")}
    storage.commit(CompletedCheckpoint("job-1", 1, 10.0, 11.0, states))
    storage.write_state("job-1", 2, "source#0", b"b")  # aborted: no metadata
    storage.write_state("job-1", 10, "source#0", b"c")
    storage.commit(CompletedCheckpoint("job-1", 10, 20.0, 21.0))
    (tmp_path / "job-1" / "chk-11").mkdir()
    (tmp_path / "job-1" / "chk-11" / "_metadata").write_text('{"job_id": 7}')
    (tmp_path / "job-1" / "chk-12").mkdir()
    (tmp_path / "job-1" / "chk-12" / "_metadata").write_text(json.dumps(
        {"job_id": "job-2", "checkpoint_id": 12, "triggered": 0, "completed": 1}))
    found, problems = storage.completed("job-1")
    assert [c.checkpoint_id for c in found] == [1, 10]
    assert found[0].states == states
    assert problems[0] == "checkpoint 2 of job job-1 never completed (no metadata)"
    assert problems[1].startswith("checkpoint 11 of job job-1: metadata is not valid")
    assert problems[2] == "checkpoint 12 of job job-1: metadata names checkpoint 12 of job-2"
    assert storage.completed("job-unknown") == ([], [])


def test_discarding_deletes_whole_checkpoints_and_single_snapshots(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path)
    kept = storage.write_state("job-1", 2, "a#0", b"a")
    late = storage.write_state("job-1", 2, "b#0", b"b")
    storage.write_state("job-1", 1, "a#0", b"old")
    storage.discard("job-1", [1, 99])
    storage.discard_states("job-1", [late, StateHandle("../x.state", 1, "")])
    assert sorted(p.relative_to(tmp_path / "job-1").as_posix()
                  for p in (tmp_path / "job-1").rglob("*") if p.is_file()) == [kept.path]


def test_a_file_is_whole_or_absent_no_temporary_left(tmp_path: Path, monkeypatch) -> None:
    import os
    storage = CheckpointStorage(tmp_path)

    def full_disk(*_args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        storage.write_state("job-1", 1, "a#0", b"data")
    assert list((tmp_path / "job-1" / "chk-1").iterdir()) == []


def test_an_aborted_checkpoints_folder_goes_with_its_last_snapshot(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path)
    first = storage.write_state("job-1", 5, "a#0", b"a")
    second = storage.write_state("job-1", 5, "b#0", b"b")
    storage.discard_states("job-1", [first])
    assert (tmp_path / "job-1" / "chk-5").is_dir()
    storage.discard_states("job-1", [second])
    assert not (tmp_path / "job-1" / "chk-5").exists()
