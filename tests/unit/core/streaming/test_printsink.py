"""The print sink: each record a line of the task's printed output, the same bytes in its
output file and its live feed, at least once (nothing waits for a checkpoint)."""

from __future__ import annotations

from pathlib import Path

from clusterdeck.core.engine.liveoutput import LiveOutput
from clusterdeck.core.streaming import printsink
from clusterdeck.core.streaming.printsink import PrintSink


def test_lines_go_to_the_output_file_as_they_are_written(tmp_path: Path) -> None:
    sink = PrintSink(tmp_path / "output" / "a.stdout", subtask=0, parallelism=1)
    sink.write(["one", "two"])
    assert (tmp_path / "output" / "a.stdout").read_text() == "one\ntwo\n"
    sink.write([])
    sink.write(["three"])
    sink.close()
    assert (tmp_path / "output" / "a.stdout").read_text() == "one\ntwo\nthree\n"
    assert sink.printed == len("one\ntwo\nthree\n") and sink.tail == "one\ntwo\nthree\n"


def test_with_several_subtasks_each_line_names_its_subtask_from_one(tmp_path: Path) -> None:
    sink = PrintSink(tmp_path / "b.stdout", subtask=1, parallelism=3)
    sink.write(["x"])
    sink.close()
    assert (tmp_path / "b.stdout").read_text() == "2> x\n"


def test_the_live_feed_gets_the_files_bytes_at_the_files_offsets(tmp_path: Path) -> None:
    live = LiveOutput()
    sink = PrintSink(tmp_path / "c.stdout", 0, 1, lambda text: live.write("stdout", text))
    sink.write(["é", "b"])
    sink.write(["c"])
    pieces = live.take(100, 10)
    data = (tmp_path / "c.stdout").read_bytes()
    assert [(piece.offset, piece.text) for piece in pieces] == [(0, "é\nb\nc\n")]
    assert data.decode() == "é\nb\nc\n"


def test_a_checkpoint_keeps_nothing_and_commits_nothing(tmp_path: Path) -> None:
    sink = PrintSink(tmp_path / "d.stdout", 0, 1)
    sink.write(["a"])
    assert sink.snapshot(1) is None
    sink.committed(1)
    assert (tmp_path / "d.stdout").read_text() == "a\n"


def test_only_the_end_of_what_was_printed_is_kept_in_memory(tmp_path: Path,
                                                            monkeypatch) -> None:
    monkeypatch.setattr(printsink, "TAIL_CHARS", 4)
    sink = PrintSink(tmp_path / "e.stdout", 0, 1)
    sink.write(["abc", "def"])
    assert sink.tail == "def\n"
    assert (tmp_path / "e.stdout").read_text() == "abc\ndef\n"
