"""The Dispatcher's autoscaler (``autoscaler.enabled``; planned by the pure autoscaler.py):
the TaskManagers' live numbers (``metrics/+``, what the window shows) kept per running
streaming job for its current run, the cluster's free slots from its overview, and once
a second each job looked at; a decision rescales the job as reactive mode does
(reactivejobs.py: suspend, redistribute the latest checkpoint, run on under the same id),
its summary with the reason the first event of the new run's chain of causes. A base of
the ``Dispatcher``, on its main thread.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from clusterdeck.core.jobmanager.autoscaler import AutoscalerSettings, JobLoad, plan_job
from clusterdeck.core.jobmanager.reactive import reactive_refusal
from clusterdeck.core.jobmanager.reactivejobs import ReactiveJobs
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from clusterdeck.core.protocol.states import JobStatus

log = logging.getLogger(__name__)
TICK = 1.0  # seconds between two looks at the jobs' numbers


class Autoscaling(ReactiveJobs):
    """What a Dispatcher (its subclass) has for the autoscaler."""

    autoscaler: AutoscalerSettings | None  # None: autoscaler.enabled is false
    _loads: dict[str, JobLoad]
    _calm_until: dict[str, float]  # per job, monotonic: no decision before (cooldown)
    _slots_free: int

    def _start_autoscaler(self) -> None:
        if self.autoscaler is None:
            return
        self.rpc_service.subscribe(topics.METRICS_ALL, lambda topic, numbers: self.run_async(
            self._metrics_heard, numbers, topic))
        self.rpc_service.subscribe(topics.CLUSTER_STATE, lambda _t, overview: self.run_async(
            self._free_slots_heard, overview))
        self.schedule(TICK, self._autoscale)

    def _free_slots_heard(self, overview: object) -> None:
        if isinstance(overview, p.ClusterOverview):
            self._slots_free = max(0, overview.slots_free)

    def _scalable(self, job_id: str) -> JobGraph | None:
        """The job's graph when the autoscaler looks at it: a running streaming job not
        rescaling, whose state can be redistributed."""
        record = self.jobs.get(job_id)
        if record is None or record.status is not JobStatus.RUNNING \
                or record.graph.kind is not JobKind.STREAMING \
                or job_id in self._rescaling or job_id not in self.jobmasters \
                or reactive_refusal(record.graph) is not None:
            return None
        return record.graph

    def _metrics_heard(self, numbers: object, topic: str = "") -> None:
        """A TaskManager's numbers: each attempt's kept for its job's current run (a job
        that rescaled starts afresh: its graph changed). Only from the topic of the
        TaskManager they name: the broker lets a login publish on its own topic only, so
        one TaskManager cannot move another's numbers (and a job's parallelism with them)."""
        if not isinstance(numbers, p.TaskManagerMetrics):
            return
        if topic and topic != topics.metrics(numbers.taskmanager_id):
            log.warning("numbers naming TaskManager %s on %s refused",
                        numbers.taskmanager_id[:64], topic[:128])
            return
        for attempt in numbers.attempts:
            graph = self._scalable(attempt.job_id)
            if graph is None:
                continue
            load = self._loads.get(attempt.job_id)
            if load is None or load.graph is not graph:
                load = self._loads[attempt.job_id] = JobLoad(
                    graph, self.autoscaler.stabilization if self.autoscaler else 0.0)
            load.heard(numbers.time, attempt)

    def _autoscale(self) -> None:
        """Timer: each job whose cooldown is over is planned; a decision rescales it."""
        self.schedule(TICK, self._autoscale)
        settings = self.autoscaler
        assert settings is not None
        now = time.monotonic()
        for job_id, load in list(self._loads.items()):
            graph = self._scalable(job_id)
            if graph is None or load.graph is not graph:
                if job_id not in self.jobs or self.jobs[job_id].is_terminal:
                    self._forget_load(job_id)
                continue
            if now < self._calm_until.get(job_id, 0.0):
                continue
            loads = {v.id: n for v in graph.vertices
                     if (n := load.load(v, settings.window)) is not None}
            log.debug("job %s: %s", job_id, loads)
            decisions = plan_job(graph, loads, settings, self._slots_free,
                                 self.config["jobmanager.max-parallelism"])
            if not decisions:
                continue
            wanted = {d.vertex_id: d.new for d in decisions}
            rescaled = replace(graph, vertices=tuple(
                replace(v, parallelism=wanted.get(v.id, v.parallelism))
                for v in graph.vertices))
            self._calm_until[job_id] = now + settings.cooldown
            self._slots_free -= sum(d.new - d.old for d in decisions)  # till the next overview
            del self._loads[job_id]  # the new run is judged afresh
            self._rescale(job_id, rescaled, "; ".join(d.summary() for d in decisions))

    def _forget_load(self, job_id: str) -> None:
        self._loads.pop(job_id, None)
        self._calm_until.pop(job_id, None)
