"""Restart strategies: how many restarts each allows and how long each waits."""

import random

import pytest

from clusterdeck.core.executiongraph import ExponentialDelay, FailureRate, FixedDelay, NoRestart


def test_no_restart_never_allows_a_restart():
    assert not NoRestart().can_restart(now=0.0)


def test_fixed_delay_allows_exactly_its_attempts_then_refuses():
    strategy = FixedDelay(attempts=2, delay=3.0)

    assert [strategy.can_restart(now=t) for t in (1.0, 2.0, 3.0, 4.0)] == [
        True, True, False, False]


def test_fixed_delay_waits_the_same_delay_every_time():
    strategy = FixedDelay(attempts=3, delay=3.0)

    delays = []
    for t in (1.0, 2.0, 3.0):
        strategy.can_restart(now=t)
        delays.append(strategy.backoff())
    assert delays == [3.0, 3.0, 3.0]


def test_fixed_delay_with_zero_attempts_is_like_no_restart():
    assert not FixedDelay(attempts=0, delay=1.0).can_restart(now=0.0)


def test_failure_rate_allows_max_failures_within_the_interval_and_refuses_one_more():
    strategy = FailureRate(max_failures=2, interval=10.0, delay=1.5)

    assert strategy.can_restart(now=0.0)
    assert strategy.can_restart(now=4.0)
    assert not strategy.can_restart(now=8.0)
    assert strategy.backoff() == 1.5


def test_failure_rate_forgets_failures_older_than_the_interval():
    strategy = FailureRate(max_failures=2, interval=10.0, delay=0.0)

    assert strategy.can_restart(now=0.0)
    assert strategy.can_restart(now=4.0)
    assert strategy.can_restart(now=10.0)  # the failure at 0 fell out of the window
    assert not strategy.can_restart(now=12.0)  # 4, 10 and 12 are within 10 s


def test_exponential_delay_multiplies_the_pause_up_to_the_maximum():
    strategy = ExponentialDelay(initial=1.0, max=10.0, multiplier=3.0, jitter=0.0)

    delays = []
    for t in range(5):
        assert strategy.can_restart(now=float(t))
        delays.append(strategy.backoff())
    assert delays == [1.0, 3.0, 9.0, 10.0, 10.0]


def test_exponential_delay_jitter_stays_within_its_fraction_and_follows_the_rng():
    def delays(seed):
        strategy = ExponentialDelay(initial=10.0, max=10.0, jitter=0.2,
                                    rng=random.Random(seed))
        out = []
        for t in range(20):
            strategy.can_restart(now=float(t))
            out.append(strategy.backoff())
        return out

    assert all(8.0 <= d <= 12.0 for d in delays(7))
    assert len(set(delays(7))) > 1
    assert delays(7) == delays(7)


def test_exponential_delay_starts_again_from_initial_after_a_quiet_period():
    strategy = ExponentialDelay(initial=1.0, max=60.0, jitter=0.0, reset_after=30.0)

    for t in (0.0, 1.0, 2.0):
        strategy.can_restart(now=t)
    assert strategy.backoff() == 4.0
    strategy.can_restart(now=100.0)
    assert strategy.backoff() == 1.0


@pytest.mark.parametrize("make", [
    lambda: FixedDelay(attempts=-1, delay=1.0),
    lambda: FailureRate(max_failures=0, interval=1.0, delay=1.0),
    lambda: ExponentialDelay(initial=5.0, max=1.0),
])
def test_nonsensical_settings_are_refused(make):
    with pytest.raises(ValueError):
        make()
