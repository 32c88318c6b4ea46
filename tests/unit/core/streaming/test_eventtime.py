"""Event time: which windows a record falls into, watermarks of one source and of a task's
inputs, and keyed window state that fires, drops late records and survives a checkpoint."""

from __future__ import annotations

import json
import math

import pytest

from clusterdeck.core.streaming.eventtime import (
    BoundedOutOfOrderness,
    InputWatermarks,
    SlidingWindows,
    TumblingWindows,
)
from clusterdeck.core.streaming.windowstate import KeyedWindows


def test_tumbling_windows_split_time_into_consecutive_spans():
    windows = TumblingWindows(10.0)
    assert windows.assign(0.0) == [(0.0, 10.0)]
    assert windows.assign(9.999) == [(0.0, 10.0)]
    assert windows.assign(10.0) == [(10.0, 20.0)]
    assert windows.assign(-0.5) == [(-10.0, 0.0)]
    assert TumblingWindows(10.0, offset=3.0).assign(12.0) == [(3.0, 13.0)]


def test_sliding_windows_give_a_record_every_window_that_contains_it():
    assert SlidingWindows(10.0, 5.0).assign(12.0) == [(5.0, 15.0), (10.0, 20.0)]
    assert SlidingWindows(10.0, 5.0).assign(10.0) == [(5.0, 15.0), (10.0, 20.0)]
    assert SlidingWindows(10.0, 3.0).assign(0.5) == [(-9.0, 1.0), (-6.0, 4.0), (-3.0, 7.0),
                                                     (0.0, 10.0)]
    for windows in (SlidingWindows(10.0, 5.0), SlidingWindows(7.0, 2.0)):
        for timestamp in (0.0, 3.3, 17.9):
            assert all(start <= timestamp < end for start, end in windows.assign(timestamp))


@pytest.mark.parametrize("bad", [lambda: TumblingWindows(0.0), lambda: SlidingWindows(1.0, 0.0),
                                 lambda: BoundedOutOfOrderness(-1.0)])
def test_nonsense_is_refused(bad):
    with pytest.raises(ValueError):
        bad()


def test_a_sources_watermark_trails_the_largest_timestamp_by_the_bound():
    marks = BoundedOutOfOrderness(2.0)
    assert marks.watermark() == -math.inf
    for timestamp in (10.0, 7.0, 12.0, 11.0):
        marks.on_record(timestamp)
    assert marks.watermark() == pytest.approx(9.999)


def test_a_tasks_watermark_is_its_slowest_open_inputs():
    inputs = InputWatermarks(2)
    assert inputs.on_watermark(0, 10.0) is None  # input 1 has said nothing yet
    assert inputs.on_watermark(1, 4.0) == 4.0
    assert inputs.on_watermark(1, 3.0) is None  # never back
    assert inputs.on_watermark(1, 12.0) == 10.0
    assert inputs.on_end_of_input(0) == 12.0
    assert inputs.current == 12.0


def count_windows(size: float = 10.0) -> KeyedWindows:
    return KeyedWindows(TumblingWindows(size), combine=lambda count, _: count + 1,
                        initial=lambda _: 1)


def test_windows_fire_when_the_watermark_passes_their_end_and_late_records_are_dropped():
    windows = count_windows()
    for key, timestamp in (("a", 1.0), ("b", 2.0), ("a", 9.0), ("a", 11.0), ("b", 25.0)):
        assert windows.add(key, timestamp, None)
    assert windows.fire(9.999) == []
    assert windows.fire(10.0) == [("a", (0.0, 10.0), 2), ("b", (0.0, 10.0), 1)]
    assert windows.add("a", 3.0, None) is False and windows.late == 1
    assert windows.fire(30.0) == [("a", (10.0, 20.0), 1), ("b", (20.0, 30.0), 1)]
    assert windows.open_windows == 0


def test_window_state_goes_through_a_checkpoint_as_plain_json():
    windows = count_windows()
    for key, timestamp in ((("k", 1), 1.0), (("k", 1), 2.0), (("k", 2), 15.0)):
        windows.add(key, timestamp, None)
    windows.fire(10.0)
    windows.add(("k", 1), 4.0, None)  # late
    restored = count_windows()
    restored.restore(json.loads(json.dumps(windows.snapshot())))
    assert restored.late == 1
    assert restored.add(("k", 2), 16.0, None) and not restored.add(("k", 1), 5.0, None)
    assert restored.fire(20.0) == [(("k", 2), (10.0, 20.0), 2)]
    fresh = count_windows()
    fresh.restore(json.loads(json.dumps(count_windows().snapshot())))
    assert fresh.add("x", -100.0, None)  # nothing fired yet: nothing is late
