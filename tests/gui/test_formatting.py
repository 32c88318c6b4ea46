"""How the GUI writes times, durations and sizes (gui/models/formatting.py): one format per
purpose, the same in every view."""

from __future__ import annotations

import time

from clusterdeck.gui.models.formatting import (
    NONE,
    clock,
    clock_millis,
    clock_tenths,
    format_bytes,
    format_duration,
    format_uptime,
)

NOON = time.mktime((2026, 11, 27, 12, 34, 56, 0, 0, -1)) + 0.789


def test_the_three_clocks_differ_only_in_the_fraction_of_the_second() -> None:
    assert clock(NOON) == "12:34:56"
    assert clock_tenths(NOON) == "12:34:56.7"
    assert clock_millis(NOON) == "12:34:56.789"


def test_a_moment_not_known_is_a_dash() -> None:
    assert clock(None) == clock_millis(None) == format_duration(None) == NONE


def test_a_duration_reads_in_the_unit_that_suits_it() -> None:
    assert format_duration(0.25) == "250 ms"
    assert format_duration(3.21) == "3.2 s"
    assert format_duration(245) == "4 min 05 s"
    assert format_duration(2 * 3600 + 180) == "2 h 03 min"


def test_an_uptime_counts_like_a_stopwatch() -> None:
    assert format_uptime(-1) == "0:00"
    assert format_uptime(65) == "1:05"
    assert format_uptime(3600 + 62) == "1:01:02"


def test_sizes_are_in_binary_units_up_to_gib() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(4096) == "4.0 KiB"
    assert format_bytes(3 * 1024**2 // 2) == "1.5 MiB"
    assert format_bytes(5 * 1024**4) == "5120.0 GiB"
