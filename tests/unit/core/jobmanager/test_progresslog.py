"""The progress log of a job: every finished subtask kept, committed in groups."""

from __future__ import annotations

import time
from pathlib import Path

from clusterdeck.core.executiongraph.recovery import FinishedSubtask
from clusterdeck.core.jobmanager import jobstore
from clusterdeck.core.jobmanager.jobstore import ProgressLog


def test_subtasks_finishing_faster_than_the_disk_syncs_share_commits(tmp_path: Path,
                                                                      monkeypatch) -> None:
    real_fsync, syncs = jobstore.os.fsync, []

    def slow_fsync(fd: int) -> None:  # a disk that takes 5 ms to sync
        syncs.append(fd)
        time.sleep(0.005)
        real_fsync(fd)

    monkeypatch.setattr(jobstore.os, "fsync", slow_fsync)
    log = ProgressLog(tmp_path / "progress.jsonl")
    for subtask in range(300):
        log.append(FinishedSubtask("map", subtask, f"job/map#{subtask}/a0", 0, None, (subtask,)))
    log.close()

    kept = sorted(log.read(), key=lambda f: f.subtask)
    assert [f.subtask for f in kept] == list(range(300))
    assert [f.input_splits for f in kept] == [(i,) for i in range(300)]
    assert 1 <= len(syncs) < 300
