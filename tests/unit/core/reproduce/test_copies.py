"""Copies into a reproduction folder stay within their budget and inside the folder."""

from __future__ import annotations

import os

import pytest

from clusterdeck.core.reproduce.copies import (
    Budget,
    InputTooLarge,
    copy_file,
    copy_tree,
    write_bytes,
)
from clusterdeck.core.reproduce.folder import ReproductionError


def test_a_file_within_the_budget_is_copied_and_counted(tmp_path) -> None:
    source = tmp_path / "a.txt"
    source.write_bytes(b"x" * 100)
    out = tmp_path / "out"
    out.mkdir()
    budget = Budget(150)
    copy_file(source, out, "input/a.txt", budget)
    assert (out / "input/a.txt").read_bytes() == b"x" * 100
    assert budget.used == 100


def test_a_file_over_the_budget_names_the_flag_and_the_size_it_needs(tmp_path) -> None:
    source = tmp_path / "big.txt"
    source.write_bytes(b"x" * 3000)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(InputTooLarge, match=r"--max-input-bytes 1048576"):
        copy_file(source, out, "input/big.txt", Budget(1000))
    assert not (out / "input/big.txt").exists()


def test_a_copy_cannot_be_written_outside_the_folder(tmp_path) -> None:
    source = tmp_path / "a.txt"
    source.write_bytes(b"x")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ReproductionError):
        copy_file(source, out, "../escaped.txt", Budget(10))
    assert not (tmp_path / "escaped.txt").exists()


def test_a_link_or_a_device_is_not_copied(tmp_path) -> None:
    (tmp_path / "real").write_bytes(b"secret")
    os.symlink(tmp_path / "real", tmp_path / "link")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ReproductionError, match="not a regular file"):
        copy_file(tmp_path / "link", out, "input/link", Budget(100))
    with pytest.raises(ReproductionError, match="not a regular file"):
        copy_file(tmp_path, out, "input/folder", Budget(100))


def test_a_tree_is_copied_without_its_links_and_counted_whole(tmp_path) -> None:
    tree = tmp_path / "tree"
    (tree / "v2.0" / "__part=1").mkdir(parents=True)
    (tree / "v2.0" / "__part=1" / "part-0.parquet").write_bytes(b"p" * 10)
    (tree / "v2.0" / "__part=1" / "_complete.json").write_bytes(b"{}")
    os.symlink("/etc", tree / "elsewhere")
    out = tmp_path / "out"
    out.mkdir()
    budget = Budget(100)
    copy_tree(tree, out, "input/partitions/p", budget)
    assert (out / "input/partitions/p/v2.0/__part=1/part-0.parquet").read_bytes() == b"p" * 10
    assert not (out / "input/partitions/p/elsewhere").exists()
    assert budget.used == 12


def test_the_budget_counts_across_copies(tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    budget = Budget(10)
    write_bytes(out, "state/a", b"12345", budget)
    with pytest.raises(InputTooLarge):
        write_bytes(out, "state/b", b"123456", budget)
