import math
import random

import pytest

from clusterdeck.core.heartbeat import PhiAccrualFailureDetector, detection_delay

DEFAULTS = (1.0, 6.0, 8.0)  # heartbeat.interval, heartbeat.timeout, heartbeat.threshold
SETTINGS = [DEFAULTS, (0.2, 1.0, 8.0)]
STEP = 0.001


def detector(interval: float = 1.0, timeout: float = 6.0, threshold: float = 8.0,
             **options: float) -> PhiAccrualFailureDetector:
    return PhiAccrualFailureDetector(first_heartbeat_estimate=interval,
                                     acceptable_heartbeat_pause=timeout, threshold=threshold,
                                     **options)


def steady(fd: PhiAccrualFailureDetector, interval: float, count: int,
           start: float = 0.0) -> float:
    """Feed ``count`` heartbeats ``interval`` apart; returns the time of the last."""
    for beat in range(count):
        fd.heartbeat(start + beat * interval)
    return start + (count - 1) * interval


def first_time_lost(fd: PhiAccrualFailureDetector, since: float) -> float:
    step = 0
    while fd.is_available(since + step * STEP):
        step += 1
    return step * STEP


def test_a_peer_is_not_suspected_before_its_first_heartbeat():
    assert detector().phi(1e6) == 0.0


def test_a_steady_peer_is_never_declared_lost():
    fd = detector()
    for beat in range(1000):
        assert fd.is_available(beat - 0.001)
        fd.heartbeat(float(beat))


@pytest.mark.parametrize(("interval", "timeout", "threshold"), SETTINGS)
def test_a_silent_peer_is_tolerated_for_one_interval_plus_the_timeout(interval, timeout,
                                                                      threshold):
    fd = detector(interval, timeout, threshold)
    last = steady(fd, interval, 50)
    assert fd.is_available(last + interval + timeout)


@pytest.mark.parametrize(("interval", "timeout", "threshold"), SETTINGS)
def test_a_silent_peer_is_lost_within_timeout_plus_one_interval_of_its_first_missed_heartbeat(
        interval, timeout, threshold):
    fd = detector(interval, timeout, threshold)
    last = steady(fd, interval, 50)
    first_missed = last + interval
    assert not fd.is_available(first_missed + timeout + interval)


@pytest.mark.parametrize(("interval", "timeout", "threshold"), SETTINGS)
def test_detection_delay_matches_a_simulated_silent_peer(interval, timeout, threshold):
    fd = detector(interval, timeout, threshold)
    last = steady(fd, interval, 50)
    simulated = first_time_lost(fd, last)
    assert simulated == pytest.approx(detection_delay(interval, timeout, threshold), abs=STEP)


def test_with_the_defaults_a_silent_peer_is_lost_about_seven_and_a_half_seconds_later():
    assert detection_delay(*DEFAULTS) == pytest.approx(7.52, abs=0.01)
    assert detection_delay(0.2, 1.0, 8.0) == pytest.approx(1.30, abs=0.01)


def test_the_detection_delay_is_the_same_from_the_first_heartbeat_on():
    delays = []
    for count in (1, 2, 5, 50):
        fd = detector()
        delays.append(first_time_lost(fd, steady(fd, 1.0, count)))
    assert max(delays) - min(delays) <= STEP


@pytest.mark.parametrize("seed", range(20))
def test_jittered_heartbeats_within_the_pause_never_trip_it(seed):
    jitter = random.Random(seed)
    fd = detector()
    now = 0.0
    fd.heartbeat(now)
    for _ in range(500):
        gap = jitter.choice([jitter.uniform(0.0, 2.0), jitter.uniform(0.0, 6.0), 0.0])
        assert fd.is_available(now + gap), f"tripped by a {gap:.3f} s gap"
        now += gap
        fd.heartbeat(now)


def test_a_gap_as_long_as_the_pause_after_a_burst_does_not_trip_it():
    fd = detector()
    steady(fd, 0.0, 200)  # a broker hiccup delivers queued heartbeats all at once
    assert fd.is_available(6.0)


def test_phi_rises_with_silence():
    fd = detector()
    last = steady(fd, 1.0, 10)
    phis = [fd.phi(last + tenth / 10) for tenth in range(100)]
    assert phis == sorted(phis)


def test_phi_stays_finite_far_from_the_mean():
    fd = detector()
    last = steady(fd, 1.0, 10)
    assert fd.phi(last) == pytest.approx(0.0, abs=1e-12)
    assert math.isfinite(fd.phi(last + 1e9))
    assert fd.phi(last + 1e9) > 1e6


def test_the_first_heartbeat_after_an_outage_is_not_learned():
    fd = detector()
    last = steady(fd, 1.0, 10)
    assert not fd.is_available(last + 100.0)
    last = steady(fd, 1.0, 3, start=last + 100.0)
    assert first_time_lost(fd, last) == pytest.approx(detection_delay(*DEFAULTS), abs=STEP)


def test_only_the_last_max_sample_size_intervals_count():
    fd = detector(max_sample_size=10)
    last = steady(fd, 3.0, 20)
    last = steady(fd, 1.0, 11, start=last + 1.0)
    assert first_time_lost(fd, last) == pytest.approx(detection_delay(*DEFAULTS), abs=STEP)


def test_a_smaller_min_std_deviation_detects_sooner():
    fd = detector(min_std_deviation=0.01)
    last = steady(fd, 1.0, 10)
    assert first_time_lost(fd, last) == pytest.approx(
        detection_delay(*DEFAULTS, min_std_deviation=0.01), abs=STEP)
    assert first_time_lost(fd, last) < detection_delay(*DEFAULTS)


def test_time_going_backwards_is_refused():
    fd = detector()
    fd.heartbeat(5.0)
    with pytest.raises(ValueError, match="backwards"):
        fd.heartbeat(4.0)


@pytest.mark.parametrize("bad", [
    {"interval": 0.0}, {"timeout": -1.0}, {"threshold": 0.0}, {"max_sample_size": 1},
    {"min_std_deviation": 0.0},
])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        detector(**bad)
