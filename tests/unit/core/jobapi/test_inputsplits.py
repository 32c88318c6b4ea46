"""Input splits: planning them, and reading every line exactly once across them."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from clusterdeck.core.jobapi.inputsplits import (
    fair_share,
    part_bounds,
    plan_file_splits,
    plan_splits,
    read_lines,
)
from clusterdeck.core.protocol.jobgraph import InputSplit, JobVertex, OperatorSpec


def lines_of(splits) -> list[str]:
    return [line for s in splits for line in read_lines(s.path, s.start, s.length)]


def test_small_files_are_one_split_each_in_name_order(tmp_path):
    for name in ("b.txt", "a.txt", "_SUCCESS", ".hidden"):
        (tmp_path / name).write_text("x\n")
    splits = plan_file_splits(str(tmp_path), 1024, vertex_id="vertex-1")
    assert [(s.split_id, Path(s.path).name, s.start, s.length, s.vertex_id) for s in splits] == [
        (0, "a.txt", 0, -1, "vertex-1"), (1, "b.txt", 0, -1, "vertex-1")]


def test_globs_and_lists_of_paths_are_expanded_once(tmp_path):
    for name in ("1.log", "2.log", "3.txt"):
        (tmp_path / name).write_text("x\n")
    splits = plan_file_splits([str(tmp_path / "*.log"), str(tmp_path / "1.log")], 1024)
    assert [Path(s.path).name for s in splits] == ["1.log", "2.log"]


def test_a_pattern_matching_nothing_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no input files match"):
        plan_file_splits(str(tmp_path / "*.csv"), 1024)


def test_a_big_file_is_cut_into_blocks_with_a_larger_last_one(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 1005)
    splits = plan_file_splits(str(path), 100)
    assert [(s.start, s.length) for s in splits] == [(i * 100, 100) for i in range(9)] + [
        (900, 105)]


def test_csv_files_are_never_cut(tmp_path):
    (tmp_path / "big.csv").write_bytes(b"a,b\n" * 1000)
    vertex = JobVertex("vertex-1", "csv", 2, (OperatorSpec(
        "op-1", "source.csv", "csv", {"paths": [str(tmp_path / "big.csv")]}),))
    assert [(s.start, s.length) for s in plan_splits(vertex, 100)] == [(0, -1)]


@pytest.mark.parametrize("name", ["big.txt.gz", "big.TXT.BZ2", "big.txt.zst"])
def test_a_compressed_text_file_is_never_cut(tmp_path, name):
    """Spark's text reader decompresses it whole; a byte range of it is not lines (a
    small one under a high parallelism was cut, and read as garbage)."""
    (tmp_path / name).write_bytes(b"x" * 1005)
    assert [(s.start, s.length) for s in plan_splits(text_source(
        [str(tmp_path / name)], 4), 100)] == [(0, -1)]


def text_source(paths: list[str], parallelism: int) -> JobVertex:
    return JobVertex("vertex-1", "text", parallelism, (OperatorSpec(
        "op-1", "source.text", "text", {"paths": paths}),))


def test_a_small_text_input_is_cut_into_a_split_per_subtask(tmp_path):
    path = tmp_path / "small.txt"
    lines = [f"line {i}" for i in range(400)]
    path.write_text("\n".join(lines) + "\n")
    size = path.stat().st_size
    splits = plan_splits(text_source([str(path)], 4), 32 * 1024 * 1024)
    assert len(splits) == 4
    assert all(s.length <= -(-size // 4) for s in splits)
    assert lines_of(splits) == lines
    assert all(list(read_lines(s.path, s.start, s.length)) for s in splits)


def test_a_big_text_input_keeps_the_block_size_whatever_the_parallelism(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 1005)
    assert [(s.start, s.length) for s in plan_splits(text_source([str(path)], 4), 100)] == \
        [(i * 100, 100) for i in range(9)] + [(900, 105)]


def test_small_files_under_a_high_parallelism_stay_one_split_each(tmp_path):
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("one line\n" * 10)
    splits = plan_splits(text_source([str(tmp_path)], 2), 1024)
    assert [(Path(s.path).name, s.start, s.length) for s in splits] == [
        ("a.txt", 0, -1), ("b.txt", 0, -1), ("c.txt", 0, -1)]


def test_a_subtasks_fair_share_is_the_sized_input_over_the_parallelism(tmp_path):
    whole = tmp_path / "whole.csv"
    whole.write_bytes(b"a,b\n" * 250)  # 1000 bytes, read whole
    splits = [InputSplit(0, "v", path=str(whole)),
              InputSplit(1, "v", path=str(tmp_path / "cut.txt"), start=0, length=1001),
              InputSplit(2, "v", path="s3a://bucket/elsewhere.txt")]  # no size known here
    assert fair_share(splits, 4) == 501  # 2001 bytes over 4 subtasks, rounded up
    assert fair_share(splits[2:], 4) == 0
    assert fair_share([InputSplit(0, "v", part=0, parts=2)], 2) == 0


def test_collections_and_ranges_are_split_into_one_part_per_subtask():
    vertex = JobVertex("vertex-1", "range", 3, (OperatorSpec(
        "op-1", "source.range", "range", {"start": 0, "end": 10}),))
    assert [(s.split_id, s.part, s.parts) for s in plan_splits(vertex)] == [
        (0, 0, 3), (1, 1, 3), (2, 2, 3)]
    assert [part_bounds(10, part, 3) for part in range(3)] == [(0, 3), (3, 6), (6, 10)]


def random_text(rng: random.Random, lines: int) -> str:
    pieces = []
    for _ in range(lines):
        words = rng.randint(0, 6)
        pieces.append(" ".join(rng.choice(["héllo", "wörld", "a", "spark", "x" * 40])
                               for _ in range(words)))
    ending = rng.choice(["\n", "\r\n"])
    return ending.join(pieces) + rng.choice(["", ending])


@pytest.mark.parametrize("seed", range(8))
def test_every_line_is_read_exactly_once_whatever_the_block_size(tmp_path, seed):
    rng = random.Random(seed)
    text = random_text(rng, rng.randint(1, 60))
    path = tmp_path / "lines.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = text.encode().decode().splitlines()
    for block_size in (1, 2, 3, 7, 64, 1000, 10**6):
        splits = plan_file_splits(str(path), block_size)
        assert Counter(lines_of(splits)) == Counter(expected), block_size
        assert lines_of(splits) == expected


def test_a_range_starting_exactly_at_a_line_reads_that_line(tmp_path):
    path = tmp_path / "three.txt"
    path.write_bytes(b"aa\nbb\ncc\n")
    assert list(read_lines(str(path), 0, 3)) == ["aa"]
    assert list(read_lines(str(path), 3, 3)) == ["bb"]
    assert list(read_lines(str(path), 4, 5)) == ["cc"]
    assert list(read_lines(str(path), 6, 3)) == ["cc"]


def test_empty_lines_and_a_missing_last_newline_survive(tmp_path):
    path = tmp_path / "gaps.txt"
    path.write_bytes(b"\n\nlast")
    assert list(read_lines(str(path))) == ["", "", "last"]
