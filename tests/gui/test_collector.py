"""Garbage collection runs on the Qt main thread, by the interpreter's own thresholds."""

from __future__ import annotations

import gc

from clusterdeck.gui.collector import MainThreadCollector


def test_the_collector_turns_automatic_collection_off_until_stopped(qapp) -> None:
    collector = MainThreadCollector()
    try:
        assert not gc.isenabled()
    finally:
        collector.stop()
    assert gc.isenabled()


def test_garbage_past_the_threshold_is_collected_when_the_timer_checks(qapp) -> None:
    collector = MainThreadCollector()
    try:
        gc.collect()
        for _ in range(gc.get_threshold()[0] + 10):
            cycle: list = []
            cycle.append(cycle)
        assert gc.get_count()[0] > gc.get_threshold()[0]
        assert collector.collect_due() == 0
        assert gc.get_count()[0] < gc.get_threshold()[0]
    finally:
        collector.stop()
