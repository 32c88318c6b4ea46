"""Reactive mode (``scheduler.mode = reactive``, Flink's reactive mode and adaptive
scheduler): a streaming job takes every slot of the cluster, and when TaskManagers join
or leave it is restarted from its latest completed checkpoint at the parallelism the
slots now allow, under the same job id.

The JobManager can do it without the job's code: a JobGraph is data, its operators found
again on each TaskManager by their ids whatever the parallelism (the deployment carries
the graph), keyed state is kept by key group, and a checkpoint is redistributed as a
savepoint is (``rescale_checkpoint``). What is here is pure, on the Dispatcher's main
thread: the parallelism the slots allow (``reactive_graph``), which jobs cannot rescale
(``reactive_refusal``), and the wait for the slots to settle (``Settling``), so that
TaskManagers started together cost one rescale, not one each.

The slot model is the cluster's: a streaming job holds one slot per subtask of each
vertex (no slot sharing), so ``slots`` are shared out evenly over its vertices, each at
most the job's max parallelism (its key groups). Meant for one streaming job per
cluster, as Flink's reactive mode is: each reactive job plans with every slot.
"""

from __future__ import annotations

from dataclasses import replace

from clusterdeck.core.jobapi import plan
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from clusterdeck.core.rpc import to_data

REASONS_KEPT = 4  # the rescale event names at most so many joins and losses


def reactive_refusal(graph: JobGraph) -> str | None:
    """Why a streaming job cannot run in reactive mode, or None when it can."""
    if graph.kind is not JobKind.STREAMING:
        return None
    for vertex in graph.vertices:
        kind = vertex.operators[0].kind
        if kind == plan.SOURCE_FOLDER:
            return (f"vertex {vertex.name} reads a watched folder, whose position cannot be "
                    f"redistributed to another parallelism yet (its files belong to "
                    f"subtasks by a hash of their name): reactive mode could not rescale it")
        if kind == plan.SOURCE_MQTT:
            return (f"vertex {vertex.name} reads an MQTT topic, whose position is each "
                    f"subtask's broker session: a subtask gone at a smaller parallelism "
                    f"would take its queued messages with it, so reactive mode could not "
                    f"rescale it exactly once")
    return None


def reactive_parallelism(graph: JobGraph, slots: int, most: int) -> int:
    """Every vertex's parallelism on ``slots`` slots: an even share, at most the job's
    key groups and ``most`` (``jobmanager.max-parallelism``); 0 when there are fewer
    slots than vertices (the job cannot run at all)."""
    share = slots // len(graph.vertices)
    return min(share, graph.max_parallelism, most)


def reactive_graph(graph: JobGraph, slots: int, most: int) -> JobGraph | None:
    """``graph`` at the parallelism ``slots`` allow; None when it cannot run on them or
    already runs so (nothing to change)."""
    parallelism = reactive_parallelism(graph, slots, most)
    if parallelism < 1 or all(v.parallelism == parallelism for v in graph.vertices):
        return None
    return replace(graph, vertices=tuple(replace(v, parallelism=parallelism)
                                         for v in graph.vertices),
                   default_parallelism=parallelism)


def width(graph: JobGraph) -> int:
    """The job's parallelism, as an event names it: its widest vertex's."""
    return max(vertex.parallelism for vertex in graph.vertices)


def same_but_parallelism(a: JobGraph, b: JobGraph) -> bool:
    """Whether two graphs are the same job but for their parallelism (a reactive job's
    stored graph against its submission sent again)."""
    def shape(graph: JobGraph) -> object:
        data = to_data(graph)
        data["default_parallelism"] = 0
        for vertex in data["vertices"]:
            vertex["parallelism"] = 0
        return data
    return shape(a) == shape(b)


class Settling:
    """The wait for the cluster's slots to settle: each change (a TaskManager joined or
    left) starts the wait again; once ``wait`` seconds passed without one, the changes
    are due together, with their reasons. Pure: times come in."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self._reasons: list[str] = []
        self._last: float | None = None

    def changed(self, reason: str, now: float) -> float:
        """A change (``reason``, "" for none worth naming); when to ask ``settled``."""
        if reason and reason not in self._reasons:
            self._reasons.append(reason)
        self._last = now
        return now + self.wait

    def settled(self, now: float) -> tuple[str, ...] | None:
        """The reasons of the changes, once none came for ``wait`` seconds (and they are
        forgotten); None while the wait goes on, or when nothing changed."""
        if self._last is None or now < self._last + self.wait:
            return None
        reasons, self._reasons, self._last = tuple(self._reasons), [], None
        return reasons

    @staticmethod
    def describe(reasons: tuple[str, ...], slots: int) -> str:
        """The cause a rescale names: the joins and losses, or the slot count alone."""
        if not reasons:
            return f"the cluster has {slots} slots"
        more = len(reasons) - REASONS_KEPT
        text = ", ".join(reasons[:REASONS_KEPT])
        return f"{text} and {more} more" if more > 0 else text
