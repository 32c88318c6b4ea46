"""The timer thread runs calls in the order they are due, wakes for a call due sooner
than the one it sleeps for, and skips cancelled calls."""

from __future__ import annotations

import threading
import time

from clusterdeck.core.rpc._timers import TimerQueue


def test_a_call_due_sooner_than_the_one_it_sleeps_for_runs_on_time() -> None:
    timers = TimerQueue("test-timers")
    try:
        ran: list[tuple[str, float]] = []
        soon = threading.Event()
        started = time.monotonic()
        timers.schedule(30.0, lambda: ran.append(("late", time.monotonic())))
        timers.schedule(0.05, lambda: (ran.append(("soon", time.monotonic())), soon.set()))
        assert soon.wait(10.0)
        assert [name for name, _ in ran] == ["soon"]
        assert ran[0][1] - started < 10.0
    finally:
        timers.stop()


def test_calls_run_in_the_order_they_are_due_and_cancelled_ones_not() -> None:
    timers = TimerQueue("test-timers")
    try:
        ran: list[int] = []
        last = threading.Event()
        for delay in (0.3, 0.1, 0.2):
            timers.schedule(delay, lambda d=delay: ran.append(int(d * 10)))
        timers.schedule(0.15, lambda: ran.append(99)).cancel()
        timers.schedule(0.4, last.set)
        assert last.wait(10.0)
        assert ran == [1, 2, 3]
    finally:
        timers.stop()
