"""A batch of range parts becomes as few Spark ranges as possible."""

from __future__ import annotations

from clusterdeck.core.engine.sources import _merged
from clusterdeck.core.jobapi.inputsplits import part_bounds


def test_adjacent_parts_of_a_range_merge_into_one_interval() -> None:
    parts = [part_bounds(2000, part, 500) for part in (3, 0, 2, 1, 7, 9, 8)]
    assert _merged(parts) == [(0, 16), (28, 40)]


def test_empty_parts_merge_into_an_empty_interval() -> None:
    assert _merged([part_bounds(3, part, 10) for part in range(4)]) == [(0, 1)]
    assert _merged([]) == [(0, 0)]
