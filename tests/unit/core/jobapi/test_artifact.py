"""Job artifacts: the job file and its imported siblings, packed, checked and unpacked."""

from __future__ import annotations

import io
import textwrap
import zipfile
from pathlib import Path

import pytest

from clusterdeck.core.jobapi.artifact import (
    MANIFEST,
    ArtifactError,
    pack_artifact,
    sha256_of,
    sibling_files,
    unpack_artifact,
)
from clusterdeck.core.jobapi.loader import load_job


@pytest.fixture
def job_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "jobs"
    (folder / "textutil").mkdir(parents=True)
    (folder / "textutil" / "__init__.py").write_text("from textutil.words import split\n")
    (folder / "textutil" / "words.py").write_text("def split(line):\n    return line.split()\n")
    (folder / "numbers_helper.py").write_text("import stats_helper\nSTEP = 2\n")
    (folder / "stats_helper.py").write_text("MEAN = 0\n")
    (folder / "unrelated.py").write_text("raise SystemExit('never imported')\n")
    (folder / "data.txt").write_text("not code\n")
    (folder / "job.py").write_text(textwrap.dedent("""
        import os
        import numbers_helper
        from textutil import split

        def build(env):
            env.from_collection(["a b", "c"]).flat_map(split).collect()
    """))
    return folder


def test_siblings_are_found_through_the_imports_transitively(job_folder):
    names = [p.relative_to(job_folder).as_posix() for p in sibling_files(job_folder / "job.py")]
    assert names == ["numbers_helper.py", "stats_helper.py", "textutil/__init__.py",
                     "textutil/words.py"]


def test_the_artifact_holds_the_job_its_siblings_and_a_manifest_only(job_folder):
    artifact = pack_artifact(job_folder / "job.py")
    names = sorted(zipfile.ZipFile(io.BytesIO(artifact.data)).namelist())
    assert names == sorted([MANIFEST, "job.py", "numbers_helper.py", "stats_helper.py",
                            "textutil/__init__.py", "textutil/words.py"])
    assert artifact.entry == "job.py"
    assert artifact.sha256 == sha256_of(artifact.data)


def test_packing_the_same_files_twice_gives_the_same_bytes(job_folder):
    assert pack_artifact(job_folder / "job.py") == pack_artifact(job_folder / "job.py")


def test_an_unpacked_artifact_loads_as_the_same_job(job_folder, tmp_path):
    artifact = pack_artifact(job_folder / "job.py")
    entry = unpack_artifact(artifact.data, tmp_path / "unpacked", artifact.sha256)
    assert entry == tmp_path / "unpacked" / "job.py"
    original, unpacked = load_job(job_folder / "job.py"), load_job(entry)
    assert unpacked.graph == original.graph
    assert unpacked.code["op-2"].fn("x y") == ["x", "y"]


def test_chunks_reassemble_to_the_artifact(job_folder):
    artifact = pack_artifact(job_folder / "job.py")
    chunks = list(artifact.chunks(100))
    assert all(len(chunk) <= 100 for chunk in chunks)
    assert b"".join(chunks) == artifact.data


def test_a_wrong_checksum_is_refused(job_folder, tmp_path):
    artifact = pack_artifact(job_folder / "job.py")
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        unpack_artifact(artifact.data, tmp_path / "out", "0" * 64)
    assert not (tmp_path / "out").exists()


def test_paths_leaving_the_folder_are_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(MANIFEST, '{"format": 1, "entry": "job.py"}')
        archive.writestr("../evil.py", "print('escaped')")
    with pytest.raises(ArtifactError, match="unsafe path"):
        unpack_artifact(buffer.getvalue(), tmp_path / "out")
    assert not (tmp_path / "evil.py").exists()


def test_bytes_that_are_no_artifact_are_refused(tmp_path):
    with pytest.raises(ArtifactError, match="not a job artifact"):
        unpack_artifact(b"hello", tmp_path / "out")
