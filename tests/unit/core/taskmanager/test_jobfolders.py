"""A TaskManager's retention of the job folders it made on its own machine."""

from __future__ import annotations

import os
from pathlib import Path

from clusterdeck.core.taskmanager.jobfolders import MARKER, claim, kept_at, sweep


def test_a_folder_made_here_is_marked_and_one_already_there_is_not(tmp_path: Path) -> None:
    shared, made = tmp_path / "jobs" / "shared", tmp_path / "jobs" / "made"
    stand_ins = str(tmp_path / "stand-ins")
    shared.mkdir(parents=True)
    assert claim(str(shared), stand_ins) == (str(shared), False)
    assert not (shared / MARKER).exists()
    assert claim(str(made), stand_ins) == (str(made), True)
    assert (made / MARKER).exists()
    assert claim(str(made), stand_ins) == (str(made), False)  # a second task of the job
    assert kept_at(str(made), stand_ins) == str(made)


def test_a_path_this_machine_may_not_make_is_kept_in_a_stand_in(tmp_path: Path) -> None:
    """The JobManager's work dir under what is a file here (as under another user's home,
    or a read-only mount): the job's files go to a stand-in, found again by its path."""
    (tmp_path / "theirs").write_text("not a folder here")
    work_dir, stand_ins = str(tmp_path / "theirs" / "work" / "job-1"), str(tmp_path / "jobs")
    assert kept_at(work_dir, stand_ins) == work_dir  # nothing made yet
    kept, made = claim(work_dir, stand_ins)
    assert made and Path(kept).parent == tmp_path / "jobs" and (Path(kept) / MARKER).exists()
    assert claim(work_dir, stand_ins) == (kept, False)
    assert kept_at(work_dir, stand_ins) == kept
    other, _ = claim(str(tmp_path / "theirs" / "work" / "job-2"), stand_ins)
    assert other != kept
    os.utime(Path(kept) / MARKER, (1000.0, 1000.0))  # the older one, but in use
    gone = sweep(stand_ins, keep=0, max_age=10_000.0, in_use=[work_dir], stand_ins=stand_ins)
    assert gone == [other]
    assert Path(kept).is_dir()  # in use: never deleted


def test_only_marked_folders_beyond_the_limits_and_not_in_use_are_deleted(tmp_path) -> None:
    jobs = tmp_path / "jobs"
    for index in range(5):
        folder = jobs / f"job-{index}"
        claim(str(folder), str(tmp_path / "stand-ins"))
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


def test_a_claim_stands_for_the_jobs_next_tasks_for_a_while() -> None:
    from clusterdeck.core.taskmanager.jobfolders import Claims
    claims = Claims(fresh_for=30.0, most=2)
    assert claims.fresh("/jobs/a", now=0.0) is None
    claims.store("/jobs/a", "/stand-ins/a", now=0.0)
    assert claims.fresh("/jobs/a", now=29.0) == "/stand-ins/a"
    assert claims.fresh("/jobs/a", now=30.0) is None  # claimed again: the marker is touched
    claims.store("/jobs/b", "/jobs/b", now=1.0)
    claims.store("/jobs/a", "/stand-ins/a", now=2.0)
    claims.store("/jobs/c", "/jobs/c", now=3.0)  # three work dirs, two kept: b, the oldest, goes
    assert [claims.fresh(w, now=4.0) for w in ("/jobs/a", "/jobs/b", "/jobs/c")] == \
        ["/stand-ins/a", None, "/jobs/c"]
