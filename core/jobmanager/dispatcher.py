"""The Dispatcher: the JobManager's front door for clients.

It accepts jobs (artifact chunks, then SubmitJob), keeps them in the job store, starts
one JobMaster endpoint per job, and answers for the job list and results. It also serves
artifacts to TaskManagers, so user code never crosses the wire as a pickle.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager.admission import check_submission
from clusterdeck.core.jobmanager.jobmaster import JobMaster, restart_strategy
from clusterdeck.core.jobmanager.jobstore import JobRecord, JobStore
from clusterdeck.core.jobmanager.results import bare
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.gateways import ResourceManagerGateway
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import FencedRpcEndpoint, FrameTooLargeError, handler

log = logging.getLogger(__name__)
ENDPOINT_ID = "dispatcher"


class UnknownJobError(LookupError):
    """No job with that id was ever submitted to this cluster."""


class Dispatcher(FencedRpcEndpoint):
    def __init__(self, config: Config, resource_manager: ResourceManagerGateway,
                 job_store: JobStore, work_root: Path, fencing_token: str | None = None) -> None:
        super().__init__(ENDPOINT_ID, fencing_token)
        self.config = config
        self.resource_manager = resource_manager
        self.store = job_store
        self.work_root = work_root
        self.jobs: dict[str, JobRecord] = {}
        self.jobmasters: dict[str, JobMaster] = {}
        self._progress: dict[str, tuple[int, int]] = {}
        self._uploads: dict[str, dict[int, bytes]] = {}
        self._artifacts: dict[str, bytes] = {}
        self.chunk_size = max(1024, config["rpc.framesize"] // 2)

    def on_start(self) -> None:
        """Main thread: load the job store so earlier jobs are listed."""
        for record in self.store.load_all():
            self.jobs[record.job_id] = record
        self._publish_job_list()
        for record in list(self.jobs.values()):
            if not record.is_terminal:
                self._recover(record)

    def _recover(self, record: JobRecord) -> None:
        """A job an earlier JobManager accepted and did not end: run it on, in a new epoch,
        reusing every subtask result it had recorded."""
        record = self.store.update(record, epoch=record.epoch + 1, status=JobStatus.RESTARTING)
        self.jobs[record.job_id] = record
        log.info("recovering job %s (%s), epoch %d", record.job_id, record.graph.name,
                 record.epoch)
        self._start_jobmaster(record)

    @handler(p.RequestClusterOverview, fenced=False)
    def request_cluster_overview(self, _request: p.RequestClusterOverview
                                 ) -> Future[p.ClusterOverview]:
        return self.resource_manager.request_cluster_overview()

    # -- submission ------------------------------------------------------------------------

    @handler(p.UploadArtifactChunk)
    def upload_artifact_chunk(self, chunk: p.UploadArtifactChunk) -> p.ArtifactChunkReceived:
        if not 0 <= chunk.index < chunk.total:
            raise ValueError(f"chunk {chunk.index} of {chunk.total} is out of range")
        self._uploads.setdefault(chunk.upload_id, {})[chunk.index] = base64.b64decode(
            chunk.data, validate=True)
        return p.ArtifactChunkReceived(chunk.upload_id, chunk.index)

    @handler(p.SubmitJob)
    def submit_job(self, request: p.SubmitJob) -> p.JobSubmitted:
        check_submission(request, self.config["jobmanager.max-parallelism"])
        artifact = self._assemble(request.upload_id, request.artifact_sha256)
        # Refused here, not found failing later: the job's own restart settings.
        restart_strategy(self.config.with_overrides(request.restart_strategy or {}))
        if request.job_id in self.jobs:
            raise ValueError(f"job {request.job_id} was already submitted")
        record = JobRecord(request.job_id, request.graph, request.artifact_sha256,
                           request.args, request.restart_strategy, request.task_timeout)
        self.store.add(record, artifact)
        self.jobs[record.job_id] = record
        self._artifacts[record.job_id] = artifact
        log.info("job %s (%s) submitted", record.job_id, record.graph.name)
        self._start_jobmaster(record)
        return p.JobSubmitted(record.job_id)

    def _assemble(self, upload_id: str, sha256: str) -> bytes:
        chunks = self._uploads.pop(upload_id, None)
        if not chunks:
            raise ValueError(f"no artifact was uploaded as {upload_id}")
        missing = [i for i in range(max(chunks) + 1) if i not in chunks]
        if missing:
            raise ValueError(f"artifact upload {upload_id} is missing chunks {missing}")
        artifact = b"".join(chunks[i] for i in sorted(chunks))
        if hashlib.sha256(artifact).hexdigest() != sha256:
            raise ValueError("the artifact's checksum does not match: upload corrupted")
        return artifact

    def _start_jobmaster(self, record: JobRecord) -> None:
        jobmaster = JobMaster(self.config, record, self.resource_manager.with_fencing_token(
            self.fencing_token), self.fencing_token, self.work_root / record.job_id,
            self.store.progress(record.job_id), on_status=self._status_callback(record.job_id),
            on_terminal=self._terminal_callback(record.job_id))
        self.jobmasters[record.job_id] = jobmaster
        self.rpc_service.start_endpoint(jobmaster)

    def _status_callback(self, job_id: str) -> Callable[[JobStatus, int, int], None]:
        """Called on the JobMaster's thread: only posts to this endpoint's mailbox."""
        return lambda status, finished, total: self.run_async(
            self._job_status_changed, job_id, status, finished, total)

    def _terminal_callback(self, job_id: str) -> Callable[[p.JobResult], None]:
        return lambda result: self.run_async(self._job_ended, job_id, result)

    def _job_status_changed(self, job_id: str, status: JobStatus, finished: int,
                            total: int) -> None:
        self._progress[job_id] = (finished, total)
        if self.jobs[job_id].status != status:
            self.jobs[job_id] = self.store.update(self.jobs[job_id], status=status)
        self._publish_job_list()

    def _job_ended(self, job_id: str, result: p.JobResult) -> None:
        self.jobs[job_id] = self.store.update(self.jobs[job_id], status=result.status,
                                              result=result)
        try:  # publish encodes first: a result too large is refused before sending
            self.rpc_service.publish(topics.job_result(job_id), result, retained=True)
        except FrameTooLargeError as error:
            log.error("job %s: its result is too large to send, keeping it bare: %s",
                      job_id, error)
            result = bare(result)
            self.jobs[job_id] = self.store.update(self.jobs[job_id], result=result)
            self.rpc_service.publish(topics.job_result(job_id), result, retained=True)
        self.rpc_service.forget_retained(topics.job_result(job_id))  # the store keeps it
        self._publish_job_list()
        jobmaster = self.jobmasters.pop(job_id, None)
        if jobmaster is not None:
            self.run_in_worker(self.rpc_service.stop_endpoint, jobmaster, name="stop-jm")
        log.info("job %s ended %s", job_id, result.status)

    # -- artifacts for TaskManagers -------------------------------------------------------------

    @handler(p.RequestArtifactChunk)
    def request_artifact_chunk(self, request: p.RequestArtifactChunk) -> p.ArtifactChunk:
        record = self._record(request.job_id)
        artifact = self._artifacts.get(request.job_id)
        if artifact is None:
            artifact = self.store.artifact_path(request.job_id).read_bytes()
            self._artifacts[request.job_id] = artifact
        total = max(1, -(-len(artifact) // self.chunk_size))
        if not 0 <= request.index < total:
            raise ValueError(f"chunk {request.index} of {total} is out of range")
        piece = artifact[request.index * self.chunk_size:(request.index + 1) * self.chunk_size]
        return p.ArtifactChunk(request.job_id, request.index, total,
                               base64.b64encode(piece).decode(), record.artifact_sha256)

    # -- jobs for clients -----------------------------------------------------------------------

    @handler(p.RequestJobList, fenced=False)
    def request_job_list(self, _request: p.RequestJobList) -> p.JobList:
        return self._job_list()

    @handler(p.CancelJob)
    def cancel_job(self, request: p.CancelJob) -> p.JobSummary:
        record = self._record(request.job_id)
        jobmaster = self.jobmasters.get(request.job_id)
        if jobmaster is not None:
            jobmaster.run_async(jobmaster.cancel)
        return record.summary()

    @handler(p.RequestJobResult, fenced=False)
    def request_job_result(self, request: p.RequestJobResult) -> p.JobResult:
        record = self._record(request.job_id)
        if record.result is not None:
            return record.result
        summary = self._summary(record)
        return p.JobResult(record.job_id, record.graph.name, record.status,
                           finished=summary.finished, total=summary.total)

    def _record(self, job_id: str) -> JobRecord:
        record = self.jobs.get(job_id)
        if record is None:
            raise UnknownJobError(f"unknown job {job_id}")
        return record

    def _summary(self, record: JobRecord) -> p.JobSummary:
        finished, total = self._progress.get(record.job_id, (0, 0))
        return record.summary(finished, total)

    def _job_list(self) -> p.JobList:
        return p.JobList(tuple(self._summary(r) for r in self.jobs.values()))

    def _publish_job_list(self) -> None:
        self.rpc_service.publish(topics.JOB_LIST, self._job_list(), retained=True)
