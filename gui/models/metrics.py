"""The live numbers of jobs and processes, kept for the graph and the plots (docs/metrics.md).

TaskManagers publish, once a second, every running attempt's records and bytes so far and
the last numbers of the attempts that ended (``TaskManagerMetrics``). Here they become,
per job vertex, totals over its subtasks (each subtask counted by its current attempt, as
the job result counts it), a history of those totals, and from the history the rates:
records/s in and out and the busy share (seconds its subtasks ran per second, over its
parallelism). A streaming vertex also has its backpressure, the highest share of a second
one of its subtasks waited for its consumers (taken per subtask from its attempt's
totals, Flink's backPressuredTimeMsPerSecond), in Flink's bands, and its watermark, the
smallest of its subtasks'. Per process: CPU, memory and, for TaskManagers, the Spark JVM's heap over
time. Plain Python: the GUI thread feeds it from the bridge's ticks.

Everything here is bounded: MAX_JOBS jobs (the oldest seen forgotten first) and HISTORY
points per series. A series spans its whole life all the same: when it is full, its older
half keeps every other point (an hour at one a second, the two before at one in two, and
so on), so a cluster's first minutes stay on the plot at a coarser grain.
"""

from __future__ import annotations

import math
import statistics
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.ids import epoch_of

MAX_JOBS = 50
HISTORY = 3600            # points per series: an hour at one a second
RATE_WINDOW = 3.0         # seconds a rate is taken over
MAX_PROCESSES = 256
MAX_VERTICES = 1000       # per job: numbers of vertices past it are dropped
MAX_SUBTASKS = 100_000    # per vertex (jobmanager.max-parallelism is 10,000 by default)
BACKPRESSURE_BANDS = ((0.10, "OK"), (0.50, "LOW"), (math.inf, "HIGH"))
"""Flink's web UI: a share of time back-pressured up to 10% is OK, up to 50% LOW, above
that HIGH."""


class Series(list[tuple[Any, ...]]):
    """Points oldest first, at most ``most``: past that the older half is thinned."""

    def __init__(self, most: int = HISTORY) -> None:
        super().__init__()
        self.most = most

    def add(self, point: tuple[Any, ...]) -> None:
        self.append(point)
        if len(self) > self.most:
            half = len(self) // 2
            self[:half] = self[:half:2]


@dataclass(frozen=True)
class VertexNumbers:
    """One vertex now: totals over its subtasks, rates over the last RATE_WINDOW, and the
    spread of records out over its subtasks (min, median, max, the subtask with most)."""

    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    busy: float = 0.0
    rate_in: float = 0.0
    rate_out: float = 0.0
    busy_share: float = 0.0
    spread: tuple[int, float, int, int] | None = None
    subtasks: int = 0  # subtasks that reported
    backpressure: float = 0.0  # the highest share back-pressured of its subtasks, now
    backpressured_subtask: int | None = None  # ... the subtask with it (None when 0)
    watermark: float | None = None  # the smallest of its subtasks'; math.inf: the end

    @property
    def backpressure_band(self) -> str:
        return backpressure_band(self.backpressure)


def backpressure_band(share: float) -> str:
    """"OK", "LOW" or "HIGH", as Flink's web UI bands a share of time back-pressured."""
    return next(band for most, band in BACKPRESSURE_BANDS if share <= most)


@dataclass
class _Pressure:
    """One subtask's attempt's seconds back-pressured so far, over the last seconds, at
    its TaskManager's times: its share now is theirs over RATE_WINDOW."""

    attempt_id: str
    points: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=64))

    def add(self, at: float, backpressured: float) -> None:
        if self.points and at < self.points[-1][0]:
            at = self.points[-1][0]  # its clock went back: keep time going
        self.points.append((at, backpressured))
        while len(self.points) > 2 and self.points[0][0] < at - 2 * RATE_WINDOW:
            self.points.popleft()

    @property
    def last(self) -> float:
        return self.points[-1][0]

    def share(self) -> float:
        """Seconds back-pressured per second over the last RATE_WINDOW, at most 1 (a long
        wait is counted when it ends: it can fill a window at once)."""
        last = self.points[-1]
        start = next(point for point in self.points if point[0] >= last[0] - RATE_WINDOW)
        seconds = last[0] - start[0]
        return max(0.0, min(1.0, (last[1] - start[1]) / seconds)) if seconds > 0 else 0.0


@dataclass
class _Point:
    time: float
    records_in: int
    records_out: int
    busy: float


@dataclass
class _Vertex:
    parallelism: int = 1
    subtasks: dict[int, p.AttemptMetrics] = field(default_factory=dict)
    where: dict[int, str] = field(default_factory=dict)  # subtask -> its TaskManager's id
    pressure: dict[int, _Pressure] = field(default_factory=dict)  # running subtasks'
    history: deque[_Point] = field(default_factory=lambda: deque(maxlen=HISTORY))  # recent
    rates: Series = field(default_factory=Series)  # time, in/s, out/s, busy share

    def take(self, numbers: p.AttemptMetrics, at: float, taskmanager_id: str = "") -> bool:
        """Keep ``numbers`` (sent at ``at`` by ``taskmanager_id``) if they are of the
        subtask's current attempt (the latest run and attempt; an older attempt's late
        numbers are dropped)."""
        held = self.subtasks.get(numbers.subtask)
        if held is not None and _order(held) > _order(numbers):
            return False
        if held is not None and held.attempt_id == numbers.attempt_id and held.final:
            return False  # its last numbers are in; a late running report is older
        self.subtasks[numbers.subtask] = numbers
        self.where[numbers.subtask] = taskmanager_id
        if numbers.final:  # ended: nothing holds it back any more
            self.pressure.pop(numbers.subtask, None)
            return True
        pressure = self.pressure.get(numbers.subtask)
        if pressure is None or pressure.attempt_id != numbers.attempt_id:
            pressure = self.pressure[numbers.subtask] = _Pressure(numbers.attempt_id)
        pressure.add(at, numbers.backpressured)
        return True

    def totals(self) -> tuple[int, int, int, int, float]:
        values = self.subtasks.values()
        return (sum(n.records_in for n in values), sum(n.records_out for n in values),
                sum(n.bytes_in for n in values), sum(n.bytes_out for n in values),
                sum(n.busy for n in values))

    def sample(self, now: float) -> None:
        records_in, records_out, _, _, busy = self.totals()
        if self.history and now < self.history[-1].time:
            now = self.history[-1].time  # another machine's clock behind: keep time going
        self.history.append(_Point(now, records_in, records_out, busy))
        while len(self.history) > 2 and self.history[0].time < now - 2 * RATE_WINDOW:
            self.history.popleft()  # only the last seconds make a rate
        self.rates.add((now, *self._rates(now)))

    def _rates(self, now: float) -> tuple[float, float, float]:
        start = next((point for point in self.history if point.time >= now - RATE_WINDOW),
                     None)
        last = self.history[-1] if self.history else None
        if start is None or last is None or last.time - start.time <= 0:
            return 0.0, 0.0, 0.0
        seconds = last.time - start.time
        return ((last.records_in - start.records_in) / seconds,
                (last.records_out - start.records_out) / seconds,
                min(1.0, (last.busy - start.busy) / seconds / max(1, self.parallelism)))

    def numbers(self, now: float | None) -> VertexNumbers:
        """Its numbers; rates fall to 0 when nothing was heard for two windows by ``now``
        (None: as last heard, for a recording)."""
        records_in, records_out, bytes_in, bytes_out, busy = self.totals()
        fresh = self.rates and (now is None or now - self.rates[-1][0] <= 2 * RATE_WINDOW)
        rate_in, rate_out, share = self.rates[-1][1:] if fresh else (0.0, 0.0, 0.0)
        outs = sorted((n.records_out, n.subtask) for n in self.subtasks.values())
        spread = (outs[0][0], statistics.median(o for o, _ in outs), outs[-1][0],
                  outs[-1][1]) if outs else None
        pressed, subtask = self._backpressure() if fresh else (0.0, None)
        return VertexNumbers(records_in, records_out, bytes_in, bytes_out, busy, rate_in,
                             rate_out, share, spread, len(outs), pressed, subtask,
                             self._watermark())

    def _backpressure(self) -> tuple[float, int | None]:
        """The highest share of its running subtasks heard of lately, and whose."""
        latest = max((pressure.last for pressure in self.pressure.values()), default=0.0)
        shares = [(pressure.share(), subtask) for subtask, pressure in self.pressure.items()
                  if pressure.last >= latest - 2 * RATE_WINDOW]  # a silent one is gone
        share, subtask = max(shares, default=(0.0, None))
        return (share, subtask) if share > 0 else (0.0, None)

    def _watermark(self) -> float | None:
        """The smallest of its subtasks' (Flink's): none while any has none."""
        marks = [math.inf if n.watermark_end else n.watermark
                 for n in self.subtasks.values()]
        if not marks or any(mark is None for mark in marks):
            return None
        return min(mark for mark in marks if mark is not None)


def _order(numbers: p.AttemptMetrics) -> tuple[int, int]:
    return epoch_of(numbers.attempt_id) or 0, numbers.attempt


@dataclass
class ProcessSeries:
    """One process over time: CPU % of a core, resident bytes, Spark JVM heap bytes."""

    cpu: Series = field(default_factory=Series)      # (time, CPU %)
    memory: Series = field(default_factory=Series)   # (time, bytes)
    heap: Series = field(default_factory=Series)     # (time, used, most)


class MetricsStore:
    """What the views draw from; fed on the GUI thread."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[str, dict[str, _Vertex]] = OrderedDict()
        self.processes: OrderedDict[str, ProcessSeries] = OrderedDict()
        self.spark_ui: dict[str, str] = {}  # TaskManager -> its Spark UI's address
        # TaskManager -> its wall clock less the JobManager's, as the ResourceManager
        # measured it: its numbers are placed on the JobManager's machine's time line
        self.clock_offsets: dict[str, float] = {}

    def set_clock_offsets(self, overview: p.ClusterOverview | None) -> None:
        """From the cluster overview: each TaskManager's measured clock offset."""
        self.clock_offsets = {info.id: info.clock_offset_s for info in
                              (overview.taskmanagers if overview else ())
                              if info.clock_offset_s is not None}

    def clear(self) -> None:
        self._jobs.clear()
        self.processes.clear()
        self.spark_ui.clear()

    def set_parallelism(self, job_id: str, parallelism: dict[str, int]) -> None:
        """Each vertex's parallelism, for its busy share (from the job's snapshot)."""
        for vertex_id, count in parallelism.items():
            self._vertex(job_id, vertex_id).parallelism = max(1, count)

    def add(self, messages: list[p.TaskManagerMetrics]) -> set[str]:
        """Take a tick's messages; every vertex of a job a message touched gets a point at
        the message's time (a recording's too), less its TaskManager's clock offset: a
        clock 30 s behind would otherwise make its numbers stale at once (rates shown as
        0). Returns the jobs whose numbers changed."""
        changed: set[str] = set()
        for message in messages:
            message = replace(message, time=message.time - self.clock_offsets.get(
                message.taskmanager_id, 0.0))
            if message.spark_ui and len(self.spark_ui) < MAX_PROCESSES:
                self.spark_ui[message.taskmanager_id] = message.spark_ui
            if message.heap_used >= 0:
                self._process(message.taskmanager_id).heap.add(
                    (message.time, message.heap_used, message.heap_max))
            touched = {numbers.job_id for numbers in message.attempts
                       if self._fits(numbers)
                       and self._vertex(numbers.job_id, numbers.vertex_id).take(
                           numbers, message.time, message.taskmanager_id)}
            for job_id in touched:
                for vertex in self._jobs.get(job_id, {}).values():
                    vertex.sample(message.time)
            changed |= touched
        return changed

    def add_resources(self, named: dict[str, tuple[float, int]], now: float) -> None:
        """One sample per process name: (CPU %, resident bytes)."""
        for name, (cpu, memory) in named.items():
            series = self._process(name)
            series.cpu.add((now, cpu))
            series.memory.add((now, memory))

    def add_samples(self, samples: list[tuple[float, str, float, int]]) -> None:
        """Recorded samples: (time, process name, CPU %, resident bytes)."""
        for at, name, cpu, memory in samples:
            series = self._process(name)
            series.cpu.add((at, cpu))
            series.memory.add((at, memory))

    def vertices(self, job_id: str, now: float | None = None) -> dict[str, VertexNumbers]:
        """Each vertex's numbers as of ``now`` (wall clock; None: as last heard)."""
        return {vertex_id: vertex.numbers(now)
                for vertex_id, vertex in self._jobs.get(job_id, {}).items()}

    def attempts(self, job_id: str, vertex_id: str) -> list[tuple[str, p.AttemptMetrics]]:
        """Each subtask's current attempt's last numbers with its TaskManager's id: who
        runs the vertex now (core/profiling/vertexprofile.py)."""
        vertex = self._jobs.get(job_id, {}).get(vertex_id)
        if vertex is None:
            return []
        return [(vertex.where.get(subtask, ""), numbers)
                for subtask, numbers in sorted(vertex.subtasks.items())]

    def rates(self, job_id: str, vertex_id: str
              ) -> list[tuple[float, float, float, float]]:
        """(time, records/s in, records/s out, busy share) of one vertex over time."""
        vertex = self._jobs.get(job_id, {}).get(vertex_id)
        return list(vertex.rates) if vertex is not None else []

    def _fits(self, numbers: p.AttemptMetrics) -> bool:
        """Numbers a TaskManager could have sent: a message is data, and a TaskManager's
        login must not make the window hold without bound."""
        job = self._jobs.get(numbers.job_id, {})
        vertex = job.get(numbers.vertex_id)
        if vertex is None and len(job) >= MAX_VERTICES:
            return False
        if numbers.backpressured < 0 or (numbers.watermark_end
                                         and numbers.watermark is not None):
            return False  # no task waits less than nothing; the end has no time
        return 0 <= numbers.subtask < MAX_SUBTASKS and (
            vertex is None or numbers.subtask in vertex.subtasks
            or len(vertex.subtasks) < MAX_SUBTASKS)

    def _vertex(self, job_id: str, vertex_id: str) -> _Vertex:
        job = self._jobs.get(job_id)
        if job is None:
            job = self._jobs[job_id] = {}
            while len(self._jobs) > MAX_JOBS:
                self._jobs.popitem(last=False)
        vertex = job.get(vertex_id)
        if vertex is None:
            vertex = job[vertex_id] = _Vertex()
        return vertex

    def _process(self, name: str) -> ProcessSeries:
        series = self.processes.get(name)
        if series is None:
            series = self.processes[name] = ProcessSeries()
            while len(self.processes) > MAX_PROCESSES:
                self.processes.popitem(last=False)
        return series
