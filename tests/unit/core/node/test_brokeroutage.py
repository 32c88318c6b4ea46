"""A broken broker connection: a supervised process exits past the timeout, one that
nothing would start again keeps reconnecting and says so at growing intervals."""

from __future__ import annotations

import itertools
import logging

import pytest

from clusterdeck.core.node.brokeroutage import MAX_REPORT_INTERVAL, BrokerOutage


def test_a_supervised_process_exits_once_the_connection_stayed_broken_past_the_timeout(
        ) -> None:
    outage = BrokerOutage(60.0, keep_reconnecting=False)
    assert not outage.should_exit(100.0, serving=False, reconnecting=True)
    assert not outage.should_exit(159.0, serving=False, reconnecting=True)
    assert outage.should_exit(160.0, serving=False, reconnecting=True)


def test_a_connection_back_in_time_starts_the_count_again() -> None:
    outage = BrokerOutage(60.0, keep_reconnecting=False)
    outage.should_exit(100.0, serving=False, reconnecting=True)
    assert not outage.should_exit(150.0, serving=True, reconnecting=False)
    assert not outage.should_exit(151.0, serving=False, reconnecting=True)
    assert not outage.should_exit(210.0, serving=False, reconnecting=True)
    assert outage.should_exit(211.0, serving=False, reconnecting=True)


def test_no_timeout_never_exits() -> None:
    outage = BrokerOutage(0.0, keep_reconnecting=False)
    assert not any(outage.should_exit(t, serving=False, reconnecting=False)
                   for t in (0.0, 1e6))


def test_a_process_nothing_would_start_again_keeps_reconnecting_and_says_so_ever_less_often(
        caplog: pytest.LogCaptureFixture) -> None:
    outage = BrokerOutage(60.0, keep_reconnecting=True)
    caplog.set_level(logging.WARNING)
    reports = []
    for second in range(0, 3600, 1):
        assert not outage.should_exit(float(second), serving=False, reconnecting=True)
        if caplog.records:
            reports.append(second)
            caplog.clear()
    assert reports[:4] == [60, 120, 240, 480]
    gaps = [b - a for a, b in itertools.pairwise(reports)]
    assert max(gaps) == MAX_REPORT_INTERVAL
    assert not outage.should_exit(3600.0, serving=True, reconnecting=False)
    assert "the broker connection is back after 3600 s" in caplog.text


def test_it_exits_all_the_same_when_nothing_reconnects_it() -> None:
    outage = BrokerOutage(60.0, keep_reconnecting=True)
    assert not outage.should_exit(0.0, serving=False, reconnecting=True)
    assert not outage.should_exit(600.0, serving=False, reconnecting=True)
    assert outage.should_exit(601.0, serving=False, reconnecting=False)
