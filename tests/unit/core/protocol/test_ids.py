"""Job, subtask and attempt ids: what is built parses back to its parts, and what is not an
id is told apart."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdeck.core.protocol.ids import (
    JOB_ID,
    AttemptId,
    attempt_file_stem,
    attempt_id_of,
    attempt_part_of,
    epoch_of,
    job_file_prefix,
    new_job_id,
    parse_attempt_id,
    parse_subtask_id,
    subtask_id,
)

job_ids = st.from_regex(JOB_ID, fullmatch=True)
vertex_ids = st.text(min_size=1, max_size=20)
counts = st.integers(min_value=0, max_value=10_000)


def test_epoch_zero_keeps_the_short_form() -> None:
    assert attempt_id_of("job", "map", 2, 3) == "job/map#2/a3"
    assert attempt_id_of("job", "map", 2, 3, epoch=1) == "job/map#2/e1a3"


@given(job_ids, vertex_ids, counts, counts, counts)
def test_an_attempt_id_parses_back_to_its_parts(job_id: str, vertex_id: str, subtask: int,
                                                attempt: int, epoch: int) -> None:
    built = attempt_id_of(job_id, vertex_id, subtask, attempt, epoch)
    parsed = parse_attempt_id(built)
    assert parsed == AttemptId(job_id, vertex_id, subtask, attempt, epoch)
    assert str(parsed) == built
    assert parsed.subtask_id == subtask_id(vertex_id, subtask)
    assert parsed.part == attempt_part_of(built)
    assert epoch_of(built) == epoch


@given(vertex_ids, counts)
def test_a_subtask_id_parses_back_to_its_parts(vertex_id: str, subtask: int) -> None:
    assert parse_subtask_id(subtask_id(vertex_id, subtask)) == (vertex_id, subtask)


@pytest.mark.parametrize("text", ["", "job", "job/map#0", "job/map/a1", "job/map#x/a1",
                                  "job/map#0/b1", "job.x/map#0/a1", "/map#0/a1"])
def test_what_is_not_an_attempt_id_parses_to_none(text: str) -> None:
    assert parse_attempt_id(text) is None


@pytest.mark.parametrize("text", ["map", "map#", "map#-1", "#x"])
def test_what_is_not_a_subtask_id_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_subtask_id(text)


def test_a_new_job_id_is_a_job_id() -> None:
    assert JOB_ID.fullmatch(new_job_id())
    assert new_job_id() != new_job_id()


def test_an_attempt_names_its_files_without_slash_or_hash() -> None:
    assert attempt_file_stem("job/map#0/e2a1") == "job_map-0_e2a1"


@given(job_ids, vertex_ids, counts, counts, counts)
def test_an_attempts_file_stem_starts_with_its_jobs_prefix(job_id: str, vertex_id: str,
                                                           subtask: int, attempt: int,
                                                           epoch: int) -> None:
    stem = attempt_file_stem(attempt_id_of(job_id, vertex_id, subtask, attempt, epoch))
    assert job_file_prefix(job_id) == f"{job_id}_"
    assert stem.startswith(job_file_prefix(job_id))
