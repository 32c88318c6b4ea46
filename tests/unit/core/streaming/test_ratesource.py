"""The rate generator: deterministic, paced, split over subtasks, replayable from a position."""

from __future__ import annotations

import pytest

from clusterdeck.core.streaming.ratesource import RatePosition, RateSource, rate_record


def test_subtasks_share_the_indices_and_the_rate():
    sources = [RateSource(rate=20.0, subtask=s, parallelism=2) for s in (0, 1)]
    assert [src.poll(now=0.0, limit=100) for src in sources] == [[0], [1]]
    # 10 a second each: one more every 0.1 s
    assert [src.poll(now=0.35, limit=100) for src in sources] == [[2, 4, 6], [3, 5, 7]]
    assert sources[0].seconds_to_next(0.35) == pytest.approx(0.05)


def test_poll_takes_at_most_limit_and_the_rest_stays_due():
    source = RateSource(rate=100.0, subtask=0, parallelism=1)
    source.poll(now=0.0, limit=1)
    assert source.poll(now=1.0, limit=30) == list(range(1, 31))
    assert len(source.poll(now=1.0, limit=1000)) == 70 and source.seconds_to_next(1.0) > 0


def test_a_count_ends_the_stream():
    source = RateSource(rate=1000.0, subtask=1, parallelism=2, count=7)
    emitted = source.poll(now=0.0, limit=100) + source.poll(now=10.0, limit=100)
    assert emitted == [1, 3, 5] and source.exhausted
    assert source.poll(now=20.0, limit=100) == []


def test_restored_from_its_position_it_emits_exactly_what_followed():
    first = RateSource(rate=1000.0, subtask=1, parallelism=3)
    emitted = first.poll(now=0.0, limit=1) + first.poll(now=0.01, limit=100)
    position = first.position()
    after = first.poll(now=0.02, limit=100)
    assert len(after) == 3
    resumed = RateSource(rate=1000.0, subtask=1, parallelism=3, position=position)
    replayed = resumed.poll(now=100.0, limit=1) + resumed.poll(now=200.0, limit=2)
    assert replayed == after and emitted[-1] + 3 == after[0]


def test_a_record_is_a_function_of_its_index():
    assert rate_record(42) == (42, "key-2") == rate_record(42)


@pytest.mark.parametrize("kwargs, complaint", [
    (dict(rate=0.0, subtask=0, parallelism=1), "positive, finite rate"),
    (dict(rate=1.0, subtask=2, parallelism=2), "subtask 2 of 2"),
    (dict(rate=1.0, subtask=0, parallelism=2, count=-1), "must not be negative"),
    (dict(rate=1.0, subtask=0, parallelism=2, position=RatePosition(3)), "not one of subtask 0"),
])
def test_nonsense_is_refused(kwargs, complaint):
    with pytest.raises(ValueError, match=complaint):
        RateSource(**kwargs)
