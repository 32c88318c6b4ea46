"""The phi-accrual failure detector (Hayashibara et al.), shaped like Akka's.

Instead of a yes/no timeout it keeps a sliding window of the intervals between a peer's
heartbeats and turns the silence since the last one into phi, the suspicion level:
phi = -log10(P(a heartbeat comes even later than this)). The peer is declared lost when
phi exceeds the threshold. Like Akka, the acceptable heartbeat pause (heartbeat.timeout)
is added to the mean interval, so a silence up to ``mean + pause`` never trips it.

How long a silent peer lasts, with a steady history (std clamped to min_std_deviation)::

    delay = interval + pause + y(threshold) * min_std_deviation

where y(8) = 5.226 with Akka's logistic approximation. With the defaults (interval 1 s,
timeout 6 s, threshold 8, min_std_deviation = interval / 10) the peer is tolerated for
7 s and declared lost 7.52 s after its last heartbeat, that is 6.52 s (within timeout +
one interval) after the first heartbeat it missed. With interval 0.2 s and timeout 1 s:
1.30 s. ``detection_delay`` computes these numbers.

Pure: time comes in as ``now``, monotonic seconds; nothing here sleeps or reads a clock.
"""

from __future__ import annotations

import math
from collections import deque

MIN_STD_DEVIATION_FRACTION = 0.1
"""Default min_std_deviation as a fraction of the heartbeat interval (Akka: 100 ms for 1 s)."""

_LN_10 = math.log(10.0)


def _logistic_z(y: float) -> float:
    """Akka's logistic approximation of the normal CDF: Phi(y) ~ 1 / (1 + exp(-z))."""
    return y * (1.5976 + 0.070566 * y * y)


def phi_of(time_diff: float, mean: float, std_deviation: float) -> float:
    """-log10 of the probability that a heartbeat comes later than ``time_diff``.

    Written as log10(1 + exp(z)) in two stable branches, so neither exp overflows nor
    log10 sees 0, however far ``time_diff`` is from the mean.
    """
    z = _logistic_z((time_diff - mean) / std_deviation)
    if z > 0:
        return z / _LN_10 + math.log1p(math.exp(-z)) / _LN_10
    return math.log1p(math.exp(z)) / _LN_10


def detection_delay(interval: float, timeout: float, threshold: float,
                    min_std_deviation: float | None = None) -> float:
    """Seconds after its last heartbeat at which a peer with a steady history is lost.

    A steady history has mean ``interval`` and a standard deviation at or below
    ``min_std_deviation``, which is then what the detector uses.
    """
    std = _default_min_std(interval) if min_std_deviation is None else min_std_deviation
    z = threshold * _LN_10 + math.log1p(-(10.0 ** -threshold))  # phi(z) == threshold
    low, high = 0.0, max(1.0, z)
    for _ in range(100):  # z(y) is increasing: bisect for y
        middle = (low + high) / 2
        low, high = (middle, high) if _logistic_z(middle) < z else (low, middle)
    return interval + timeout + high * std


def _default_min_std(interval: float) -> float:
    return interval * MIN_STD_DEVIATION_FRACTION


class _IntervalHistory:
    """The last ``max_sample_size`` intervals with running sums for mean and variance."""

    def __init__(self, max_sample_size: int) -> None:
        self._intervals: deque[float] = deque()
        self._max_sample_size = max_sample_size
        self._sum = 0.0
        self._squared_sum = 0.0

    def add(self, interval: float) -> None:
        if len(self._intervals) == self._max_sample_size:
            dropped = self._intervals.popleft()
            self._sum -= dropped
            self._squared_sum -= dropped * dropped
        self._intervals.append(interval)
        self._sum += interval
        self._squared_sum += interval * interval

    @property
    def mean(self) -> float:
        return self._sum / len(self._intervals)

    @property
    def std_deviation(self) -> float:
        variance = self._squared_sum / len(self._intervals) - self.mean ** 2
        return math.sqrt(max(variance, 0.0))  # running sums may dip just below zero


class PhiAccrualFailureDetector:
    """Suspicion of one peer, fed with the times its heartbeats arrive.

    Not thread-safe by design: owned by one endpoint's main thread, like the
    HeartbeatMonitor that holds it.

    Until its first heartbeat a peer is not suspected at all (phi 0). The first heartbeat
    seeds the history with ``first_heartbeat_estimate`` +/- ``min_std_deviation`` (Akka
    uses +/- a quarter of the estimate; the narrower seed makes the detection delay the
    same from the first heartbeat on instead of 0.8 s longer for the first dozen). As in
    Akka, the first heartbeat after the peer was already unavailable does not enter the
    history, so one long outage does not teach the detector to tolerate the next.
    """

    def __init__(self, *, first_heartbeat_estimate: float, acceptable_heartbeat_pause: float,
                 threshold: float, max_sample_size: int = 200,
                 min_std_deviation: float | None = None) -> None:
        if min_std_deviation is None:
            min_std_deviation = _default_min_std(first_heartbeat_estimate)
        _require(first_heartbeat_estimate > 0, "first_heartbeat_estimate must be positive")
        _require(acceptable_heartbeat_pause >= 0, "acceptable_heartbeat_pause cannot be negative")
        _require(threshold > 0, "threshold must be positive")
        _require(max_sample_size >= 2, "max_sample_size must be at least 2")
        _require(min_std_deviation > 0, "min_std_deviation must be positive")
        self.first_heartbeat_estimate = first_heartbeat_estimate
        self.acceptable_heartbeat_pause = acceptable_heartbeat_pause
        self.threshold = threshold
        self.max_sample_size = max_sample_size
        self.min_std_deviation = min_std_deviation
        self._history = _IntervalHistory(max_sample_size)
        self._last_heartbeat: float | None = None

    @property
    def last_heartbeat(self) -> float | None:
        """When the last heartbeat arrived, or None before the first."""
        return self._last_heartbeat

    def heartbeat(self, now: float) -> None:
        """Record a heartbeat that arrived at ``now``."""
        last = self._last_heartbeat
        if last is None:
            self._history.add(self.first_heartbeat_estimate - self.min_std_deviation)
            self._history.add(self.first_heartbeat_estimate + self.min_std_deviation)
        else:
            _require(now >= last, f"time went backwards: {now} < {last}")
            if self.is_available(now):
                self._history.add(now - last)
        self._last_heartbeat = now

    def phi(self, now: float) -> float:
        """The suspicion level at ``now``: 0 before the first heartbeat, then rising."""
        if self._last_heartbeat is None:
            return 0.0
        std = max(self._history.std_deviation, self.min_std_deviation)
        mean = self._history.mean + self.acceptable_heartbeat_pause
        return phi_of(now - self._last_heartbeat, mean, std)

    def is_available(self, now: float) -> bool:
        """Whether the peer is still believed alive: phi below the threshold."""
        return self.phi(now) < self.threshold


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)
