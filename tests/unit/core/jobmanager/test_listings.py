"""Listings cut by the bytes their entries take, so each fits one message."""

from __future__ import annotations

import pytest

from clusterdeck.core.jobmanager.listings import (
    budget,
    encoded_size,
    fitted_overview,
    fitting,
    listed,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import Envelope, encode

FRAME = 256 * 1024


def summary(i: int, name: str = "word-count") -> p.JobSummary:
    return p.JobSummary(f"{i:016x}", name, "dataflow", JobStatus.FINISHED, 1.7e9 + i, 4, 4,
                        1.25)


def info(i: int, state: p.TaskManagerState = p.TaskManagerState.REGISTERED,
         cause: str = "") -> p.TaskManagerInfo:
    return p.TaskManagerInfo(f"taskmanager-{i}-" + "x" * 40, state, "host.example.org", 4242,
                             2, 2, 0.125, 1.7e9, f"taskexecutor.taskmanager-{i}", cause)


def test_encoded_size_is_what_the_codec_writes() -> None:
    one = summary(1, "naïve \u2603 name")
    empty = len(encode(Envelope("event", "jobmanager", p.JobList(())), FRAME))
    with_one = len(encode(Envelope("event", "jobmanager", p.JobList((one,))), FRAME))
    assert with_one - empty == encoded_size(one)


def test_a_page_stops_at_its_limit_or_at_the_first_entry_that_does_not_fit() -> None:
    entries = [summary(i) for i in range(100)]
    assert fitting(entries, FRAME, 10) == entries[:10]
    size = encoded_size(entries[0])
    assert fitting(entries, 3 * size + 2, 100) == entries[:3]
    assert fitting(entries, 3 * size + 1, 100) == entries[:2]


def test_a_page_builds_nothing_past_itself() -> None:
    built: list[int] = []

    def lazily():
        for i in range(10_000):
            built.append(i)
            yield summary(i)
    assert len(fitting(lazily(), FRAME, 5)) == 5
    assert len(built) == 6  # the sixth is taken only to see the page is full


@pytest.mark.parametrize("name", ["x" * 100_000, "\u2603" * 50_000])
def test_a_huge_job_name_is_cut_so_a_page_still_holds_many(name: str) -> None:
    page = fitting((listed(summary(i, name)) for i in range(10_000)), budget(FRAME), 10_000)
    assert len(page) > 100
    encode(Envelope("reply", "jobmanager", p.JobList(tuple(page), 10_000, 0),
                    correlation_id="client-0123456789ab:99", fencing_token="f" * 32), FRAME)


def test_thousands_of_jobs_make_a_page_that_fits_the_frame() -> None:
    page = fitting((summary(i) for i in range(10_000)), budget(FRAME), 10_000)
    assert 1000 < len(page) < 10_000
    encode(Envelope("reply", "jobmanager", p.JobList(tuple(page), 10_000, 0),
                    correlation_id="client-0123456789ab:99", fencing_token="f" * 32), FRAME)


def overview(infos: list[p.TaskManagerInfo]) -> p.ClusterOverview:
    return p.ClusterOverview("default", tuple(infos), 2 * len(infos), 2 * len(infos), 1, 1.7e9,
                             "f" * 32)


def test_an_overview_that_fits_is_sent_whole() -> None:
    whole = overview([info(i) for i in range(10)])
    assert fitted_overview(whole, FRAME) is whole


def test_an_overview_too_large_keeps_registered_taskmanagers_first_and_counts_the_rest() -> None:
    lost = [info(i, p.TaskManagerState.LOST, "lost: " + "c" * 300) for i in range(1000)]
    live = [info(i) for i in range(1000, 1300)]
    fitted = fitted_overview(overview([*lost, *live]), FRAME)
    kept = fitted.taskmanagers
    assert [t.id for t in kept[:300]] == [t.id for t in live]
    assert fitted.taskmanagers_left_out == 1300 - len(kept) > 0
    assert fitted.slots_total == 2 * 1300  # the counts are of all of them
    encode(Envelope("event", "jobmanager", fitted), FRAME)
