"""Restart strategies: may the job recover from one more failure, and after what pause?

The scheduler asks ``can_restart(now)`` once per failure event (a failed task, or a lost
TaskManager with all the tasks it took down) and, on yes, ``backoff()`` for the pause
before the restart. ``can_restart`` counts the failure, which is why it takes the time:
a failure-rate strategy needs to know when each failure happened. Strategies are pure:
the clock and the random generator come from outside, so tests are deterministic.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol


class RestartStrategy(Protocol):
    def can_restart(self, now: float) -> bool:
        """Count one failure at ``now``; True if the job may restart once more."""
        ...

    def backoff(self) -> float:
        """Seconds to wait before the restart just allowed."""
        ...


class NoRestart:
    """The first failure fails the job."""

    def can_restart(self, now: float) -> bool:
        return False

    def backoff(self) -> float:
        return 0.0

    def __repr__(self) -> str:
        return "NoRestart()"


class FixedDelay:
    """Up to ``attempts`` restarts in the job's life, each ``delay`` seconds after its failure."""

    def __init__(self, attempts: int, delay: float) -> None:
        if attempts < 0 or delay < 0:
            raise ValueError("attempts and delay cannot be negative")
        self.attempts = attempts
        self.delay = delay
        self.restarts = 0

    def can_restart(self, now: float) -> bool:
        if self.restarts >= self.attempts:
            return False
        self.restarts += 1
        return True

    def backoff(self) -> float:
        return self.delay

    def __repr__(self) -> str:
        return f"FixedDelay(attempts={self.attempts}, delay={self.delay})"


class FailureRate:
    """Restart as long as no more than ``max_failures`` failures fall within any
    ``interval`` seconds; a job that fails now and then survives, one that keeps failing
    does not."""

    def __init__(self, max_failures: int, interval: float, delay: float) -> None:
        if max_failures < 1 or interval <= 0 or delay < 0:
            raise ValueError("need max_failures >= 1, interval > 0 and delay >= 0")
        self.max_failures = max_failures
        self.interval = interval
        self.delay = delay
        self._failures: deque[float] = deque()

    def can_restart(self, now: float) -> bool:
        self._failures.append(now)
        while self._failures and self._failures[0] <= now - self.interval:
            self._failures.popleft()
        return len(self._failures) <= self.max_failures

    def backoff(self) -> float:
        return self.delay

    def __repr__(self) -> str:
        return (f"FailureRate(max_failures={self.max_failures}, interval={self.interval}, "
                f"delay={self.delay})")


class ExponentialDelay:
    """Always restart, waiting ``initial``, then ``multiplier`` times longer after each
    failure, at most ``max``; ``jitter`` (a fraction) spreads the pause by up to
    ±jitter·pause so that many jobs do not restart in lockstep. After ``reset_after``
    seconds without a failure the pause starts again from ``initial``."""

    def __init__(self, initial: float, max: float, multiplier: float = 2.0,
                 jitter: float = 0.1, rng: random.Random | None = None,
                 reset_after: float | None = None) -> None:
        if initial < 0 or max < initial or multiplier < 1 or not 0 <= jitter <= 1:
            raise ValueError("need 0 <= initial <= max, multiplier >= 1, 0 <= jitter <= 1")
        self.initial = initial
        self.max = max
        self.multiplier = multiplier
        self.jitter = jitter
        self.reset_after = reset_after
        self._rng = rng or random.Random()
        self._current = 0.0
        self._last_failure: float | None = None

    def can_restart(self, now: float) -> bool:
        quiet_long_enough = (self.reset_after is not None and self._last_failure is not None
                             and now - self._last_failure >= self.reset_after)
        if self._last_failure is None or quiet_long_enough:
            self._current = self.initial
        else:
            self._current = min(self._current * self.multiplier, self.max)
        self._last_failure = now
        return True

    def backoff(self) -> float:
        spread = self._current * self.jitter
        return max(0.0, self._current + self._rng.uniform(-spread, spread))

    def __repr__(self) -> str:
        return (f"ExponentialDelay(initial={self.initial}, max={self.max}, "
                f"multiplier={self.multiplier}, jitter={self.jitter})")


def restart_strategy(settings: Mapping[str, Any]) -> RestartStrategy:
    """The strategy named by ``restart-strategy.type`` with its ``restart-strategy.*``
    settings (a Config, or a Config with a job's own overrides)."""
    kind = settings["restart-strategy.type"]
    key = f"restart-strategy.{kind}."
    if kind == "fixed-delay":
        return FixedDelay(settings[key + "attempts"], settings[key + "delay"])
    if kind == "failure-rate":
        return FailureRate(settings[key + "max-failures"], settings[key + "interval"],
                           settings[key + "delay"])
    if kind == "exponential-delay":
        return ExponentialDelay(settings[key + "initial"], settings[key + "max"],
                                settings[key + "multiplier"], settings[key + "jitter"])
    return NoRestart()
