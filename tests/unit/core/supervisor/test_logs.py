"""ProcessLog: raw lines from a pipe into a size-rotated file, without a child process."""

import os
from pathlib import Path

from clusterdeck.core.supervisor._logs import ProcessLog


def feed(log: ProcessLog, data: bytes) -> None:
    read_end, write_end = os.pipe()
    pump = log.pump(os.fdopen(read_end, "rb"), "test")
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(data)
    pump.join(10)
    assert not pump.is_alive()


def test_lines_are_written_as_they_came(tmp_path: Path):
    log = ProcessLog(tmp_path / "tm.log", max_bytes=1_000_000, backup_count=1)

    feed(log, b"2024-01-01 INFO first %s {x}\n\xc3\xa9t\xc3\xa9\n")
    log.close(1)

    text = (tmp_path / "tm.log").read_text(encoding="utf-8")
    assert text == "2024-01-01 INFO first %s {x}\nété\n"


def test_a_last_line_without_newline_is_kept(tmp_path: Path):
    log = ProcessLog(tmp_path / "tm.log", max_bytes=1_000_000, backup_count=1)

    feed(log, b"complete\npartial")
    log.close(1)

    assert (tmp_path / "tm.log").read_text(encoding="utf-8") == "complete\npartial\n"


def test_the_file_rotates_between_lines_and_keeps_the_backup_count(tmp_path: Path):
    log = ProcessLog(tmp_path / "tm.log", max_bytes=2000, backup_count=2)
    lines = [f"line {index:05d} ".ljust(49, "x") + "\n" for index in range(1000)]

    feed(log, "".join(lines).encode())
    log.close(1)

    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["tm.log", "tm.log.1", "tm.log.2"]
    for name in files:
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert len(text.encode()) <= 2000
        assert all(line + "\n" in lines for line in text.splitlines())
    assert (tmp_path / "tm.log").read_text(encoding="utf-8").endswith(lines[-1])


def test_supervisor_notes_are_marked_lines(tmp_path: Path):
    log = ProcessLog(tmp_path / "tm.log", max_bytes=1_000_000, backup_count=1)

    log.note("pid 12 exited with code 1")
    log.close(1)

    line = (tmp_path / "tm.log").read_text(encoding="utf-8")
    assert line.endswith(" [supervisor] pid 12 exited with code 1\n")


def test_writing_after_close_reopens_the_file(tmp_path: Path):
    log = ProcessLog(tmp_path / "tm.log", max_bytes=1_000_000, backup_count=1)
    feed(log, b"before\n")
    log.close(1)

    feed(log, b"after\n")
    log.close(1)

    assert (tmp_path / "tm.log").read_text(encoding="utf-8") == "before\nafter\n"
