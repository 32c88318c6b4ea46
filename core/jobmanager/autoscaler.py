"""The autoscaler's planner (``autoscaler.enabled``, after Flink's autoscaler): from the
live numbers the TaskManagers publish (core/protocol/metrics.py, the window's numbers),
per vertex of a running streaming job, its busy share over a window; a vertex busy above
the target, or whose producers it backpressures, is raised to the parallelism its
measured load needs, one mostly idle is lowered, within limits. Pure, on the
Dispatcher's main thread (autoscaling.py feeds and applies it): times come in.

The load: each subtask's ``busy`` and ``backpressured`` are totals of seconds, so a share
is the difference of two samples over the time between them (a lost message costs
nothing). A vertex's busy share is its subtasks' mean; its need is
``parallelism * busy / target``, rounded up, and more when its producers were
backpressured meanwhile (they would have sent ``1 / (1 - backpressure)`` times as much).
Sources keep their parallelism (what they read is not work a wider vertex shares), and a
vertex that took no records over the window is not raised (it starts, or it is stuck:
more subtasks would not help).

Against flapping: a decision needs a whole window of samples of the job's current run
(so a rescaled job is judged afresh, once its new run filled a window; each attempt's
first ``stabilization`` seconds, Spark starting its work, left out), none comes within
``cooldown`` of the job's last rescale, and lowering goes only as far as keeps the busy
share under the target, while raising from above the target leaves it above half the
target: with ``idle`` below half of ``target`` the two never undo each other.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobGraph, JobVertex

if TYPE_CHECKING:
    from clusterdeck.core.config.settings import Config

SAMPLES_KEPT = 600  # per subtask: ten minutes of one a second, whatever the window
BACKPRESSURE_MOST = 0.9  # a producer's backpressure counted at most so (its need x10)
FULL = 0.9  # share of the window a subtask's samples must span for a decision


@dataclass(frozen=True)
class AutoscalerSettings:
    window: float = 20.0      # seconds of numbers a decision is made from
    target: float = 0.8       # busy share a vertex is raised above, and lowered to under
    idle: float = 0.3         # busy share a vertex is lowered below
    cooldown: float = 30.0    # seconds after a job's rescale before the next decision
    least: int = 1            # autoscaler.min-parallelism
    most: int = 0             # autoscaler.max-parallelism; 0: the slots there are
    stabilization: float = 0.0  # seconds of a new attempt's numbers left out (its start)

    @classmethod
    def from_config(cls, config: Config) -> AutoscalerSettings:
        return cls(config["autoscaler.window"], config["autoscaler.target-busy"],
                   config["autoscaler.idle-busy"], config["autoscaler.cooldown"],
                   config["autoscaler.min-parallelism"],
                   config["autoscaler.max-parallelism"], config["autoscaler.stabilization"])


@dataclass(frozen=True)
class Sample:
    time: float
    busy: float
    backpressured: float
    records_in: int


@dataclass(frozen=True)
class VertexLoad:
    """A vertex's numbers over the window: shares of its subtasks' time, mean over them."""

    busy: float
    backpressured: float
    rate_in: float  # records/s, all subtasks
    seconds: float  # the span the numbers cover (the shortest subtask's)


@dataclass(frozen=True)
class Decision:
    vertex_id: str
    name: str
    old: int
    new: int
    reason: str

    def summary(self) -> str:
        verb = "raised" if self.new > self.old else "lowered"
        return f"parallelism of {self.name} {verb} {self.old} → {self.new}: {self.reason}"


class JobLoad:
    """The samples of one job's current run, per (vertex, subtask), of its latest attempt
    each; bounded by the graph (its vertices and their parallelism) and SAMPLES_KEPT."""

    def __init__(self, graph: JobGraph, stabilization: float = 0.0) -> None:
        self.graph = graph
        self.stabilization = stabilization
        self._parallelism = {v.id: v.parallelism for v in graph.vertices}
        self._samples: dict[tuple[str, int], tuple[str, float, deque[Sample]]] = {}

    def heard(self, at: float, attempt: p.AttemptMetrics) -> None:
        """One attempt's totals at ``at`` (its TaskManager's clock): kept when it is one of
        this run's subtasks; a new attempt of a subtask starts its samples afresh."""
        parallelism = self._parallelism.get(attempt.vertex_id)
        if parallelism is None or not 0 <= attempt.subtask < parallelism or attempt.final:
            return
        key = (attempt.vertex_id, attempt.subtask)
        held = self._samples.get(key)
        if held is None or held[0] != attempt.attempt_id:
            # its first stabilization seconds (Spark starting its work) are left out
            held = self._samples[key] = (attempt.attempt_id, at + self.stabilization,
                                         deque(maxlen=SAMPLES_KEPT))
        samples = held[2]
        if at < held[1] or (samples and at <= samples[-1].time):
            return  # starting, or late or repeated: totals only go forward in time
        samples.append(Sample(at, max(0.0, attempt.busy), max(0.0, attempt.backpressured),
                              max(0, attempt.records_in)))

    def load(self, vertex: JobVertex, window: float) -> VertexLoad | None:
        """The vertex's numbers over the last ``window`` seconds of each subtask's samples;
        None until every subtask has samples spanning most of the window."""
        busy = backpressured = rate = 0.0
        shortest = math.inf
        for subtask in range(vertex.parallelism):
            held = self._samples.get((vertex.id, subtask))
            if held is None or len(held[2]) < 2:
                return None
            samples = held[2]
            last = samples[-1]
            while len(samples) > 2 and samples[1].time <= last.time - window:
                samples.popleft()  # older than the window needs
            first = samples[0]
            seconds = last.time - first.time
            if seconds < window * FULL:
                return None
            busy += min(1.0, (last.busy - first.busy) / seconds)
            backpressured += min(1.0, (last.backpressured - first.backpressured) / seconds)
            rate += max(0, last.records_in - first.records_in) / seconds
            shortest = min(shortest, seconds)
        return VertexLoad(max(0.0, busy / vertex.parallelism),
                          max(0.0, backpressured / vertex.parallelism), rate, shortest)


def producers(graph: JobGraph, vertex: JobVertex) -> list[JobVertex]:
    ids = {edge.source for edge in graph.edges if edge.target == vertex.id}
    return [v for v in graph.vertices if v.id in ids]


def plan_job(graph: JobGraph, loads: dict[str, VertexLoad], settings: AutoscalerSettings,
             slots_free: int, most: int) -> list[Decision]:
    """The vertices to rescale now and to what. ``loads``: the vertices with a full window;
    ``slots_free``: free slots of the cluster a raise may take (0 when not known);
    ``most``: ``jobmanager.max-parallelism``."""
    decisions = []
    for vertex in graph.vertices:
        load = loads.get(vertex.id)
        if load is None or vertex.is_source:
            continue
        pressure = max((loads[v.id].backpressured for v in producers(graph, vertex)
                        if v.id in loads), default=0.0)
        # an explicit most may exceed the free slots: the active ResourceManager starts
        # TaskManagers for it; by default a raise takes only slots that are free
        room = settings.most or vertex.parallelism + max(0, slots_free)
        highest = min(graph.max_parallelism, most, room)
        decision = _decide(vertex, load, pressure, settings, highest)
        if decision is not None:
            decisions.append(decision)
            slots_free -= decision.new - decision.old
    return decisions


def _decide(vertex: JobVertex, load: VertexLoad, pressure: float,
            settings: AutoscalerSettings, highest: int) -> Decision | None:
    old = vertex.parallelism
    seconds = f"over {load.seconds:.0f} s"
    numbers = f"{load.rate_in:.1f} records/s in"
    busy = load.busy > settings.target or (pressure > settings.idle and
                                           load.busy > settings.idle)
    if busy and load.rate_in > 0:  # no records in: a start, a stall, not its load
        demand = 1.0 / (1.0 - min(pressure, BACKPRESSURE_MOST))
        need = math.ceil(old * load.busy * demand / settings.target)
        new = min(highest, max(need, old + 1))
        if new <= old:
            return None
        why = f"busy {load.busy:.0%} {seconds}"
        if pressure > settings.idle:
            why += f", its producers backpressured {pressure:.0%}"
        return Decision(vertex.id, vertex.name, old, new, f"{why} ({numbers})")
    calm = load.backpressured < settings.idle and pressure < settings.idle
    if load.busy < settings.idle and calm:
        new = max(settings.least, math.ceil(old * load.busy / settings.target))
        if new >= old:
            return None
        return Decision(vertex.id, vertex.name, old, new,
                        f"busy {load.busy:.0%} {seconds} ({numbers})")
    return None
