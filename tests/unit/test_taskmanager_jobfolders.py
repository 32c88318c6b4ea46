"""A TaskManager's retention of the job folders it made on its own machine."""

from __future__ import annotations

import os
from pathlib import Path

from clusterdeck.core.taskmanager.jobfolders import MARKER, claim, sweep


def test_a_folder_made_here_is_marked_and_one_already_there_is_not(tmp_path: Path) -> None:
    shared = tmp_path / "jobs" / "shared"
    shared.mkdir(parents=True)
    assert not claim(str(shared))
    assert not (shared / MARKER).exists()
    assert claim(str(tmp_path / "jobs" / "made"))
    assert (tmp_path / "jobs" / "made" / MARKER).exists()
    assert not claim(str(tmp_path / "jobs" / "made"))  # a second task of the job


def test_only_marked_folders_beyond_the_limits_and_not_in_use_are_deleted(tmp_path) -> None:
    jobs = tmp_path / "jobs"
    for index in range(5):
        folder = jobs / f"job-{index}"
        claim(str(folder))
        (folder / "partitions").mkdir()
        os.utime(folder / MARKER, (1000.0 + index, 1000.0 + index))
    (jobs / "jobmanagers-own").mkdir()  # not made by a TaskManager: never touched
    in_use = {str(jobs / "job-0")}

    gone = sweep(str(jobs), keep=2, max_age=10_000.0, in_use=in_use, now=2000.0)

    assert sorted(Path(g).name for g in gone) == ["job-1", "job-2"]
    assert sorted(p.name for p in jobs.iterdir()) == ["job-0", "job-3", "job-4",
                                                     "jobmanagers-own"]
    old = sweep(str(jobs), keep=10, max_age=500.0, in_use=set(), now=1503.5)
    assert sorted(Path(g).name for g in old) == ["job-0", "job-3"]
