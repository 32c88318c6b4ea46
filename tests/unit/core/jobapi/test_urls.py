"""Inputs and outputs named by URLs: passed to Spark untouched, bound to no host."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.jobapi.arguments import input_paths, sink_path
from clusterdeck.core.jobapi.inputsplits import plan_file_splits
from clusterdeck.core.protocol.jobgraph import is_url


def test_urls_are_told_from_paths() -> None:
    for url in ("s3a://bucket/data/*.csv", "hdfs://nn:8020/x", "file:///mnt/shared/a.txt"):
        assert is_url(url)
    for path in ("data/words.txt", "/abs/a.txt", "C:relative", "weird:name.txt", "./s3a:/x"):
        assert not is_url(path)


def test_a_url_source_is_kept_as_written_and_is_one_whole_split(tmp_path: Path) -> None:
    local = tmp_path / "words.txt"
    local.write_text("a b\n")
    sources = input_paths("read_text", ["s3a://bucket/in/*.txt", f"file://{local}", "rel.txt"])
    assert sources[:2] == ["s3a://bucket/in/*.txt", f"file://{local}"]
    assert sources[2].startswith("/")
    splits = plan_file_splits(sources[:2], vertex_id="v")
    assert [(s.path, s.length, s.hosts) for s in splits] == [
        ("s3a://bucket/in/*.txt", -1, ()), (f"file://{local}", -1, ())]


def test_a_sink_url_is_a_shared_mount_or_refused_clearly() -> None:
    assert sink_path("write_csv", "file:///mnt/shared/out") == "/mnt/shared/out"
    with pytest.raises(ValueError, match="file sinks publish into a folder"):
        sink_path("write_csv", "s3a://bucket/out")
