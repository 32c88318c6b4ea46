"""How the GUI writes times, durations and sizes: one place, so that a time of day or a
duration reads the same in every view.

Three clocks for three needs: ``clock`` (to the second) for tables and summaries,
``clock_tenths`` for a replay's moment (the slider moves in tenths), ``clock_millis`` for
the moments where order inside a second matters (failures, messages). Two durations:
``format_duration`` for how long something took, ``format_uptime`` for a running counter
(``H:MM:SS``, the way a stopwatch shows it). ``format_watermark`` writes event time.
Pure functions, any thread.
"""

from __future__ import annotations

import math
import time

NONE = "\u2013"
"""An en dash: the value is not known (yet)."""


def clock(timestamp: float | None) -> str:
    """``HH:MM:SS`` of a wall-clock time; ``NONE`` without one."""
    if not timestamp:
        return NONE
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def clock_tenths(timestamp: float) -> str:
    """``HH:MM:SS.d`` of a wall-clock time."""
    return time.strftime("%H:%M:%S", time.localtime(timestamp)) + \
        f".{int(timestamp * 10) % 10}"


def clock_millis(timestamp: float | None) -> str:
    """``HH:MM:SS.mmm`` of a wall-clock time; ``NONE`` without one."""
    if not timestamp:
        return NONE
    return time.strftime("%H:%M:%S", time.localtime(timestamp)) + \
        f".{int(timestamp * 1000) % 1000:03d}"


def format_duration(seconds: float | None) -> str:
    """How long something took: ``250 ms``, ``3.2 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds is None:
        return NONE
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else \
        f"{minutes // 60} h {minutes % 60:02d} min"


def format_uptime(seconds: float) -> str:
    """A running counter: ``M:SS``, from an hour on ``H:MM:SS``."""
    seconds = int(max(0.0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def format_bytes(count: int) -> str:
    """A size in binary units: ``512 B``, ``4.0 KiB`` ... ``1.5 GiB`` (GiB is the largest)."""
    value = float(count)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def format_watermark(watermark: float | None) -> str:
    """A watermark as event time: a time of day (and the date, if not today) when it is
    seconds since the epoch (from 2001 on), else seconds."""
    if watermark is None:
        return "no watermark"
    if math.isinf(watermark):
        return "end of event time"
    if watermark >= 1e9:
        stamp = time.localtime(watermark)
        day = "" if stamp[:3] == time.localtime()[:3] else time.strftime("%Y-%m-%d ", stamp)
        return day + clock_millis(watermark)
    return f"{watermark:,.3f} s"
