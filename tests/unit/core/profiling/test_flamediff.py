"""A vertex's flame graphs of two runs compared (core/profiling/flamediff.py)."""

from __future__ import annotations

import pytest

from clusterdeck.core.profiling import flamediff
from clusterdeck.core.profiling.flamediff import (
    change_lines,
    collapsed_lines,
    compare_flame_graphs,
    frame_name,
    frame_shares,
    load_flame_graph,
    save_flame_graph,
)
from clusterdeck.core.profiling.pyspy import FlameNode, ProfilingError, parse_collapsed


def graph(text: str) -> FlameNode:
    return parse_collapsed(text)[0]


BEFORE = graph("run (runner.py:90);parse (job.py:7) 60\n"
               "run (runner.py:90);enrich (job.py:20) 30\n"
               "run (runner.py:91) 10\n")
AFTER = graph("run (runner.py:90);parse (job.py:8) 20\n"
              "run (runner.py:90);enrich (job.py:20);lookup (db.py:4) 70\n"
              "run (runner.py:90) 10\n")


def test_a_graph_saved_reads_back_the_same(tmp_path):
    path = tmp_path / "map.collapsed"
    assert save_flame_graph(BEFORE, path) == 3
    assert load_flame_graph(path) == BEFORE
    assert collapsed_lines(BEFORE)[0] == "run (runner.py:90);parse (job.py:7) 60\n"


def test_frames_are_compared_without_their_lines():
    assert frame_name("parse (job.py:7)") == "parse (job.py)"
    assert frame_name("<module> (job.py:1)") == "<module> (job.py)"
    assert frame_name("process 12 (pyspark.daemon)") == "process 12 (pyspark.daemon)"


def test_shares_count_a_frame_once_per_sample_even_when_it_recurses():
    recursive = graph("walk (tree.py:3);walk (tree.py:5);walk (tree.py:5) 3\nmain (m.py:1) 1\n")
    held, own = frame_shares(recursive)
    assert held == {"walk (tree.py)": 0.75, "main (m.py)": 0.25}
    assert own == {"walk (tree.py)": 0.75, "main (m.py)": 0.25}
    assert frame_shares(FlameNode("empty")) == ({}, {})


def test_the_biggest_changes_come_first():
    changes = compare_flame_graphs(BEFORE, AFTER)

    assert [(c.frame, round(c.before, 2), round(c.after, 2)) for c in changes] == [
        ("lookup (db.py)", 0.0, 0.7),
        ("parse (job.py)", 0.6, 0.2),
        ("enrich (job.py)", 0.3, 0.7),
        ("run (runner.py)", 1.0, 1.0)]
    assert round(changes[2].own_before, 2) == 0.3 and changes[2].own_after == 0.0
    assert change_lines(changes)[1].split() == ["0.0%", "70.0%", "+70.0%", "0.0%", "70.0%",
                                                "lookup", "(db.py)"]


def test_a_file_that_is_no_flame_graph_says_so(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_bytes(b"\x00\xff not; stacks\nat all\n")
    with pytest.raises(ProfilingError, match="holds no collapsed stacks"):
        load_flame_graph(junk)
    with pytest.raises(ProfilingError, match="could not be read"):
        load_flame_graph(tmp_path / "missing.collapsed")


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(flamediff, "MAX_FILE", 100)
    big = tmp_path / "big.collapsed"
    big.write_text("f (a.py:1) 1\n" * 20)
    with pytest.raises(ProfilingError, match="larger than"):
        load_flame_graph(big)


def test_a_saved_graph_keeps_its_heaviest_stacks_at_most(tmp_path, monkeypatch):
    monkeypatch.setattr(flamediff, "MAX_STACKS", 2)
    assert collapsed_lines(BEFORE) == ["run (runner.py:90);parse (job.py:7) 60\n",
                                       "run (runner.py:90);enrich (job.py:20) 30\n"]
