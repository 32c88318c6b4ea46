"""The autoscaler's planner (core/jobmanager/autoscaler.py): a vertex's load over a window
from its subtasks' totals, raised when busy or backpressuring its producers, lowered when
idle, within limits, and never undoing its own decisions."""

from __future__ import annotations

from clusterdeck.core.jobmanager.autoscaler import (
    AutoscalerSettings,
    JobLoad,
    VertexLoad,
    plan_job,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobGraph
from tests.unit.core.jobmanager.test_reactive import keyed

SETTINGS = AutoscalerSettings(window=10.0, target=0.8, idle=0.3, cooldown=5.0)


def attempt(vertex: str, subtask: int, busy: float, records_in: int = 0,
            backpressured: float = 0.0, attempt_id: str = "") -> p.AttemptMetrics:
    return p.AttemptMetrics("job", vertex, subtask, 0, attempt_id or f"{vertex}-{subtask}",
                            records_in, 0, 0, 0, busy, backpressured=backpressured)


def fed(graph: JobGraph, seconds: int, busy: dict[str, float],
        backpressured: dict[str, float] | None = None, stabilization: float = 0.0
        ) -> JobLoad:
    """A job's load after ``seconds`` of one sample a second, each vertex's subtasks busy
    (and backpressured) the given shares, taking ten records a second each."""
    load = JobLoad(graph, stabilization)
    for second in range(seconds + 1):
        for vertex in graph.vertices:
            for subtask in range(vertex.parallelism):
                load.heard(100.0 + second, attempt(
                    vertex.id, subtask, busy.get(vertex.id, 0.0) * second, 10 * second,
                    (backpressured or {}).get(vertex.id, 0.0) * second))
    return load


def loads(load: JobLoad) -> dict[str, VertexLoad]:
    numbers = {v.id: load.load(v, SETTINGS.window) for v in load.graph.vertices}
    return {vertex_id: n for vertex_id, n in numbers.items() if n is not None}


def test_the_load_is_the_subtasks_mean_share_over_the_window():
    numbers = loads(fed(keyed(2), 30, {"v2": 0.5}))["v2"]
    assert abs(numbers.busy - 0.5) < 1e-9
    assert abs(numbers.rate_in - 20.0) < 1e-9  # ten a second per subtask
    assert abs(numbers.seconds - 10.0) < 1e-9  # the window, not the 30 s heard


def test_no_load_until_a_window_is_full():
    assert loads(fed(keyed(1), 5, {"v2": 1.0})) == {}


def test_the_first_seconds_of_an_attempt_are_left_out():
    assert loads(fed(keyed(1), 12, {"v2": 1.0}, stabilization=5.0)) == {}  # 7 s after
    assert abs(loads(fed(keyed(1), 16, {"v2": 1.0}, stabilization=5.0))["v2"].seconds
               - 10.0) < 1e-9


def test_a_busy_vertex_is_raised_to_what_its_load_needs_with_its_reason():
    (decision,) = plan_job(keyed(1), loads(fed(keyed(1), 12, {"v2": 0.96})), SETTINGS,
                           slots_free=4, most=10_000)
    assert (decision.vertex_id, decision.old, decision.new) == ("v2", 1, 2)
    assert decision.summary() == ("parallelism of process -> write raised 1 → 2: busy 96% "
                                  "over 10 s (10.0 records/s in)")


def test_a_busy_vertex_that_took_no_records_is_not_raised():
    """Its start (Spark setting up its work), or a stall more subtasks would not help."""
    load = JobLoad(keyed(1))
    for second in range(12):
        load.heard(100.0 + second, attempt("v2", 0, float(second), records_in=5))
    assert plan_job(keyed(1), loads(load), SETTINGS, slots_free=4, most=10_000) == []


def test_a_vertex_its_producers_are_backpressured_by_is_raised_beyond_its_busy_share():
    graph = keyed(2)
    (decision,) = plan_job(graph, loads(fed(graph, 12, {"v2": 0.7}, {"v1": 0.6})),
                           SETTINGS, slots_free=8, most=10_000)
    assert decision.new == 5  # 2 x 0.7 / 0.8, times 1 / (1 - 0.6)
    assert "its producers backpressured 60%" in decision.reason


def test_a_mostly_idle_vertex_is_lowered_only_as_far_as_keeps_it_under_the_target():
    graph = keyed(4)
    (decision,) = plan_job(graph, loads(fed(graph, 12, {"v2": 0.25})), SETTINGS,
                           slots_free=0, most=10_000)
    assert (decision.old, decision.new) == (4, 2)  # 4 x 0.25 / 0.8, rounded up
    assert decision.summary().startswith("parallelism of process -> write lowered 4 → 2: "
                                         "busy 25% over 10 s")


def test_a_vertex_between_idle_and_target_and_a_source_keep_their_parallelism():
    graph = keyed(2)
    assert plan_job(graph, loads(fed(graph, 12, {"v1": 0.99, "v2": 0.5})), SETTINGS,
                    slots_free=8, most=10_000) == []


def test_an_idle_vertex_backpressured_by_its_consumer_is_not_lowered():
    graph = keyed(2)
    assert plan_job(graph, loads(fed(graph, 12, {"v2": 0.1}, {"v2": 0.8})), SETTINGS,
                    slots_free=8, most=10_000) == []


def test_a_raise_stays_within_the_free_slots_the_limits_and_the_key_groups():
    graph = keyed(1)
    busy = loads(fed(graph, 12, {"v2": 1.0}, {"v1": 0.9}))  # needs 13
    assert plan_job(graph, busy, SETTINGS, slots_free=0, most=10_000) == []
    assert plan_job(graph, busy, SETTINGS, slots_free=2, most=10_000)[0].new == 3
    assert plan_job(graph, busy, SETTINGS, slots_free=2, most=2)[0].new == 2
    limited = AutoscalerSettings(window=10.0, most=6)  # may exceed the free slots
    assert plan_job(graph, busy, limited, slots_free=0, most=10_000)[0].new == 6
    few_keys = keyed(1, max_parallelism=4)
    assert plan_job(few_keys, busy, SETTINGS, slots_free=20, most=10_000)[0].new == 4


def test_a_lower_stays_at_least_the_minimum():
    graph = keyed(4)
    at_least = AutoscalerSettings(window=10.0, least=3)
    assert plan_job(graph, loads(fed(graph, 12, {"v2": 0.0})), at_least, slots_free=0,
                    most=10_000)[0].new == 3


def test_a_raise_and_the_numbers_after_it_do_not_lower_it_again():
    """Raised from a share just above the target, the new parallelism's share stays above
    the idle threshold: no flapping."""
    for old in range(1, 9):
        graph = keyed(old)
        (up,) = plan_job(graph, loads(fed(graph, 12, {"v2": 0.81})), SETTINGS,
                         slots_free=100, most=10_000)
        after = keyed(up.new)
        share = old * 0.81 / up.new
        assert plan_job(after, loads(fed(after, 12, {"v2": share})), SETTINGS,
                        slots_free=100, most=10_000) == [], (old, up.new, share)


def test_a_new_attempt_of_a_subtask_starts_its_samples_afresh():
    load = fed(keyed(1), 12, {"v2": 0.9})
    load.heard(113.0, attempt("v2", 0, 0.0, attempt_id="again"))
    assert "v2" not in loads(load)


def test_numbers_of_other_vertices_subtasks_and_late_messages_are_dropped():
    load = fed(keyed(1), 12, {"v2": 0.5})
    load.heard(50.0, attempt("v2", 0, 99.0))       # older than the latest
    load.heard(113.0, attempt("v2", 5, 99.0))      # no such subtask
    load.heard(113.0, attempt("v9", 0, 99.0))      # no such vertex
    assert abs(loads(load)["v2"].busy - 0.5) < 1e-9
