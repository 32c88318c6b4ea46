"""The watched-folder source: which files it reads and in what order, one subtask per
file, replay from any position giving exactly the rest, and the clear failures for files
that vanish or change under it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterdeck.core.rpc import from_data, to_data
from clusterdeck.core.streaming import foldersource
from clusterdeck.core.streaming.foldersource import (
    LOCAL,
    DoneFile,
    FileEntry,
    FolderAccess,
    FolderPosition,
    FolderSource,
    FolderSourceError,
    owner,
)

INTERVAL = 1.0


def drop(folder: Path, name: str, text: str, mtime: int) -> Path:
    """A complete file, its modification time ``mtime`` seconds (the order it is read in)."""
    path = folder / name
    path.write_bytes(text.encode())
    os.utime(path, ns=(mtime * 10**9, mtime * 10**9))
    return path


def source(folder: Path, subtask: int = 0, parallelism: int = 1, **kwargs) -> FolderSource:
    return FolderSource(folder, subtask, parallelism, monitor_interval=INTERVAL, **kwargs)


def read_all(src: FolderSource, start: float = 0.0, limit: int = 1000,
             listings: int = 3) -> list[str]:
    """Everything it reads over ``listings`` listings an interval apart (a file needs two
    to be complete), polling until nothing more comes at each."""
    lines: list[str] = []
    for step in range(listings):
        while batch := src.poll(start + step * INTERVAL, limit):
            lines.extend(batch)
    return lines


def test_complete_files_are_read_line_by_line_in_mtime_then_name_order(tmp_path):
    drop(tmp_path, "b.txt", "b1\nb2\n", mtime=20)
    drop(tmp_path, "a.txt", "a1\n", mtime=20)
    drop(tmp_path, "z.txt", "z1\nz2", mtime=10)  # oldest first; no newline at the end
    assert read_all(source(tmp_path)) == ["z1", "z2", "a1", "b1", "b2"]


def test_a_file_is_read_only_once_it_stayed_the_same_for_a_monitor_interval(tmp_path):
    src = source(tmp_path)
    path = drop(tmp_path, "log.txt", "one\n", mtime=1)
    assert src.poll(0.0, 100) == []           # first seen
    drop(tmp_path, "log.txt", "one\ntwo\n", mtime=2)
    assert src.poll(1.0, 100) == []           # it changed: seen again from here
    assert src.poll(1.5, 100) == []           # not listed again before the interval
    assert src.poll(2.0, 100) == ["one", "two"]
    assert path.exists()


def test_hidden_names_other_patterns_and_subfolders_are_not_read(tmp_path):
    drop(tmp_path, ".inflight.txt", "no\n", mtime=1)
    drop(tmp_path, "_SUCCESS", "", mtime=1)
    drop(tmp_path, "notes.md", "no\n", mtime=1)
    (tmp_path / "sub").mkdir()
    drop(tmp_path / "sub", "deep.txt", "no\n", mtime=1)
    drop(tmp_path, "yes.txt", "yes\n", mtime=1)
    assert read_all(source(tmp_path, pattern="*.txt")) == ["yes"]


def test_a_file_renamed_from_its_hidden_name_is_read_whole(tmp_path):
    src = source(tmp_path)
    hidden = drop(tmp_path, ".part.txt", "a\n", mtime=1)
    assert src.poll(0.0, 100) == []
    hidden.write_text("a\nb\n")
    hidden.rename(tmp_path / "part.txt")
    assert read_all(src, start=1.0) == ["a", "b"]


def test_line_endings_blank_lines_and_empty_files(tmp_path):
    drop(tmp_path, "a", "crlf\r\n\nlast", mtime=1)
    drop(tmp_path, "b", "", mtime=2)
    drop(tmp_path, "c", "\n", mtime=3)
    assert read_all(source(tmp_path)) == ["crlf", "", "last", ""]


def test_bytes_that_are_not_utf8_become_replacement_characters(tmp_path):
    (tmp_path / "bad").write_bytes(b"caf\xe9\n")
    assert read_all(source(tmp_path)) == ["caf\ufffd"]


def test_every_file_is_read_by_one_subtask_the_same_on_every_run(tmp_path):
    names = [f"file-{i}.txt" for i in range(40)]
    for i, name in enumerate(names):
        drop(tmp_path, name, f"{name}\n", mtime=i)
    per_subtask = [read_all(source(tmp_path, s, 3)) for s in range(3)]
    assert sorted(line for lines in per_subtask for line in lines) == sorted(names)
    assert all(lines for lines in per_subtask)  # spread, not all on one
    for s, lines in enumerate(per_subtask):
        assert all(owner(line, 3) == s for line in lines)
    assert owner("file-0.txt", 3) == 1442182092949873401 % 3  # not Python's salted hash
    assert {owner(f"f{n}.txt", 2) for n in range(4)} == {0, 1}  # similar names spread


def test_files_that_appear_later_are_read_as_they_come(tmp_path):
    src = source(tmp_path)
    drop(tmp_path, "1", "one\n", mtime=1)
    assert read_all(src, start=0.0) == ["one"]
    drop(tmp_path, "2", "two\n", mtime=2)
    assert read_all(src, start=10.0) == ["two"]
    assert src.position().done == (DoneFile("1", 10**9), DoneFile("2", 2 * 10**9))


def test_a_poll_reads_at_most_limit_lines_and_its_byte_budget(tmp_path, monkeypatch):
    drop(tmp_path, "a", "".join(f"line {i}\n" for i in range(10)), mtime=1)
    src = source(tmp_path)
    assert src.poll(0.0, 3) == []
    assert src.poll(1.0, 3) == ["line 0", "line 1", "line 2"]
    monkeypatch.setattr(foldersource, "POLL_BYTES", 14)  # two lines of 7 bytes
    assert src.poll(1.1, 100) == ["line 3", "line 4"]
    assert src.position().offset == 35


def test_a_line_longer_than_the_bound_fails_clearly(tmp_path):
    drop(tmp_path, "ok", "x" * 8 + "\n", mtime=1)
    drop(tmp_path, "long", "short\n" + "y" * 9 + "\nafter\n", mtime=2)
    src = source(tmp_path, max_line_bytes=8)
    with pytest.raises(FolderSourceError, match=r"long: the line at byte 6 is longer than 8"):
        read_all(src)


def test_a_long_line_without_a_newline_in_the_first_read_is_read_whole(tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(foldersource, "READ_CHUNK", 4)
    drop(tmp_path, "a", "0123456789\nab\n", mtime=1)
    assert read_all(source(tmp_path)) == ["0123456789", "ab"]


@pytest.mark.parametrize("limit", [1, 2, 3, 7])
def test_restored_at_any_position_it_reads_exactly_the_rest(tmp_path, limit):
    for i in range(6):
        drop(tmp_path, f"f{i}", "".join(f"{i}-{j}\n" for j in range(i + 1)), mtime=i)
    expected = read_all(source(tmp_path))
    src, seen, positions = source(tmp_path), [], []
    for now in (0.0, 1.0, 2.0):
        while batch := src.poll(now, limit):
            seen.append(batch)
            positions.append(src.position())
    assert [line for batch in seen for line in batch] == expected
    for k, position in enumerate(positions):
        data = json.loads(json.dumps(to_data(position)))  # as a checkpoint keeps it
        restored = source(tmp_path, position=from_data(data, FolderPosition))
        before = [line for batch in seen[:k + 1] for line in batch]
        assert before + read_all(restored, start=5.0, limit=limit) == expected, k


def test_files_that_arrive_after_a_checkpoint_are_read_after_the_restore(tmp_path):
    drop(tmp_path, "a", "a1\na2\n", mtime=1)
    src = source(tmp_path)
    src.poll(0.0, 10)
    assert src.poll(1.0, 1) == ["a1"]
    position = src.position()
    drop(tmp_path, "b", "b1\n", mtime=2)
    assert read_all(source(tmp_path, position=position), start=2.0) == ["a2", "b1"]


def test_restored_where_its_file_in_progress_vanished_it_fails_clearly(tmp_path):
    path = drop(tmp_path, "a", "a1\na2\n", mtime=1)
    src = source(tmp_path)
    src.poll(0.0, 10)
    src.poll(1.0, 1)
    position = src.position()
    path.unlink()
    with pytest.raises(FolderSourceError, match=r"a, the checkpoint's file in progress, "
                                                r"vanished \(read up to byte 3 of 6\)"):
        source(tmp_path, position=position)


def test_restored_where_its_file_in_progress_changed_it_fails_clearly(tmp_path):
    drop(tmp_path, "a", "a1\na2\n", mtime=1)
    src = source(tmp_path)
    src.poll(0.0, 10)
    src.poll(1.0, 1)
    drop(tmp_path, "a", "a1\n", mtime=5)
    with pytest.raises(FolderSourceError, match="changed under the source"):
        source(tmp_path, position=src.position())


def test_a_file_deleted_while_being_read_fails_the_task(tmp_path):
    path = drop(tmp_path, "a", "a1\na2\n", mtime=1)
    src = source(tmp_path)
    src.poll(0.0, 10)
    assert src.poll(1.0, 1) == ["a1"]
    path.unlink()
    with pytest.raises(FolderSourceError, match="vanished"):
        src.poll(1.1, 10)


def test_a_file_truncated_while_being_read_fails_the_task(tmp_path):
    path = drop(tmp_path, "a", "a1\na2\na3\n", mtime=1)
    src = source(tmp_path)
    src.poll(0.0, 10)
    assert src.poll(1.0, 1) == ["a1"]
    with open(path, "r+b") as file:
        file.truncate(4)
    os.utime(path, ns=(10**9, 10**9))  # even with its old mtime
    with pytest.raises(FolderSourceError, match="changed under the source: 9 bytes"):
        src.poll(1.1, 10)


def test_a_read_that_comes_short_fails_even_when_stat_did_not_see_it(tmp_path):
    drop(tmp_path, "a", "a1\na2\n", mtime=1)
    access = FolderAccess(LOCAL.list_files, LOCAL.stat, lambda path, offset, size: b"a")
    src = FolderSource(tmp_path, 0, 1, monitor_interval=INTERVAL, access=access)
    src.poll(0.0, 10)
    with pytest.raises(FolderSourceError, match="ended at byte 1 of 6: truncated"):
        src.poll(1.0, 10)


def test_a_complete_file_that_vanishes_before_it_is_read_fails_the_task(tmp_path):
    drop(tmp_path, "a", "a1\n", mtime=1)
    second = drop(tmp_path, "b", "b1\n", mtime=2)
    src = source(tmp_path)
    src.poll(0.0, 10)
    assert src.poll(1.0, 1) == ["a1"]  # b is complete and queued
    second.unlink()
    with pytest.raises(FolderSourceError, match="b was complete and vanished"):
        src.poll(2.0, 10)


def test_a_file_deleted_while_still_being_written_is_forgotten(tmp_path):
    path = drop(tmp_path, "tmp", "x\n", mtime=1)
    src = source(tmp_path)
    src.poll(0.0, 10)  # seen, not complete yet
    path.unlink()
    assert read_all(src, start=1.0) == []


def test_done_files_gone_from_the_folder_leave_the_position(tmp_path):
    for i in range(3):
        drop(tmp_path, f"f{i}", "x\n", mtime=i)
    src = source(tmp_path)
    read_all(src)
    (tmp_path / "f1").unlink()
    src.poll(10.0, 10)
    assert [d.name for d in src.position().done] == ["f0", "f2"]


def test_beyond_its_bound_the_oldest_done_files_go_behind_the_horizon(tmp_path, caplog):
    for i in range(5):
        drop(tmp_path, f"f{i}", f"{i}\n", mtime=10 + i)
    src = source(tmp_path, done_kept=2)
    assert read_all(src) == ["0", "1", "2", "3", "4"]
    position = src.position()
    assert [d.name for d in position.done] == ["f3", "f4"]
    assert (position.horizon_mtime_ns, position.horizon_name) == (12 * 10**9, "f2")
    restored = source(tmp_path, position=position, done_kept=2)
    assert restored.poll(5.0, 10) == []  # f0-f2 are still there: done, and no warning
    drop(tmp_path, "late-old", "old\n", mtime=11)  # an old file moved in late
    drop(tmp_path, "late-new", "new\n", mtime=20)
    assert read_all(restored, start=6.0) == ["new"]
    assert [r.getMessage().split(": ")[1].split(" ")[0] for r in caplog.records] == [
        "late-old"]


def test_the_horizon_never_passes_a_known_file_not_yet_read(tmp_path):
    drop(tmp_path, "f0", "0\n", mtime=1)
    drop(tmp_path, "f1", "1\n", mtime=2)
    src = source(tmp_path, done_kept=1)
    src.poll(0.0, 10)
    assert src.poll(1.0, 1) == ["0"]
    drop(tmp_path, "f-old", "old\n", mtime=0)  # appears late, older than all
    assert src.poll(2.0, 0) == []  # listed: known, not complete yet
    assert src.poll(2.5, 1) == ["1"]
    position = src.position()  # two done of one allowed: f0 may not pass f-old
    assert [d.name for d in position.done] == ["f0", "f1"] and position.horizon_name == ""
    assert src.poll(3.0, 10) == ["old"]
    position = src.position()
    assert [d.name for d in position.done] == ["f1"]
    assert (position.horizon_mtime_ns, position.horizon_name) == (10**9, "f0")


def test_stop_when_idle_ends_once_nothing_changed_for_that_long(tmp_path):
    src = source(tmp_path, stop_when_idle=3.0)
    drop(tmp_path, "a", "a\n", mtime=1)
    assert read_all(src) == ["a"]      # listed at 0, 1, 2; read at 1
    src.poll(3.0, 10)
    assert not src.exhausted
    drop(tmp_path, "zzz-other", "", mtime=2)  # any change in the folder is activity
    src.poll(4.0, 10)
    src.poll(6.9, 10)
    assert not src.exhausted
    src.poll(7.0, 10)
    assert src.exhausted and src.poll(8.0, 10) == []


def test_without_stop_when_idle_it_runs_for_ever(tmp_path):
    src = source(tmp_path)
    for now in range(0, 10_000, 100):
        src.poll(float(now), 10)
    assert not src.exhausted


def test_seconds_to_next_is_zero_with_work_else_until_the_next_listing(tmp_path):
    src = source(tmp_path)
    assert src.seconds_to_next(0.0) == 0.0  # never listed
    src.poll(0.0, 10)
    assert src.seconds_to_next(0.25) == 0.75
    drop(tmp_path, "a", "a\nb\n", mtime=1)
    src.poll(1.0, 10)
    src.poll(2.0, 1)
    assert src.seconds_to_next(2.1) == 0.0


def test_a_missing_folder_fails_clearly(tmp_path):
    with pytest.raises(FolderSourceError, match="does not exist"):
        source(tmp_path / "nope").poll(0.0, 10)


def test_a_position_of_another_parallelism_is_refused(tmp_path):
    with pytest.raises(FolderSourceError, match="of 2 subtasks cannot be restored with 3"):
        source(tmp_path, 0, 3, position=FolderPosition(2))


def test_a_position_round_trips_as_json(tmp_path):
    position = FolderPosition(2, (DoneFile("a", 1), DoneFile("b", 2)), 0, "z",
                              FileEntry("c", 10, 3), 4)
    data = json.loads(json.dumps(to_data(position)))
    assert from_data(data, FolderPosition) == position
