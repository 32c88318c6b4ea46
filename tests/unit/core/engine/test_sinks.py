"""A file sink's publish: staged batches become ``part-<subtask>-<n>`` files; a later
attempt of the subtask replaces what an earlier one published; the first attempt of a
job's first run does not look for earlier parts (nothing can be there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterdeck.core.engine.sinks import FileSinkWriter, TextPartWriter, make_folder
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.errors import SubtaskFailed
from clusterdeck.core.jobapi.sinkfolders import STAGING
from clusterdeck.core.protocol.jobgraph import OperatorSpec


def writer(folder: Path, attempt_id: str, first: bool = False) -> FileSinkWriter:
    op = OperatorSpec("lines", plan.SINK_TEXT, "lines", {"path": str(folder)})
    return FileSinkWriter(op, 3, attempt_id, first)


def stage(sink: FileSinkWriter, *texts: str) -> None:
    """What Spark's writer leaves in the attempt's staging folder, one batch per text."""
    for index, text in enumerate(texts):
        batch = sink.staging / f"batch-{index}"
        batch.mkdir(parents=True)
        (batch / f"part-00000-{index}.txt").write_text(text)
        (batch / "_SUCCESS").write_text("")
    sink._batches = len(texts)


def test_publish_names_parts_by_subtask_and_removes_staging(tmp_path: Path) -> None:
    sink = writer(tmp_path, "job/sink#3/a0", first=True)
    stage(sink, "a\n", "b\n")
    published = sink.publish()
    assert [Path(f).name for f in published] == ["part-00003-000.txt", "part-00003-001.txt"]
    assert [Path(f).read_text() for f in published] == ["a\n", "b\n"]
    assert not (tmp_path / STAGING).exists()


def test_a_later_attempt_replaces_what_an_earlier_one_published(tmp_path: Path) -> None:
    earlier = writer(tmp_path, "job/sink#3/a0", first=True)
    stage(earlier, "old 1\n", "old 2\n")
    earlier.publish()
    other_subtask = tmp_path / "part-00004-000.txt"
    other_subtask.write_text("kept\n")
    later = writer(tmp_path, "job/sink#3/a1")
    stage(later, "new\n")
    later.publish()
    assert sorted(f.name for f in tmp_path.iterdir()) == ["part-00003-000.txt",
                                                         "part-00004-000.txt"]
    assert (tmp_path / "part-00003-000.txt").read_text() == "new\n"
    assert other_subtask.read_text() == "kept\n"


def test_the_first_attempt_does_not_search_for_earlier_parts(tmp_path: Path) -> None:
    """Its promise (no earlier part) is the JobMaster's: a stray part stays untouched."""
    stray = tmp_path / "part-00003-007.txt"
    stray.write_text("stray\n")
    sink = writer(tmp_path, "job/sink#3/a0", first=True)
    stage(sink, "a\n")
    sink.publish()
    assert stray.exists()


def test_records_written_where_this_machine_cannot_see_fail_instead_of_publishing_nothing(
        tmp_path: Path) -> None:
    """Executors of a Spark cluster (spark.master) write on their own disks: the batches
    the attempt wrote never appear in its staging folder here."""
    sink = writer(tmp_path, "job/sink#3/a0", first=True)
    sink._batches = 2
    with pytest.raises(SubtaskFailed, match="OutputNotVisible: 5 records were written "
                                            "for lines"):
        sink.publish(records_written=5)
    assert sink.publish(records_written=0) == []  # an attempt with no records is fine


def test_text_lines_written_from_python_are_published_as_parts(tmp_path: Path) -> None:
    """``write_lines`` (local execution) and Spark's workers (``TextPartWriter``) stage
    a part per non-empty partition, published like Spark's own files."""
    sink = writer(tmp_path, "job/vertex-1#3/a0", first=True)
    sink.write_lines(iter(["a", 1, ("b", 2), "é"]))
    sink.write_lines(iter([]))  # an empty batch stages no file
    published = sink.publish()
    assert [Path(f).name for f in published] == ["part-00003-000.txt"]
    assert Path(published[0]).read_bytes() == "a\n1\n('b', 2)\né\n".encode()
    assert not (tmp_path / STAGING).exists()


def test_a_part_that_fails_half_way_leaves_no_file_to_publish(tmp_path: Path) -> None:
    def records():
        yield "first"
        raise ValueError("user code")

    folder = tmp_path / "batch-0"
    parts = TextPartWriter(str(folder))(2, records())
    with pytest.raises(ValueError, match="user code"):
        list(parts)
    assert not (folder / "part-00002.txt").exists()


def test_a_staging_folder_is_made_while_another_attempt_removes_an_empty_parent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``discard`` of another attempt may remove a shared, empty ``_attempts`` parent
    between two steps of ``os.makedirs``: the folder is made again."""
    real = os.makedirs
    removed = []

    def racing(path: str, exist_ok: bool = False) -> None:
        if not removed:
            removed.append(path)
            raise FileNotFoundError(path)
        real(path, exist_ok=exist_ok)

    monkeypatch.setattr(os, "makedirs", racing)
    make_folder(str(tmp_path / "_attempts" / "job" / "batch-0"))
    assert removed and (tmp_path / "_attempts" / "job" / "batch-0").is_dir()
