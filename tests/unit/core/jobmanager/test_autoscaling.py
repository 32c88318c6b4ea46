"""The Dispatcher's autoscaler (core/jobmanager/autoscaling.py): the TaskManagers' numbers
kept per running job, a decision rescaling the job with its reason, then a cooldown and
a fresh window; nothing when it is off or for jobs it cannot rescale."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterdeck.core.jobmanager import autoscaling
from clusterdeck.core.jobmanager.jobstore import JobRecord
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.states import JobStatus
from tests.unit.core.jobmanager.test_autoscaler import attempt
from tests.unit.core.jobmanager.test_dispatcher_bounds import Harness
from tests.unit.core.jobmanager.test_reactive import keyed

ON = {"autoscaler.enabled": True, "autoscaler.window": 10.0, "autoscaler.cooldown": 30.0,
      "autoscaler.stabilization": 0.0}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(autoscaling, "time", clock)
    return clock


def dispatcher_with(tmp_path, graph: JobGraph, **settings: object):
    """A Dispatcher (not started) running ``graph`` as job "job", its rescales recorded."""
    dispatcher = Harness(tmp_path, 0, **settings).dispatcher
    dispatcher.jobs["job"] = JobRecord("job", graph, "0" * 64, status=JobStatus.RUNNING)
    dispatcher.jobmasters["job"] = object()  # a JobMaster runs it
    dispatcher.rescaled = []
    dispatcher._rescale = lambda job_id, new, summary: dispatcher.rescaled.append(
        (job_id, new, summary))
    dispatcher.schedule = lambda *_args: None
    dispatcher._free_slots_heard(p.ClusterOverview(
        "unit", (), slots_total=4, slots_free=3, jobmanager_pid=1, taken_at=0.0))
    return dispatcher


def heard(dispatcher, seconds: range, busy: float, start: float = 100.0,
          topic: str = "metrics/taskmanager-1") -> None:
    """The TaskManager's numbers once a second: the rate source idle, the keyed vertex's
    subtasks ``busy`` that share of each second."""
    for second in seconds:
        graph = dispatcher.jobs["job"].graph
        dispatcher._metrics_heard(p.TaskManagerMetrics("taskmanager-1", start + second, tuple(
            attempt(v.id, s, (busy if v.id == "v2" else 0.0) * second, 10 * second)
            for v in graph.vertices for s in range(v.parallelism))), topic)


def test_a_busy_vertex_is_rescaled_with_its_reason_then_cools_down(tmp_path, clock):
    dispatcher = dispatcher_with(tmp_path, keyed(1), **ON)
    heard(dispatcher, range(0, 5), 0.95)
    dispatcher._autoscale()
    assert dispatcher.rescaled == []  # half a window

    heard(dispatcher, range(5, 12), 0.95)
    dispatcher._autoscale()
    ((job_id, graph, summary),) = dispatcher.rescaled
    assert job_id == "job" and [v.parallelism for v in graph.vertices] == [1, 2]
    assert summary.startswith("parallelism of process -> write raised 1 → 2: busy 95% "
                              "over 10 s")

    # the job runs on at 2 (as reactivejobs.py stores it): still busy, but cooling down
    dispatcher.jobs["job"] = replace(dispatcher.jobs["job"], graph=graph)
    heard(dispatcher, range(12, 30), 0.95)
    clock.now += 20
    dispatcher._autoscale()
    assert len(dispatcher.rescaled) == 1
    clock.now += 11
    dispatcher._autoscale()
    assert [v.parallelism for v in dispatcher.rescaled[-1][1].vertices] == [1, 3]
    # 2 x 0.95 / 0.8, rounded up


def test_an_idle_vertex_is_lowered(tmp_path, clock):
    dispatcher = dispatcher_with(tmp_path, keyed(2), **ON)
    heard(dispatcher, range(0, 12), 0.05)
    dispatcher._autoscale()
    assert "lowered 2 → 1: busy 5% over 10 s" in dispatcher.rescaled[0][2]


def test_nothing_is_decided_when_off_for_jobs_not_running_or_not_rescalable(tmp_path, clock):
    for name in ("off", "restarting", "folder"):
        (tmp_path / name).mkdir()
    assert dispatcher_with(tmp_path / "off", keyed(1)).autoscaler is None
    for dispatcher in (dispatcher_with(tmp_path / "restarting", keyed(1), **ON),
                       dispatcher_with(tmp_path / "folder", keyed(1, "source.folder"), **ON)):
        if dispatcher.jobs["job"].graph == keyed(1):
            dispatcher.jobs["job"] = replace(dispatcher.jobs["job"],
                                             status=JobStatus.RESTARTING)
        heard(dispatcher, range(0, 12), 0.95)
        dispatcher._autoscale()
        assert dispatcher.rescaled == [] and dispatcher._loads == {}


def test_an_ended_job_is_forgotten(tmp_path, clock):
    dispatcher = dispatcher_with(tmp_path, keyed(1), **ON)
    heard(dispatcher, range(0, 3), 0.5)
    assert "job" in dispatcher._loads
    dispatcher.jobs["job"] = replace(dispatcher.jobs["job"], status=JobStatus.CANCELED)
    dispatcher._autoscale()
    assert dispatcher._loads == {}


def test_numbers_naming_another_taskmanager_than_their_topics_are_refused(tmp_path, clock):
    """A TaskManager's login publishes only on its own metrics topic: numbers on it that
    name another TaskManager are a forgery, and must not rescale the job."""
    dispatcher = dispatcher_with(tmp_path, keyed(1), **ON)
    heard(dispatcher, range(0, 12), 0.95, topic="metrics/taskmanager-64")
    dispatcher._autoscale()
    assert dispatcher.rescaled == [] and dispatcher._loads == {}
