"""Which files the Dispatcher serves to clients on other machines, and how."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdeck.core.jobmanager.resultfiles import read_chunk, servable
from clusterdeck.core.protocol.workdir import FILES_MANIFEST


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    job = tmp_path / "work" / "job-1"
    for name in ("collect/a.json", "output/a.stdout", "partitions/a/p.parquet", FILES_MANIFEST,
                 "../job-2/collect/b.json"):
        (job / name).parent.mkdir(parents=True, exist_ok=True)
        (job / name).write_bytes(b"0123456789")
    (tmp_path / "credentials.json").write_text("secret")
    os.symlink(tmp_path / "credentials.json", job / "collect" / "link.json")
    return job


def test_only_collected_rows_printed_output_and_the_manifest_are_served(work_dir) -> None:
    for name in ("collect/a.json", "output/a.stdout", FILES_MANIFEST):
        assert servable(work_dir, str(work_dir / name)) == str(work_dir / name)
    for path in (work_dir / "partitions/a/p.parquet", work_dir / "collect",
                 work_dir / "collect/../../job-2/collect/b.json", work_dir / "collect/link.json",
                 work_dir.parent.parent / "credentials.json", "collect/a.json", "",
                 f"{work_dir}/collect/a.json\x00"):
        with pytest.raises(ValueError, match="not a result file"):
            servable(work_dir, str(path))


@given(st.text(alphabet="ab./\x00~", max_size=30))
def test_any_path_is_refused_or_a_result_file(relative: str) -> None:
    root = Path("/srv/work/job")
    try:
        real = servable(root, f"/srv/work/job/{relative}")
    except ValueError:
        return
    assert Path(real).parent.name in ("collect", "output") or real.endswith(FILES_MANIFEST)


def test_chunks_cover_the_file_and_an_offset_beyond_it_is_refused(work_dir) -> None:
    path = str(work_dir / "output" / "a.stdout")
    first, second = read_chunk("job-1", path, path, 0, 6), read_chunk("job-1", path, path, 6, 6)
    assert (first.total, second.total) == (10, 10)
    assert base64.b64decode(first.data) + base64.b64decode(second.data) == b"0123456789"
    with pytest.raises(ValueError, match="outside the file"):
        read_chunk("job-1", path, path, 11, 6)
    gone = str(work_dir / "output" / "gone.stdout")
    with pytest.raises(ValueError, match="not on the JobManager's machine"):
        read_chunk("job-1", gone, gone, 0, 6)
