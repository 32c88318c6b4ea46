"""The ResourceManager's book of TaskManagers stays bounded: few registered, lost ones fade."""

from __future__ import annotations

from clusterdeck.core.jobmanager.taskmanagers import TaskManagerRegistry
from clusterdeck.core.protocol import messages as p


def request(resource_id: str, instance_id: str = "one") -> p.RegisterTaskManager:
    return p.RegisterTaskManager("default", p.PROTOCOL_VERSION, resource_id, instance_id,
                                 f"taskexecutor.{resource_id}", "host", 1,
                                 p.SlotReport((p.SlotStatus(0),)))


def test_a_registration_beyond_max_taskmanagers_is_refused_naming_the_setting() -> None:
    registry = TaskManagerRegistry("default", max_registered=2)
    for name in ("a", "b"):
        assert registry.refusal(request(name)) is None
        registry.register(request(name), 0.0)
    reason = registry.refusal(request("c"))
    assert reason and "resourcemanager.max-taskmanagers" in reason


def test_a_known_taskmanager_restarting_is_not_counted_twice() -> None:
    registry = TaskManagerRegistry("default", max_registered=1)
    registry.register(request("a"), 0.0)
    assert registry.refusal(request("a", "two")) is None


def test_a_lost_taskmanager_frees_its_place() -> None:
    registry = TaskManagerRegistry("default", max_registered=1)
    registry.register(request("a"), 0.0)
    registry.mark_lost("a", "gone", now=1.0)
    assert registry.refusal(request("b")) is None


def test_lost_taskmanagers_are_forgotten_after_the_retention_time() -> None:
    registry = TaskManagerRegistry("default")
    for name, lost_at in (("a", 10.0), ("b", 20.0)):
        registry.register(request(name), 0.0)
        registry.mark_lost(name, "gone", now=lost_at)
    assert registry.forget_lost(now=25.0, retention=10.0, keep=100) == ["a"]
    assert [r.resource_id for r in registry.all()] == ["b"]


def test_only_the_most_recently_lost_are_kept_beyond_the_count() -> None:
    registry = TaskManagerRegistry("default")
    for i in range(10):
        registry.register(request(f"tm-{i}"), 0.0)
    registry.register(request("live"), 0.0)
    for i in reversed(range(10)):  # tm-9 is lost first
        registry.mark_lost(f"tm-{i}", "gone", now=100.0 - i)
    assert registry.forget_lost(now=100.0, retention=1000.0, keep=3) == \
        [f"tm-{i}" for i in (9, 8, 7, 6, 5, 4, 3)]
    assert sorted(r.resource_id for r in registry.all()) == ["live", "tm-0", "tm-1", "tm-2"]


def test_a_clock_offset_is_the_least_delayed_heartbeats_and_shown_in_the_overview() -> None:
    """Each heartbeat's send time against its arrival is the offset less that heartbeat's
    delay: the highest of the recent ones is the best guess (NTP's minimum-delay filter)."""
    registry = TaskManagerRegistry("default")
    _, registration = registry.register(request("a"), 0.0)
    assert registration is not None
    assert registry.info(registration, 0.1, 1).clock_offset_s is None  # none heard yet
    for delay in (0.4, 0.05, 0.2):
        sent = 1000.0 + delay
        heartbeat = p.TaskManagerHeartbeat("a", registration.registration_id,
                                           registration.slot_report, wall_time=sent - 30.0)
        assert registry.accept_heartbeat(heartbeat, sent + delay)
    assert registry.info(registration, 0.1, 1).clock_offset_s == -30.05


def test_a_heartbeat_that_does_not_tell_its_time_gives_no_offset() -> None:
    registry = TaskManagerRegistry("default")
    _, registration = registry.register(request("a"), 0.0)
    assert registration is not None
    assert registry.accept_heartbeat(p.TaskManagerHeartbeat(
        "a", registration.registration_id, registration.slot_report), 1000.0)
    assert registration.clock_offset is None
