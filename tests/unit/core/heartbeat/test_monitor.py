import pytest

from clusterdeck.core.config.settings import Config
from clusterdeck.core.heartbeat import HeartbeatMonitor, detection_delay


def monitor() -> HeartbeatMonitor[dict]:
    return HeartbeatMonitor(interval=1.0, timeout=6.0, threshold=8.0)


def test_a_steady_peer_is_never_declared_lost():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    for second in range(1, 1000):
        heartbeats.receive("tm-1", {"free_slots": 2}, now=float(second))
        assert heartbeats.lost_targets(now=second + 0.5) == []


def test_a_silent_peer_is_tolerated_for_the_timeout_and_lost_within_one_more_interval():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    for second in range(1, 30):
        heartbeats.receive("tm-1", {}, now=float(second))
    last = 29.0
    assert heartbeats.lost_targets(now=last + 6.0) == []
    assert heartbeats.lost_targets(now=last + 6.0 + 1.0) == ["tm-1"]


def test_a_monitored_target_that_never_heartbeats_is_lost():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=10.0)
    assert heartbeats.lost_targets(now=10.0 + detection_delay(1.0, 6.0, 8.0) + 0.01) == ["tm-1"]


def test_only_silent_targets_are_lost():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    heartbeats.monitor("tm-2", now=0.0)
    for second in range(1, 20):
        heartbeats.receive("tm-2", {}, now=float(second))
    assert heartbeats.lost_targets(now=19.5) == ["tm-1"]


def test_all_quiet_says_whether_peers_fell_silent_together_without_reporting_them():
    heartbeats = monitor()
    assert not heartbeats.all_quiet(now=0.0, within=2.0)  # no peer: nothing to doubt
    heartbeats.monitor("tm-1", now=0.0)
    heartbeats.monitor("tm-2", now=0.0)
    for second in range(1, 11):
        heartbeats.receive("tm-1", {}, now=float(second))
        heartbeats.receive("tm-2", {}, now=second + 0.9)
    assert not heartbeats.all_quiet(now=12.0, within=2.0)  # none past its timeout yet
    assert heartbeats.all_quiet(now=16.5, within=2.0)  # tm-1 past it, tm-2 not yet: both quiet
    assert heartbeats.lost_targets(now=16.5) == ["tm-1"]  # nothing was reported before
    heartbeats.receive("tm-2", {}, now=17.0)
    assert not heartbeats.all_quiet(now=18.0, within=2.0)  # tm-2 heard: tm-1 failed alone


def test_lost_target_is_reported_once():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    assert heartbeats.lost_targets(now=20.0) == ["tm-1"]
    assert heartbeats.lost_targets(now=21.0) == []
    assert heartbeats.lost_targets(now=100.0) == []


def test_a_lost_target_is_reported_again_after_it_is_monitored_again():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    assert heartbeats.lost_targets(now=20.0) == ["tm-1"]
    heartbeats.monitor("tm-1", now=30.0)
    assert heartbeats.lost_targets(now=31.0) == []
    assert heartbeats.lost_targets(now=50.0) == ["tm-1"]


def test_a_lost_target_stays_listed_and_keeps_receiving_payloads():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    heartbeats.lost_targets(now=20.0)
    assert heartbeats.targets() == ["tm-1"]
    assert heartbeats.receive("tm-1", {"back": True}, now=21.0)
    assert heartbeats.last_payload("tm-1") == {"back": True}


def test_unknown_target_heartbeat_is_ignored():
    heartbeats = monitor()
    assert heartbeats.receive("stranger", {"free_slots": 9}, now=1.0) is False
    assert heartbeats.targets() == []
    assert heartbeats.last_payload("stranger") is None


def test_an_unmonitored_target_is_forgotten():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    heartbeats.unmonitor("tm-1")
    heartbeats.unmonitor("never-monitored")
    assert heartbeats.targets() == []
    assert heartbeats.lost_targets(now=100.0) == []
    assert heartbeats.receive("tm-1", {}, now=101.0) is False


def test_receive_keeps_the_last_payload():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    assert heartbeats.last_payload("tm-1") is None
    heartbeats.receive("tm-1", {"free_slots": 2}, now=1.0)
    heartbeats.receive("tm-1", {"free_slots": 1}, now=2.0)
    assert heartbeats.last_payload("tm-1") == {"free_slots": 1}


def test_heartbeat_age_counts_from_monitoring_then_from_the_last_heartbeat():
    heartbeats = monitor()
    assert heartbeats.heartbeat_age("tm-1", now=5.0) is None
    heartbeats.monitor("tm-1", now=5.0)
    assert heartbeats.heartbeat_age("tm-1", now=6.5) == pytest.approx(1.5)
    heartbeats.receive("tm-1", {}, now=7.0)
    assert heartbeats.heartbeat_age("tm-1", now=7.25) == pytest.approx(0.25)


def test_targets_are_listed_in_the_order_they_were_monitored():
    heartbeats = monitor()
    for target_id in ("jm", "tm-2", "tm-1"):
        heartbeats.monitor(target_id, now=0.0)
    assert heartbeats.targets() == ["jm", "tm-2", "tm-1"]


def test_from_config_reads_the_heartbeat_keys():
    config = Config({"heartbeat.interval": "200 ms", "heartbeat.timeout": "1 s",
                     "heartbeat.threshold": 10})
    heartbeats: HeartbeatMonitor[dict] = HeartbeatMonitor.from_config(config)
    assert (heartbeats.interval, heartbeats.timeout, heartbeats.threshold) == (0.2, 1.0, 10.0)
    heartbeats.monitor("tm-1", now=0.0)
    assert heartbeats.lost_targets(now=1.0) == []
    assert heartbeats.lost_targets(now=1.2) == ["tm-1"]


def test_bad_settings_fail_when_the_monitor_is_built():
    with pytest.raises(ValueError):
        HeartbeatMonitor.from_config(Config({"heartbeat.interval": 0}))


def test_jittery_heartbeats_do_not_stretch_the_timeout():
    heartbeats = monitor()
    heartbeats.monitor("tm-1", now=0.0)
    now = 0.0
    for step in range(40):  # a busy machine: 0.5 s and 1.5 s apart, alternately
        now += 0.5 if step % 2 else 1.5
        heartbeats.receive("tm-1", {}, now=now)
    assert heartbeats.lost_targets(now=now + 6.0) == []
    assert heartbeats.lost_targets(now=now + 6.01) == ["tm-1"]
