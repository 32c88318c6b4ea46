"""The Dispatcher's reactive mode (core/jobmanager/reactive.py plans it): the cluster's
slots followed from its overview, the TaskManagers that joined or left from its events;
once the slots settled, each streaming job not at the parallelism they allow is stopped
(its JobMaster's ``suspend``), its latest checkpoint redistributed on a worker thread
(``rescale_checkpoint``), and the job started again in a new epoch at the new parallelism,
its rescales the first events of its chain of causes. A base of the ``Dispatcher``
(dispatcher.py), whose state it uses, on its main thread.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.checkpointing.savepoints import recorded_parallelism, rescale_checkpoint
from clusterdeck.core.jobmanager.admission import SubmissionRefused
from clusterdeck.core.jobmanager.jobresult import failure_cause
from clusterdeck.core.jobmanager.reactive import (
    Settling,
    reactive_graph,
    reactive_refusal,
    width,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.protocol.workdir import checkpoints_dir, job_work_dir
from clusterdeck.core.rpc import FencedRpcEndpoint

if TYPE_CHECKING:
    from clusterdeck.core.config.settings import Config
    from clusterdeck.core.jobmanager.jobmaster import JobMaster
    from clusterdeck.core.jobmanager.jobstore import JobRecord, JobStore

log = logging.getLogger(__name__)
RESCALES_KEPT = 8  # reactive mode's latest rescales of a job, shown in each new run's causes


class ReactiveJobs(FencedRpcEndpoint):
    """What a Dispatcher (its subclass) has that reactive mode uses."""

    config: Config
    store: JobStore
    work_root: Path
    jobs: dict[str, JobRecord]
    jobmasters: dict[str, JobMaster]
    reactive: bool
    _slots_total: int | None
    _settling: Settling
    _rescaling: set[str]
    _rescales: dict[str, tuple[tuple[str, int, float], ...]]

    def _start_jobmaster(self, record: JobRecord) -> None:
        raise NotImplementedError

    def _job_ended(self, job_id: str, result: p.JobResult) -> None:
        raise NotImplementedError

    def _as_checkpointed(self, record: JobRecord) -> JobGraph:
        """A recovered streaming job's graph at the parallelism of its latest checkpoint,
        when a rescale recorded one there and the JobManager died before it stored the
        job's new parallelism (whatever ``scheduler.mode`` is now: the state is laid out
        so); its stored graph otherwise."""
        if record.graph.kind is not JobKind.STREAMING:
            return record.graph
        storage = CheckpointStorage(checkpoints_dir(job_work_dir(self.work_root,
                                                                 record.job_id)))
        graph = recorded_parallelism(storage, record.job_id, record.graph)
        if graph != record.graph:
            log.warning("job %s: its JobManager stopped while it rescaled to %d: it goes on "
                        "at that parallelism, as its latest checkpoint is laid out",
                        record.job_id, width(graph))
        return graph

    def _reactive_start(self, graph: JobGraph) -> JobGraph:
        """In reactive mode, a streaming job's graph at the parallelism the cluster's
        slots allow (as submitted while they are not known yet); SubmissionRefused for a
        job that could not rescale."""
        if not self.reactive or graph.kind is not JobKind.STREAMING:
            return graph
        refusal = reactive_refusal(graph)
        if refusal is not None:
            raise SubmissionRefused(f"scheduler.mode is reactive: {refusal}")
        return reactive_graph(graph, self._slots_total or 0,
                              self.config["jobmanager.max-parallelism"]) or graph

    def _slots_heard(self, overview: object) -> None:
        if isinstance(overview, p.ClusterOverview) and overview.slots_total != self._slots_total:
            self._slots_total = overview.slots_total
            self._settle("")

    def _cluster_event(self, event: object) -> None:
        if isinstance(event, p.TaskManagerRegistered):
            self._settle(f"{event.info.id} registered")
        elif isinstance(event, p.TaskManagerLost):
            self._settle(f"{event.resource_id} lost")

    def _settle(self, reason: str) -> None:
        due = self._settling.changed(reason, time.monotonic())
        self.schedule(max(0.0, due - time.monotonic()), self._settled)

    def _settled(self) -> None:
        """Timer: once the slots settled, every reactive job not at the parallelism they
        allow is rescaled (one that is rescaling already is looked at again after)."""
        reasons = self._settling.settled(time.monotonic())
        if reasons is None or self._slots_total is None:
            return
        cause = Settling.describe(reasons, self._slots_total)
        for record in list(self.jobs.values()):
            if record.is_terminal or record.graph.kind is not JobKind.STREAMING \
                    or record.status is JobStatus.CANCELLING \
                    or record.job_id in self._rescaling or record.job_id not in self.jobmasters \
                    or reactive_refusal(record.graph) is not None:  # from before the mode
                continue
            graph = reactive_graph(record.graph, self._slots_total,
                                   self.config["jobmanager.max-parallelism"])
            if graph is not None:
                self._rescale(record.job_id, graph, f"rescaled from {width(record.graph)} "
                              f"to {width(graph)}: {cause}")

    def _rescale(self, job_id: str, graph: JobGraph, summary: str) -> None:
        """Stop the job's tasks (its JobMaster's ``suspend``), then ``_suspended``;
        ``summary``, the decision and its reason, as the job's causes will tell it (the
        autoscaler's too, autoscaling.py)."""
        jobmaster = self.jobmasters[job_id]
        log.info("job %s %s", job_id, summary)
        self._rescaling.add(job_id)
        jobmaster.run_async(jobmaster.suspend, lambda: self.run_async(
            self._suspended, job_id, jobmaster, graph, summary))

    def _suspended(self, job_id: str, jobmaster: JobMaster, graph: JobGraph,
                   summary: str) -> None:
        """Main thread: every task of the job stopped. On a worker, its JobMaster's
        endpoint stops and its latest checkpoint is redistributed; then ``_resume``."""
        old = self.jobs[job_id].graph
        storage = CheckpointStorage(checkpoints_dir(job_work_dir(self.work_root, job_id)))

        def work() -> int:
            self.rpc_service.stop_endpoint(jobmaster)
            checkpoint = rescale_checkpoint(storage, job_id, old, graph)
            return checkpoint.checkpoint_id if checkpoint is not None else 0
        self.on_main_thread(self.run_in_worker(work, name="rescale"),
                            lambda checkpoint_id, error: self._resume(
                                job_id, graph, summary, checkpoint_id or 0, error))

    def _resume(self, job_id: str, graph: JobGraph, summary: str, checkpoint_id: int,
                error: BaseException | None) -> None:
        """The job runs on in a new epoch at its new parallelism, from the redistributed
        checkpoint; it fails with the cause when that could not be made or stored, and
        ends CANCELED when it was cancelled meanwhile."""
        self._rescaling.discard(job_id)
        self.jobmasters.pop(job_id, None)  # stopped
        record = self.jobs[job_id]
        duration = max(0.0, time.time() - record.submitted_at)
        if record.status is JobStatus.CANCELLING:
            self._job_ended(job_id, p.JobResult(job_id, record.graph.name, JobStatus.CANCELED,
                                                duration=duration))
            return
        if error is None:
            try:
                record = self.store.update(record, graph=graph, epoch=record.epoch + 1,
                                           status=JobStatus.RESTARTING)
            except OSError as failed:
                error = failed
        if error is not None:
            log.error("job %s could not be restarted (%s): %s", job_id, summary, error)
            self._job_ended(job_id, p.JobResult(
                job_id, record.graph.name, JobStatus.FAILED, duration=duration, failures=1,
                root_cause=failure_cause(type(error).__name__, f"the job could not be restarted "
                                         f"({summary}): {error}")))
            return
        self.jobs[job_id] = record
        self._start_jobmaster(record)
        rescales = (*self._rescales.get(job_id, ()), (summary, checkpoint_id, time.time()))
        self._rescales[job_id] = rescales[-RESCALES_KEPT:]
        jobmaster = self.jobmasters[job_id]
        jobmaster.run_async(jobmaster.rescaled, self._rescales[job_id])
        self._settle("")  # the slots may have changed meanwhile
