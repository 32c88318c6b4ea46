"""Key groups: every key group owned by exactly one subtask, in contiguous ranges, and the
exchange's choice of subtask the owner of the key's group."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdeck.core.protocol.keygroups import (
    DEFAULT_MAX_PARALLELISM,
    check_max_parallelism,
    key_group_of,
    key_group_range,
    key_hash,
    subtask_of,
    subtask_of_group,
)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[int, int]:
    max_parallelism = draw(st.integers(1, 2048))
    return max_parallelism, draw(st.integers(1, max_parallelism))


@given(layouts())
def test_every_key_group_is_owned_by_exactly_one_subtask_in_contiguous_ranges(layout):
    max_parallelism, parallelism = layout
    ranges = [key_group_range(max_parallelism, parallelism, i) for i in range(parallelism)]
    assert [group for owned in ranges for group in owned] == list(range(max_parallelism))
    assert all(owned.step == 1 and len(owned) >= 1 for owned in ranges)
    for subtask, owned in enumerate(ranges):
        assert {subtask_of_group(group, max_parallelism, parallelism)
                for group in owned} == {subtask}


@given(st.text(), layouts())
def test_a_key_goes_to_the_subtask_whose_range_holds_its_group(key, layout):
    max_parallelism, parallelism = layout
    subtask = subtask_of(key, max_parallelism, parallelism)
    assert key_group_of(key, max_parallelism) in key_group_range(max_parallelism,
                                                                 parallelism, subtask)


def test_the_hash_is_the_stable_one_of_every_run():
    assert key_hash("key-1") == key_hash("key-1")
    assert key_group_of("key-1", DEFAULT_MAX_PARALLELISM) == key_hash("key-1") % 128


def test_more_subtasks_than_key_groups_is_refused_naming_the_max_parallelism():
    with pytest.raises(ValueError, match="max parallelism of 4"):
        key_group_range(4, 5, 0)
    with pytest.raises(ValueError, match="1 to 32768"):
        check_max_parallelism(40000)
