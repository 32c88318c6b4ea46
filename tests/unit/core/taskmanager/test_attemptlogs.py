"""Attempt logs stay bounded: each keeps its start and its latest lines; few files are kept."""

from __future__ import annotations

import os
from pathlib import Path

from clusterdeck.core.taskmanager.attemptlogs import TAILS_KEPT, AttemptLogHandler


def size_of_attempt(folder: Path, stem: str) -> int:
    return sum(path.stat().st_size for path in folder.glob(f"{stem}.log*"))


def folder_listings(monkeypatch) -> list:
    """The folders os.scandir lists from now on (the pruning lists the attempt folder)."""
    listed: list = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: listed.append(path) or real_scandir(path))
    return listed


def test_a_short_log_is_one_whole_file(tmp_path: Path) -> None:
    logs = AttemptLogHandler(tmp_path, max_bytes=10_000)
    for i in range(10):
        logs.write("job/v#0/a0", f"line {i}")
    logs.ended("job/v#0/a0")
    assert logs.drain()
    assert (tmp_path / "job_v-0_a0.log").read_text().splitlines() == \
        [f"line {i}" for i in range(10)]
    assert not (tmp_path / "job_v-0_a0.log.end").exists()


def test_a_long_log_keeps_its_start_and_its_latest_lines_within_max_size(tmp_path: Path) -> None:
    logs = AttemptLogHandler(tmp_path, max_bytes=4000)
    for i in range(5000):
        logs.write("job/v#0/a0", f"line {i:05d}")
    logs.ended("job/v#0/a0")
    assert logs.drain()
    head = (tmp_path / "job_v-0_a0.log").read_text().splitlines()
    end = (tmp_path / "job_v-0_a0.log.end").read_text().splitlines()
    assert head[0] == "line 00000"
    assert "job_v-0_a0.log.end" in head[-1]
    assert end[-1] == "line 04999"
    assert (tmp_path / "job_v-0_a0.log.end.1").exists()
    assert size_of_attempt(tmp_path, "job_v-0_a0") <= 4000 + len(head[-1]) + 1


def test_one_huge_line_is_cut_to_its_end(tmp_path: Path) -> None:
    logs = AttemptLogHandler(tmp_path, max_bytes=4000)
    logs.write("job/v#0/a0", "x" * 100_000 + "THE END")
    logs.ended("job/v#0/a0")
    assert logs.drain()
    assert size_of_attempt(tmp_path, "job_v-0_a0") < 4000
    assert (tmp_path / "job_v-0_a0.log.end").read_text().endswith("THE END\n")


def test_the_oldest_attempt_logs_are_deleted_beyond_max_files(tmp_path: Path) -> None:
    logs = AttemptLogHandler(tmp_path, max_files=5)
    for i in range(20):
        logs.write(f"job/v#{i}/a0", "started")
        logs.forget(f"job/v#{i}/a0")
        assert logs.drain()
        os.utime(tmp_path / f"job_v-{i}_a0.log", (1000.0 + i, 1000.0 + i))
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        sorted(f"job_v-{i}_a0.log" for i in range(15, 20))


def test_only_the_latest_attempts_excerpts_stay_in_memory(tmp_path: Path) -> None:
    logs = AttemptLogHandler(tmp_path)
    for i in range(TAILS_KEPT + 50):
        logs.write(f"job/v#{i}/a0", "line")
    assert logs.excerpt("job/v#0/a0") == ()
    assert logs.excerpt(f"job/v#{TAILS_KEPT + 49}/a0") == ("line",)
    assert len(logs._tails) == TAILS_KEPT and len(logs._files) == TAILS_KEPT


def test_the_folder_is_pruned_once_per_fifth_of_the_limit(tmp_path: Path,
                                                         monkeypatch) -> None:
    logs = AttemptLogHandler(tmp_path, max_files=100)
    listed = folder_listings(monkeypatch)
    for i in range(300):
        logs.write(f"job/v#{i}/a0", "started")
        logs.forget(f"job/v#{i}/a0")
        assert logs.drain()
        assert len(list(tmp_path.iterdir())) <= 100
    assert len(listed) == 300 // 20
    assert len(list(tmp_path.iterdir())) >= 80


def test_a_line_is_on_disk_when_its_attempt_ends_or_once_held_for_a_while(
        tmp_path: Path, monkeypatch) -> None:
    import clusterdeck.core.taskmanager.attemptlogs as attemptlogs
    logs = AttemptLogHandler(tmp_path)
    log = tmp_path / "job_v-0_a0.log"
    logs.write("job/v#0/a0", "starting")
    logs.flush_held()
    assert not log.exists()  # held: a short attempt writes its log once, as it ends
    logs.ended("job/v#0/a0")
    assert logs.drain()
    assert log.read_text() == "starting\n"
    assert logs._files == {}
    logs.write("job/v#0/a0", "a late line")  # opens it again, after what is there
    logs.ended("job/v#0/a0")
    assert logs.drain()
    assert log.read_text() == "starting\na late line\n"
    assert logs.excerpt("job/v#0/a0") == ("starting", "a late line")
    # An attempt that runs on (or hangs): its lines reach the disk within HOLD, and every
    # line after that at once.
    monkeypatch.setattr(attemptlogs, "HOLD", 0.0)
    logs.write("job/v#1/a0", "starting")
    logs.flush_held()  # on the caller's thread: a long attempt's lines are not held up
    assert (tmp_path / "job_v-1_a0.log").read_text() == "starting\n"
    logs.write("job/v#1/a0", "split 1")
    assert (tmp_path / "job_v-1_a0.log").read_text() == "starting\nsplit 1\n"
    logs.ended("job/v#1/a0")
    assert logs.drain()


def test_a_step_reads_as_a_debug_line_of_the_attempt_logger(tmp_path: Path) -> None:
    import logging
    import re

    logs = AttemptLogHandler(tmp_path)
    logs.step("job/v#0/a0", "attempt job/v#0/a0 finished")
    logs.ended("job/v#0/a0")
    assert logs.drain()
    record = logging.LogRecord("clusterdeck.attempt", logging.DEBUG, __file__, 1,
                               "attempt job/v#0/a0 finished", None, None)
    through_logging = logs.format(record)
    written = (tmp_path / "job_v-0_a0.log").read_text().rstrip("\n")
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    assert re.fullmatch(stamp + r" DEBUG clusterdeck\.attempt: attempt job/v#0/a0 finished",
                        written)
    assert written[24:] == through_logging[24:]  # the same line, but for the time


def test_an_unwritable_folder_costs_the_task_its_lines_not_its_life(
        tmp_path: Path, caplog) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the folder should be")
    logs = AttemptLogHandler(blocked)
    logs.step("job/v#0/a0", "attempt job/v#0/a0 starting")
    logs.step("job/v#0/a0", "attempt job/v#0/a0 finished")
    logs.ended("job/v#0/a0")
    assert logs.drain()
    assert logs.excerpt("job/v#0/a0")[-1].endswith("attempt job/v#0/a0 finished")
    warnings = [r for r in caplog.records if "cannot write attempt logs" in r.getMessage()]
    assert len(warnings) == 1


def test_a_quiet_attempt_that_finished_goes_to_the_journal_in_one_piece(tmp_path: Path) -> None:
    logs = AttemptLogHandler(tmp_path, journal="taskmanager-1")
    for i in (0, 1):
        logs.step(f"job/v#{i}/a0", f"attempt job/v#{i}/a0 starting")
    for i in (0, 1):
        logs.step(f"job/v#{i}/a0", f"attempt job/v#{i}/a0 finished")
        logs.ended(f"job/v#{i}/a0", finished=True)
    assert logs.drain()
    assert [p.name for p in tmp_path.iterdir()] == ["taskmanager-1.journal"]
    lines = (tmp_path / "taskmanager-1.journal").read_text().splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "attempt job/v#0/a0 starting", "attempt job/v#0/a0 finished",
        "attempt job/v#1/a0 starting", "attempt job/v#1/a0 finished"]
    assert logs.excerpt("job/v#1/a0")[-1].endswith("attempt job/v#1/a0 finished")


def test_an_attempt_that_logged_lines_of_its_own_keeps_its_own_file(tmp_path: Path) -> None:
    import logging

    logs = AttemptLogHandler(tmp_path)
    logs.step("job/v#0/a0", "attempt job/v#0/a0 starting")
    record = logging.LogRecord("user", logging.WARNING, __file__, 1, "odd row", None, None)
    record.threadName = "task:job/v#0/a0"  # as logged on the attempt's slot thread
    logs.emit(record)
    logs.ended("job/v#0/a0", finished=True)
    logs.step("job/v#1/a0", "attempt job/v#1/a0 starting")
    logs.ended("job/v#1/a0", finished=False)  # failed or cancelled
    assert logs.drain()
    assert (tmp_path / "job_v-0_a0.log").read_text().splitlines()[-1].endswith("odd row")
    assert (tmp_path / "job_v-1_a0.log").exists()
    assert not (tmp_path / "taskmanager.journal").exists()


def test_the_slot_thread_makes_no_file_call_for_its_attempt(tmp_path: Path,
                                                            monkeypatch) -> None:
    """Every file call lets go of the GIL, which a busy TaskManager's other threads then
    hold for milliseconds: a slot thread only hands its lines over."""
    import threading

    callers = []
    for name in ("open", "write", "close", "replace", "scandir"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *a, _real=real, **k: (
            callers.append(threading.current_thread().name), _real(*a, **k))[1])
    logs = AttemptLogHandler(tmp_path, max_files=5)
    for i in range(12):
        logs.step(f"job/v#{i}/a0", "attempt starting")
        logs.ended(f"job/v#{i}/a0", finished=i % 2 == 0)
    assert callers == []
    assert logs.drain()
    assert callers and set(callers) == {"attempt-logs"}
    assert (tmp_path / "taskmanager.journal").read_text().count("attempt starting") == 6


def test_the_journal_is_rotated_past_four_times_the_largest_attempt_log(tmp_path: Path) -> None:
    logs = AttemptLogHandler(tmp_path, max_bytes=1000)
    for i in range(100):
        logs.step(f"job/v#{i}/a0", "x" * 100)
        logs.ended(f"job/v#{i}/a0", finished=True)
        assert logs.drain()
    journal = tmp_path / "taskmanager.journal"
    assert journal.stat().st_size <= 4000
    assert (tmp_path / "taskmanager.journal.1").stat().st_size <= 4000
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        ["taskmanager.journal", "taskmanager.journal.1"]


def test_attempts_that_go_to_the_journal_cost_no_pruning(tmp_path: Path, monkeypatch) -> None:
    logs = AttemptLogHandler(tmp_path, max_files=10)
    listed = folder_listings(monkeypatch)
    for i in range(100):
        logs.step(f"job/v#{i}/a0", "attempt starting")
        logs.ended(f"job/v#{i}/a0", finished=True)
    assert logs.drain()
    assert listed == []
    assert [p.name for p in tmp_path.iterdir()] == ["taskmanager.journal"]


def test_a_disk_far_behind_drops_lines_not_memory_nor_the_tasks_time(
        tmp_path: Path, monkeypatch, caplog) -> None:
    """At most DISK_BACKLOG ended attempts wait for the disk thread; the lines of those
    that end beyond it are dropped (their excerpts stay), said once as it starts and once
    as the disk catches up, with how many lines were lost."""
    import threading

    from clusterdeck.core.taskmanager import attemptfiles, attemptlogs
    monkeypatch.setattr(attemptfiles, "DISK_BACKLOG", 4)
    monkeypatch.setattr(attemptlogs, "DISK_BACKLOG", 4)
    logs = AttemptLogHandler(tmp_path, journal="taskmanager-1")
    stalled = threading.Event()
    assert logs._disk.put(lambda: stalled.wait(10))  # a disk that hangs
    for i in range(10):
        logs.step(f"job/v#{i}/a0", f"attempt job/v#{i}/a0 finished")
        logs.ended(f"job/v#{i}/a0", finished=True)  # returns at once: nothing blocks
    assert logs._disk._work.qsize() <= 4
    behind = [r for r in caplog.records if "attempts behind" in r.getMessage()]
    assert len(behind) == 1
    assert logs.excerpt("job/v#9/a0")[-1].endswith("attempt job/v#9/a0 finished")
    stalled.set()
    assert logs.drain()
    journal = (tmp_path / "taskmanager-1.journal").read_text().splitlines()
    caught_up = [r.getMessage() for r in caplog.records if "caught up" in r.getMessage()]
    assert caught_up == [f"attempt logs in {tmp_path}: the disk caught up; "
                         f"{10 - len(journal)} lines were dropped"]
    assert 0 < len(journal) < 10


def test_the_warning_of_a_disk_far_behind_said_on_a_slot_thread_does_not_deadlock(
        tmp_path: Path, monkeypatch) -> None:
    """The handler is on the root logger and says its warning under its own lock, on the
    slot thread whose attempt ends: it must not take that lock again for its own word."""
    import logging
    import threading

    from clusterdeck.core.taskmanager import attemptfiles
    from clusterdeck.core.taskmanager.attemptlogs import thread_name
    monkeypatch.setattr(attemptfiles, "DISK_BACKLOG", 1)
    logs = AttemptLogHandler(tmp_path, journal="taskmanager-1")
    root = logging.getLogger()
    root.addHandler(logs)
    stalled = threading.Event()
    try:
        logs._disk.put(lambda: stalled.wait(10))

        def attempt(i: int) -> None:
            logs.step(f"job/v#{i}/a0", "finished")
            logs.ended(f"job/v#{i}/a0", finished=True)

        slot = threading.Thread(target=lambda: [attempt(i) for i in range(5)],
                                name=thread_name("job/v#0/a0"), daemon=True)
        slot.start()
        slot.join(5)
        assert not slot.is_alive()
    finally:
        stalled.set()
        root.removeHandler(logs)
        logs.close()
