"""An attempt that failed for want of space names the disk (core/taskmanager/fulldisk.py)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from clusterdeck.core.taskmanager import fulldisk
from clusterdeck.core.taskmanager.fulldisk import DISK_FULL, DiskFull, naming_a_full_disk


class SparkFailure(Exception):
    """As Py4J raises it: the Java stack trace in the message."""


def test_a_full_work_dir_is_named_with_its_taskmanager(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(fulldisk, "_free", lambda path: 0 if path == str(tmp_path) else 10**9)
    with pytest.raises(DiskFull) as failed, naming_a_full_disk("tm-2", str(tmp_path)):
        raise SparkFailure("An error occurred while calling o42.parquet.\n"
                           ": java.io.IOException: No space left on device\n\tat java.io...")
    assert failed.value.exception_type == DISK_FULL
    assert str(failed.value).startswith(f"TaskManager tm-2's work dir {tmp_path} is full "
                                        "(0 bytes free): : java.io.IOException: No space")


def test_a_python_enospc_anywhere_in_the_chain_counts(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(fulldisk, "_free", lambda path: 10**9)  # freed again since
    with pytest.raises(DiskFull) as failed, naming_a_full_disk("tm-2", str(tmp_path)):
        try:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "part"))
        except OSError as error:
            raise RuntimeError("writing the partition failed") from error
    assert str(failed.value).startswith("a disk of TaskManager tm-2 is full (work dir ")
    assert isinstance(failed.value.__cause__, RuntimeError)


def test_any_other_failure_passes_unchanged(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bad record"), naming_a_full_disk("tm", str(tmp_path)):
        raise ValueError("bad record")


def test_the_free_space_of_a_folder_not_made_yet_is_its_parents(tmp_path: Path) -> None:
    assert fulldisk._free(str(tmp_path / "job" / "partitions")) is not None
