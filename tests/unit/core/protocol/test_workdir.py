"""A job's work-dir layout: the folders and per-attempt files every room agrees on."""

from __future__ import annotations

from pathlib import Path

from clusterdeck.core.protocol import workdir

ATTEMPT = "job-1/map#0/e1a2"


def test_an_attempts_files_are_named_after_it_in_their_folders(tmp_path: Path) -> None:
    assert workdir.partitions_dir(str(tmp_path), ATTEMPT) == \
        tmp_path / "partitions" / "job-1_map-0_e1a2"
    assert workdir.collected_rows_file(tmp_path, ATTEMPT) == \
        tmp_path / "collect" / "job-1_map-0_e1a2.json"
    assert workdir.printed_output_file(tmp_path, ATTEMPT, "stderr") == \
        tmp_path / "output" / "job-1_map-0_e1a2.stderr"
    assert workdir.checkpoints_dir(tmp_path) == tmp_path / "checkpoints"


def test_a_job_works_in_a_folder_named_after_it(tmp_path: Path) -> None:
    assert workdir.job_work_dir(tmp_path, "job-1") == tmp_path / "job-1"


def test_what_clients_may_fetch_is_part_of_what_tasks_write() -> None:
    assert set(workdir.RESULT_FOLDERS) <= set(workdir.TASK_FOLDERS)
