"""The reproduction folder's paths, manifest and expected failure: no Spark, no cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterdeck.core.jobapi.loader import script_graph
from clusterdeck.core.protocol.jobgraph import InputSplit
from clusterdeck.core.reproduce.folder import (
    MANIFEST,
    ExpectedFailure,
    Reproduction,
    ReproductionError,
    expected_failure,
    inside,
    read_manifest,
    write_manifest,
)

TRACEBACK = """Traceback (most recent call last):
  File "/srv/tm/artifacts/abc/job.py", line 12, in build
    helper(x)
  File "/srv/tm/artifacts/abc/helpers.py", line 4, in helper
    raise ValueError("no")
  File "/usr/lib/python3/site-packages/pyspark/worker.py", line 99, in main
ValueError: no
"""


def reproduction(**changes: object) -> Reproduction:
    fields = dict(job_id="job1", job_name="job", graph=script_graph(Path("job.py"), ()),
                  args=(), vertex_id="v1", subtask=0, attempt=0, attempt_id="job1/v1#0/a0",
                  job_file="job/job.py", artifact_sha256="0" * 64,
                  expected=ExpectedFailure("ValueError", "no", "helpers.py", 4), cores=2)
    fields.update(changes)
    return Reproduction(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("relative", ["../x", "/etc/passwd", "a/../../x", "a\\b", "",
                                      "c:/x"])
def test_a_path_that_leads_out_of_the_folder_is_refused(tmp_path, relative) -> None:
    with pytest.raises(ReproductionError):
        inside(tmp_path, relative)


def test_a_link_inside_the_folder_that_points_out_is_refused(tmp_path) -> None:
    os.symlink("/", tmp_path / "escape")
    with pytest.raises(ReproductionError, match="leads out"):
        inside(tmp_path, "escape/etc/passwd")


def test_a_path_inside_the_folder_is_given_back_under_it(tmp_path) -> None:
    assert inside(tmp_path, "input/splits/0-a.txt") == tmp_path / "input/splits/0-a.txt"


def test_the_manifest_reads_back_as_it_was_written(tmp_path) -> None:
    written = reproduction(splits=(InputSplit(3, "v1", "input/splits/0-a.txt", 0, 10),))
    write_manifest(tmp_path, written)
    assert read_manifest(tmp_path) == written


def test_a_manifest_naming_a_path_outside_the_folder_is_refused(tmp_path) -> None:
    write_manifest(tmp_path, reproduction(splits=(InputSplit(3, "v1", "../../etc/x"),)))
    with pytest.raises(ReproductionError, match="not a path inside"):
        read_manifest(tmp_path)


def test_a_folder_without_a_manifest_says_how_to_write_one(tmp_path) -> None:
    with pytest.raises(ReproductionError, match="clusterdeck reproduce JOB"):
        read_manifest(tmp_path)


def test_a_manifest_that_is_not_one_is_refused_without_a_traceback(tmp_path) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps({"job_id": 3}))
    with pytest.raises(ReproductionError, match="not a reproduction manifest"):
        read_manifest(tmp_path)


def test_a_manifest_of_another_format_is_refused(tmp_path) -> None:
    write_manifest(tmp_path, reproduction(format=99))
    with pytest.raises(ReproductionError, match="format 99"):
        read_manifest(tmp_path)


def test_the_expected_frame_is_the_last_one_in_the_jobs_own_files() -> None:
    failure = expected_failure("ValueError", "no", TRACEBACK, {"job.py", "helpers.py"})
    assert (failure.file, failure.line) == ("helpers.py", 4)


def test_a_traceback_without_a_frame_of_the_job_expects_no_line() -> None:
    failure = expected_failure("TaskManagerLost", "gone", "", {"job.py"})
    assert (failure.file, failure.line) == ("", 0)
