"""The active ResourceManager's decisions, with no network and no clock of its own."""

from __future__ import annotations

import pytest

from clusterdeck.core.jobmanager.elastic import ElasticLimits, ElasticPlanner, TaskManagerLoad

LIMITS = ElasticLimits(min_taskmanagers=1, max_taskmanagers=3, slots_per_taskmanager=2,
                       idle_timeout=10.0, start_timeout=30.0, start_backoff=1.0,
                       max_start_backoff=4.0)


def busy(name: str, free: int = 0) -> TaskManagerLoad:
    return TaskManagerLoad(name, 2, free)


def idle(name: str) -> TaskManagerLoad:
    return TaskManagerLoad(name, 2, 2)


def test_the_minimum_is_started_at_once_on_an_empty_cluster() -> None:
    planner = ElasticPlanner(LIMITS)
    assert planner.decide(0.0, pending=0, live=[], taken=set()).start == ("taskmanager-1",)
    assert planner.decide(1.0, pending=0, live=[], taken=set()).start == ()  # still coming


def test_requests_beyond_the_free_slots_start_taskmanagers_up_to_the_maximum() -> None:
    planner = ElasticPlanner(LIMITS)
    decision = planner.decide(0.0, pending=9, live=[busy("taskmanager-1")],
                              taken={"taskmanager-1"})
    assert decision.start == ("taskmanager-2", "taskmanager-3")  # 3 at most, 2 slots each


def test_slots_on_their_way_count_before_more_taskmanagers_are_asked_for() -> None:
    planner = ElasticPlanner(LIMITS)
    live = [busy("taskmanager-1")]
    assert planner.decide(0.0, pending=2, live=live, taken={"taskmanager-1"}).start == \
        ("taskmanager-2",)
    assert planner.decide(0.5, pending=2, live=live, taken={"taskmanager-1"}).start == ()
    assert planner.decide(0.6, pending=3, live=live, taken={"taskmanager-1"}).start == \
        ("taskmanager-3",)


def test_taskmanagers_started_by_hand_count_towards_the_maximum() -> None:
    planner = ElasticPlanner(LIMITS)
    live = [busy("remote-a"), busy("remote-b"), busy("remote-c")]
    assert planner.decide(0.0, pending=4, live=live, taken={"remote-a"}).start == ()


def test_idle_taskmanagers_we_started_are_stopped_after_the_timeout_down_to_the_minimum(
        ) -> None:
    planner = ElasticPlanner(LIMITS)
    for name in planner.decide(0.0, pending=5, live=[], taken=set()).start:
        planner.registered(name)
    live = [idle("taskmanager-1"), idle("taskmanager-2"), idle("taskmanager-3")]
    assert planner.decide(1.0, pending=0, live=live, taken=set()).stop == ()
    assert planner.decide(10.5, pending=0, live=live, taken=set()).stop == ()
    stop = planner.decide(11.0, pending=0, live=live, taken=set()).stop
    assert len(stop) == 2
    assert all("idle for 10 s" in planner.stopping[name] for name in stop)
    assert planner.lost(stop[0]).startswith("stopped by the ResourceManager")


def test_a_taskmanager_that_works_again_is_not_idle_any_more() -> None:
    planner = ElasticPlanner(LIMITS)
    for name in planner.decide(0.0, pending=3, live=[], taken=set()).start:
        planner.registered(name)
    planner.decide(1.0, pending=0, live=[idle("taskmanager-1"), idle("taskmanager-2")],
                   taken=set())
    planner.decide(8.0, pending=0, live=[idle("taskmanager-1"), busy("taskmanager-2")],
                   taken=set())
    decision = planner.decide(12.0, pending=0, live=[idle("taskmanager-1"),
                                                     idle("taskmanager-2")], taken=set())
    assert decision.stop == ("taskmanager-1",)


def test_taskmanagers_started_by_hand_are_never_stopped() -> None:
    planner = ElasticPlanner(LIMITS)
    live = [idle("by-hand-1"), idle("by-hand-2")]
    planner.decide(0.0, pending=0, live=live, taken={"by-hand-1", "by-hand-2"})
    assert planner.decide(100.0, pending=0, live=live, taken=set()).stop == ()


def test_nothing_is_stopped_while_requests_wait() -> None:
    planner = ElasticPlanner(LIMITS)
    for name in planner.decide(0.0, pending=3, live=[], taken=set()).start:
        planner.registered(name)
    live = [idle("taskmanager-1"), idle("taskmanager-2")]
    planner.decide(1.0, pending=0, live=live, taken=set())
    assert planner.decide(50.0, pending=1, live=live, taken=set()).stop == ()


def test_a_failed_start_backs_off_doubling_up_to_the_ceiling() -> None:
    planner = ElasticPlanner(LIMITS)
    pauses = []
    now = 0.0
    for _ in range(5):
        (name,) = planner.decide(now, pending=0, live=[], taken=set()).start
        assert planner.start_failed(name, "exit 1", now)
        assert planner.decide(now + 0.01, pending=0, live=[], taken=set()).start == ()
        pauses.append(planner.retry_at - now)
        now = planner.retry_at
    assert pauses == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert planner.failed_starts == 5
    assert planner.last_failure == f"{name}: exit 1"


def test_a_registration_ends_the_run_of_failures() -> None:
    planner = ElasticPlanner(LIMITS)
    (name,) = planner.decide(0.0, pending=0, live=[], taken=set()).start
    planner.start_failed(name, "exit 1", 0.0)
    (name,) = planner.decide(1.0, pending=0, live=[], taken=set()).start
    planner.registered(name)
    (name,) = planner.decide(2.0, pending=2, live=[busy(name)], taken={name}).start
    planner.start_failed(name, "exit 1", 2.0)
    assert planner.retry_at == 3.0


def test_a_start_that_never_registers_fails_after_the_start_timeout() -> None:
    planner = ElasticPlanner(LIMITS)
    planner.decide(0.0, pending=0, live=[], taken=set())
    decision = planner.decide(30.0, pending=0, live=[], taken=set())
    assert decision.timed_out == ("taskmanager-1",)
    assert "did not register within 30 s" in planner.last_failure


def test_a_late_or_repeated_failure_report_is_ignored() -> None:
    planner = ElasticPlanner(LIMITS)
    (name,) = planner.decide(0.0, pending=0, live=[], taken=set()).start
    planner.registered(name)
    assert not planner.start_failed(name, "late", 1.0)
    assert not planner.start_failed("taskmanager-9", "never asked for", 1.0)
    assert planner.failed_starts == 0


def test_names_in_use_are_skipped_and_those_that_failed_are_tried_last() -> None:
    planner = ElasticPlanner(LIMITS)
    planner.failed_names.add("taskmanager-2")
    decision = planner.decide(0.0, pending=4, live=[busy("taskmanager-1")],
                              taken={"taskmanager-1", "taskmanager-3"})
    assert decision.start == ("taskmanager-4", "taskmanager-5")


def test_a_name_we_stopped_may_be_used_again_though_it_is_listed_lost() -> None:
    planner = ElasticPlanner(LIMITS)
    for name in planner.decide(0.0, pending=3, live=[], taken=set()).start:
        planner.registered(name)
    live = [idle("taskmanager-1"), idle("taskmanager-2")]
    planner.decide(1.0, pending=0, live=live, taken=set())
    (stopped,) = planner.decide(12.0, pending=0, live=live, taken=set()).stop
    planner.lost(stopped)
    kept = [load for load in live if load.resource_id != stopped]
    taken = {"taskmanager-1", "taskmanager-2"}
    assert planner.decide(13.0, pending=2, live=[busy(kept[0].resource_id)],
                          taken=taken).start == (stopped,)


def test_a_minimum_above_the_maximum_is_refused() -> None:
    with pytest.raises(ValueError, match="min-taskmanagers"):
        ElasticPlanner(ElasticLimits(4, 3, 2, 10.0, 30.0, 1.0, 4.0))
