"""The Dispatcher: the JobManager's front door for clients.

It accepts jobs (artifact chunks, then SubmitJob), keeps them in the job store, starts
one JobMaster endpoint per job, and answers for the job list and results. It also serves
artifacts to TaskManagers, so user code never crosses the wire as a pickle.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from clusterdeck.core.checkpointing import Savepoints
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager.admission import (
    SubmissionRefused,
    check_restart_strategy,
    check_savepoint,
    check_slots,
    check_submission,
)
from clusterdeck.core.jobmanager.autoscaler import AutoscalerSettings
from clusterdeck.core.jobmanager.autoscaling import Autoscaling
from clusterdeck.core.jobmanager.checkpoints import SavepointFailed
from clusterdeck.core.jobmanager.jobmaster import JobMaster
from clusterdeck.core.jobmanager.jobresult import bare, failure_cause
from clusterdeck.core.jobmanager.jobstore import (
    BROKEN_RECORD,
    STORE_WRITE_FAILED,
    BrokenRecordError,
    JobRecord,
    JobStore,
)
from clusterdeck.core.jobmanager.listings import budget, fitting, listed
from clusterdeck.core.jobmanager.reactive import Settling, same_but_parallelism
from clusterdeck.core.jobmanager.resultfiles import chunk_size, read_chunk, servable
from clusterdeck.core.jobmanager.retention import JobFiles, RetentionPolicy, delete_jobs, expired
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.gateways import ResourceManagerGateway
from clusterdeck.core.protocol.ids import job_file_prefix
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.protocol.workdir import job_work_dir
from clusterdeck.core.rpc import FrameTooLargeError, handler

log = logging.getLogger(__name__)
ENDPOINT_ID = "dispatcher"


class UnknownJobError(LookupError):
    """No job with that id was ever submitted to this cluster."""


class Dispatcher(Autoscaling):
    def __init__(self, config: Config, resource_manager: ResourceManagerGateway,
                 job_store: JobStore, work_root: Path, fencing_token: str | None = None) -> None:
        super().__init__(ENDPOINT_ID, fencing_token)
        self.config = config
        self.resource_manager = resource_manager
        self.store = job_store
        self.work_root = work_root
        # where savepoints go, and the only place a job may start from one
        self.savepoints = Savepoints(Path(config["state.savepoints.dir"])
                                     if config["state.savepoints.dir"]
                                     else work_root.parent / "savepoints")
        self.jobs: dict[str, JobRecord] = {}
        self.jobmasters: dict[str, JobMaster] = {}
        self._progress: dict[str, tuple[int, int]] = {}
        self._uploads: dict[str, dict[int, bytes]] = {}
        self._upload_bytes: dict[str, int] = {}  # artifact bytes received per upload so far
        self._artifacts: dict[str, bytes] = {}  # of running jobs only: dropped when one ends
        self.retention = RetentionPolicy.from_config(config)
        self.chunk_size = chunk_size(config["rpc.framesize"])
        # Result files are read off disk for clients two at a time: a burst of asks waits
        # in this queue instead of starting a thread each.
        self._file_reads = ThreadPoolExecutor(2, thread_name_prefix="job-file")
        # reactive mode (reactive.py): the cluster's slots as last heard, the wait for
        # them to settle, and the jobs being stopped and restarted at a new parallelism
        self.reactive = config["scheduler.mode"] == "reactive"
        self._slots_total: int | None = None
        self._settling = Settling(config["scheduler.reactive.stabilization"])
        self._rescaling: set[str] = set()
        self._rescales: dict[str, tuple[tuple[str, int, float], ...]] = {}  # the latest
        # the autoscaler (autoscaling.py): its jobs' numbers, cooldowns, the free slots
        self.autoscaler = (AutoscalerSettings.from_config(config)
                           if config["autoscaler.enabled"] else None)
        self._loads = {}
        self._calm_until = {}
        self._slots_free = 0

    def on_stop(self) -> None:
        self._file_reads.shutdown(wait=False, cancel_futures=True)

    def on_start(self) -> None:
        """Main thread: load the job store so earlier jobs are listed, and run on every job
        that had not ended. Folders that are no job were logged and set aside by the store;
        a job that cannot be run on is failed with its cause, and the others still run."""
        stored = self.store.load_all()
        for record in stored.records:
            self.jobs[record.job_id] = record
        self._publish_job_list()
        for record in stored.records:
            if record.is_terminal:
                continue
            if record.status is JobStatus.CANCELLING:
                self._cancelled_while_down(record)
                continue
            try:
                self._recover(record)
            except Exception as error:  # one broken job must not keep the later ones from running
                self._recovery_failed(record, error)
        self._start_retention()
        if self.reactive:
            self.rpc_service.subscribe(topics.CLUSTER_STATE, lambda _t, overview: self.run_async(
                self._slots_heard, overview))
            self.rpc_service.subscribe(topics.CLUSTER_EVENTS, lambda _t, event: self.run_async(
                self._cluster_event, event))
        self._start_autoscaler()

    def _recover(self, record: JobRecord) -> None:
        """A job an earlier JobManager accepted and did not end: run it on, in a new epoch,
        reusing every subtask result it had recorded. Its artifact and graph are checked
        first: a record an older version stored unchecked, or a damaged one, fails here."""
        self.store.check_artifact(record)
        check_submission(record.submission(), self.config["jobmanager.max-parallelism"])
        record = self.store.update(record, graph=self._as_checkpointed(record),
                                   epoch=record.epoch + 1, status=JobStatus.RESTARTING)
        self.jobs[record.job_id] = record
        log.info("recovering job %s (%s), epoch %d", record.job_id, record.graph.name,
                 record.epoch)
        self._start_jobmaster(record)

    def _cancelled_while_down(self, record: JobRecord) -> None:
        """A cancel was asked for and the JobManager stopped before the job ended: the user
        wanted it gone, so it ends CANCELED instead of running on (Flink recovers such a
        job and runs it again, which surprises whoever cancelled it)."""
        log.info("job %s was being cancelled when the JobManager stopped: ending it "
                 "CANCELED", record.job_id)
        self._job_ended(record.job_id, p.JobResult(
            record.job_id, record.graph.name, JobStatus.CANCELED,
            duration=max(0.0, time.time() - record.submitted_at)))

    def _recovery_failed(self, record: JobRecord, error: Exception) -> None:
        """The job ends FAILED with why it could not be run on; it stays listed, and as it
        is stored as ended it is not tried again on the next start."""
        broken = isinstance(error, BrokenRecordError | SubmissionRefused)
        log.error("job %s cannot be recovered: %s", record.job_id, error,
                  exc_info=None if broken else error)
        self.jobmasters.pop(record.job_id, None)  # never started, or failed starting
        cause = (failure_cause(BROKEN_RECORD, f"the stored record is broken: {error}")
                 if broken else failure_cause(type(error).__name__,
                                              f"the job could not be recovered: {error}"))
        # It ends now: timed from its submission, so retention keeps it listed as long as
        # any job that ended now, however long ago the broken record was written.
        self._job_ended(record.job_id, p.JobResult(
            record.job_id, record.graph.name, JobStatus.FAILED,
            duration=max(0.0, time.time() - record.submitted_at), root_cause=cause,
            failures=1))

    @handler(p.RequestClusterOverview, fenced=False, senders=topics.CLIENTS)
    def request_cluster_overview(self, _request: p.RequestClusterOverview
                                 ) -> Future[p.ClusterOverview]:
        return self.resource_manager.request_cluster_overview()

    # -- submission ------------------------------------------------------------------------

    @handler(p.UploadArtifactChunk, senders=topics.CLIENTS)
    def upload_artifact_chunk(self, chunk: p.UploadArtifactChunk) -> p.ArtifactChunkReceived:
        """Uploads are held in memory until SubmitJob names them, so each is bounded: in
        bytes (``jobmanager.max-artifact-size``), in time (``jobmanager.upload-timeout``
        from its first chunk) and in number (``jobmanager.max-uploads`` at once)."""
        if not 0 <= chunk.index < chunk.total:
            raise ValueError(f"chunk {chunk.index} of {chunk.total} is out of range")
        piece = base64.b64decode(chunk.data, validate=True)
        chunks = self._uploads.get(chunk.upload_id)
        if chunks is None:
            if len(self._uploads) >= self.config["jobmanager.max-uploads"]:
                raise ValueError(
                    f"{len(self._uploads)} artifact uploads are in progress, the most "
                    f"jobmanager.max-uploads allows; try again when one is submitted or "
                    f"after jobmanager.upload-timeout "
                    f"({self.config['jobmanager.upload-timeout']:g} s)")
            chunks = self._uploads[chunk.upload_id] = {}
            self.schedule(self.config["jobmanager.upload-timeout"], self._expire_upload,
                          chunk.upload_id, chunks)
        replaced = len(chunks.get(chunk.index, b""))
        size = self._upload_bytes.get(chunk.upload_id, 0) - replaced + len(piece)
        limit = self.config["jobmanager.max-artifact-size"]
        if size > limit:
            self._drop_upload(chunk.upload_id)
            raise ValueError(f"the artifact is larger than jobmanager.max-artifact-size = "
                             f"{limit} bytes (upload {chunk.upload_id} has {size} bytes at "
                             f"chunk {chunk.index} of {chunk.total}); the upload is dropped")
        chunks[chunk.index] = piece
        self._upload_bytes[chunk.upload_id] = size
        return p.ArtifactChunkReceived(chunk.upload_id, chunk.index)

    @handler(p.SubmitJob, senders=topics.CLIENTS)
    def submit_job(self, request: p.SubmitJob) -> p.JobSubmitted:
        """Idempotent: the client chose the job id, so the same submission sent again (its
        answer was lost, or the JobManager restarted in between) is answered as the first
        was, and the job runs once. Another job under a known id is refused."""
        check_submission(request, self.config["jobmanager.max-parallelism"])
        existing = self.jobs.get(request.job_id)
        if existing is not None:
            self._drop_upload(request.upload_id)  # the stored job has its artifact
            if not existing.matches(request) and not (
                    self.reactive and existing.matches(replace(request, graph=existing.graph))
                    and same_but_parallelism(existing.graph, request.graph)):
                raise ValueError(f"job {request.job_id} was already submitted, with another "
                                 f"graph, artifact or options")
            log.info("job %s submitted again: it is the stored one", request.job_id)
            return p.JobSubmitted(existing.job_id)
        artifact = self._assemble(request.upload_id, request.artifact_sha256)
        check_restart_strategy(self.config, request.restart_strategy)
        check_slots(request.graph, self.config)
        check_savepoint(request.graph, self.savepoints)
        record = JobRecord(request.job_id, self._reactive_start(request.graph),
                           request.artifact_sha256,
                           request.args, request.restart_strategy, request.task_timeout)
        self.store.add(record, artifact)  # on OSError nothing is kept and the client hears it
        self.jobs[record.job_id] = record
        self._artifacts[record.job_id] = artifact
        log.info("job %s (%s) submitted", record.job_id, record.graph.name)
        self._start_jobmaster(record)
        return p.JobSubmitted(record.job_id)

    def _assemble(self, upload_id: str, sha256: str) -> bytes:
        chunks = self._uploads.pop(upload_id, None)
        self._upload_bytes.pop(upload_id, None)
        if not chunks:
            raise ValueError(f"no artifact was uploaded as {upload_id}")
        try:
            missing = [i for i in range(max(chunks) + 1) if i not in chunks]
            if missing:
                raise ValueError(f"artifact upload {upload_id} is missing chunks {missing}")
            artifact = b"".join(chunks[i] for i in sorted(chunks))
        finally:  # the expiry timer holds this dict for its whole timeout: not the bytes
            chunks.clear()
        if hashlib.sha256(artifact).hexdigest() != sha256:
            raise ValueError("the artifact's checksum does not match: upload corrupted")
        return artifact

    def _start_jobmaster(self, record: JobRecord) -> None:
        jobmaster = JobMaster(self.config, record, self.resource_manager.with_fencing_token(
            self.fencing_token), self.fencing_token, job_work_dir(self.work_root, record.job_id),
            self.store.progress(record.job_id), on_status=self._status_callback(record.job_id),
            on_terminal=self._terminal_callback(record.job_id),
            savepoint_root=self.savepoints.root)
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
        if self._progress.get(job_id) == (finished, total) and \
                self.jobs[job_id].status == status:
            # A script's Spark work reports its counts twice a second; the job list is
            # published whole, retained, and recorded, so only a change goes out.
            return
        self._progress[job_id] = (finished, total)
        if self.jobs[job_id].status != status:
            try:
                self.jobs[job_id] = self.store.update(self.jobs[job_id], status=status)
            except OSError as error:
                # A running status on disk only tells recovery the job had not ended, and
                # it still says so; the end is what must be stored (see _record_end).
                log.warning("job %s: the job store cannot record status %s: %s", job_id,
                            status, error)
                self.jobs[job_id] = replace(self.jobs[job_id], status=status)
        self._publish_job_list()

    def _job_ended(self, job_id: str, result: p.JobResult) -> None:
        result = self._record_end(job_id, result)
        try:  # publish encodes first: a result too large is refused before sending
            self.rpc_service.publish(topics.job_result(job_id), result, retained=True)
        except FrameTooLargeError as error:
            log.error("job %s: its result is too large to send, keeping it bare: %s",
                      job_id, error)
            result = self._record_end(job_id, bare(result))
            self.rpc_service.publish(topics.job_result(job_id), result, retained=True)
        self.rpc_service.forget_retained(topics.job_result(job_id))  # the store keeps it
        self._publish_job_list()
        jobmaster = self.jobmasters.pop(job_id, None)
        if jobmaster is not None:
            self.run_in_worker(self.rpc_service.stop_endpoint, jobmaster, name="stop-jm")
        log.info("job %s ended %s", job_id, result.status)
        self._after_job_ended(job_id)

    def _record_end(self, job_id: str, result: p.JobResult) -> p.JobResult:
        """Store the job's end; the result to publish. When the store cannot be written
        (a full disk) the job fails with that cause, so the client hears it instead of
        waiting for ever, and the result is kept in memory for later asks. The store
        still holds the job as unfinished: a restarted JobManager runs it on."""
        try:
            self.jobs[job_id] = self.store.update(self.jobs[job_id], status=result.status,
                                                  result=result)
            return result
        except OSError as error:
            log.error("job %s ended %s, but the job store cannot record it; failing it: %s",
                      job_id, result.status, error)
            if (result.root_cause or {}).get("exception_type") != STORE_WRITE_FAILED:
                result = replace(result, status=JobStatus.FAILED, root_cause=failure_cause(
                    STORE_WRITE_FAILED, f"the job ended {result.status}, but the job store "
                    f"could not record it ({error}); a restarted JobManager would run it "
                    f"on"), failures=result.failures + 1)
            self.jobs[job_id] = replace(self.jobs[job_id], status=result.status,
                                        result=result)
            return result

    # -- artifacts for TaskManagers -------------------------------------------------------------

    @handler(p.RequestArtifactChunk, senders=(topics.TASKMANAGERS,))
    def request_artifact_chunk(self, request: p.RequestArtifactChunk) -> p.ArtifactChunk:
        record = self._record(request.job_id)
        artifact = self._artifacts.get(request.job_id)
        if artifact is None:
            artifact = self.store.artifact_path(request.job_id).read_bytes()
            if not record.is_terminal:  # an ended job's is read once more at most
                self._artifacts[request.job_id] = artifact
        total = max(1, -(-len(artifact) // self.chunk_size))
        if not 0 <= request.index < total:
            raise ValueError(f"chunk {request.index} of {total} is out of range")
        piece = artifact[request.index * self.chunk_size:(request.index + 1) * self.chunk_size]
        return p.ArtifactChunk(request.job_id, request.index, total,
                               base64.b64encode(piece).decode(), record.artifact_sha256)

    # -- jobs for clients -----------------------------------------------------------------------

    @handler(p.RequestJobList, fenced=False, senders=topics.CLIENTS)
    def request_job_list(self, request: p.RequestJobList) -> p.JobList:
        """One page, newest first, as long as ``limit`` asks (0: no limit) and one
        message holds; only the page's summaries are built."""
        if request.offset < 0 or request.limit < 0:
            raise ValueError(f"offset {request.offset} and limit {request.limit} must not "
                             f"be negative")
        # self.jobs is in submission order
        newest_first = itertools.islice(reversed(self.jobs.values()), request.offset, None)
        page = fitting((listed(self._summary(r)) for r in newest_first),
                       budget(self.config["rpc.framesize"]), request.limit or len(self.jobs))
        return p.JobList(tuple(page), len(self.jobs), request.offset)

    @handler(p.CancelJob, senders=topics.CLIENTS)
    def cancel_job(self, request: p.CancelJob) -> p.JobSummary:
        """The cancel is stored before it is carried out: a JobManager that stops before the
        job ended then ends it CANCELED on its next start instead of running it on."""
        self._record(request.job_id)  # an unknown job is refused
        jobmaster = self.jobmasters.get(request.job_id)
        if jobmaster is not None:
            self._job_status_changed(request.job_id, JobStatus.CANCELLING,
                                     *self._progress.get(request.job_id, (0, 0)))
            jobmaster.run_async(jobmaster.cancel)
        return self.jobs[request.job_id].summary()

    @handler(p.TriggerSavepoint, senders=topics.CLIENTS)
    def trigger_savepoint(self, request: p.TriggerSavepoint) -> Future[p.SavepointCompleted]:
        """Answered by the job's JobMaster once the savepoint is written or failed (within
        the job's checkpoint timeout), or when the job ends first."""
        record = self._record(request.job_id)
        jobmaster = self.jobmasters.get(request.job_id)
        if jobmaster is None or record.is_terminal:
            raise SavepointFailed(f"job {request.job_id} is {record.status}: savepoints are "
                                  f"of running streaming jobs")
        answer: Future[p.SavepointCompleted] = Future()
        jobmaster.run_async(jobmaster.savepoint, request, answer)
        return answer

    @handler(p.RequestJobResult, fenced=False, senders=topics.CLIENTS)
    def request_job_result(self, request: p.RequestJobResult) -> p.JobResult:
        record = self._record(request.job_id)
        if record.result is not None:
            return record.result
        summary = self._summary(record)
        return p.JobResult(record.job_id, record.graph.name, record.status,
                           finished=summary.finished, total=summary.total)

    @handler(p.RequestJobFile, fenced=False, senders=topics.CLIENTS)
    def request_job_file(self, request: p.RequestJobFile) -> Future[p.JobFileChunk]:
        """A chunk of one of the job's result files, for a client on another machine
        (core/jobmanager/resultfiles.py); read on a worker."""
        self._record(request.job_id)
        real = servable(job_work_dir(self.work_root, request.job_id), request.path)
        return self._file_reads.submit(read_chunk, request.job_id, request.path, real,
                                       request.offset, self.chunk_size)

    def _record(self, job_id: str) -> JobRecord:
        record = self.jobs.get(job_id)
        if record is None:
            raise UnknownJobError(f"unknown job {job_id}")
        return record

    def _summary(self, record: JobRecord) -> p.JobSummary:
        finished, total = self._progress.get(record.job_id, (0, 0))
        return record.summary(finished, total)

    def _job_list(self, most: int | None = None) -> p.JobList:
        """The retained window: every running job, then the newest ended ones, at most
        ``jobmanager.job-list.retained`` (or ``most``) and as many as fit one message;
        newest first, ``total`` counting every job of the store."""
        most = self.config["jobmanager.job-list.retained"] if most is None else most
        newest_first = list(reversed(self.jobs.values()))
        running = [r for r in newest_first if not r.is_terminal]
        ended = (r for r in newest_first if r.is_terminal)
        window = fitting((listed(self._summary(r)) for r in (*running, *ended)),
                         budget(self.config["rpc.framesize"]), most)
        window.sort(key=lambda s: s.submitted_at, reverse=True)
        return p.JobList(tuple(window), len(self.jobs), 0)

    def _publish_job_list(self) -> None:
        most = self.config["jobmanager.job-list.retained"]
        while True:
            try:  # publish encodes first; the window is fitted already, this is the backstop
                self.rpc_service.publish(topics.JOB_LIST, self._job_list(most), retained=True)
                return
            except FrameTooLargeError:
                if most == 0:
                    raise
                most //= 2

    # -- bounds: uploads, cached artifacts, retention --------------------------------------

    def _expire_upload(self, upload_id: str, chunks: dict[int, bytes]) -> None:
        """Timer: an upload still unsubmitted ``jobmanager.upload-timeout`` after its first
        chunk is dropped (``chunks`` tells it from a later upload under the same id)."""
        if self._uploads.get(upload_id) is chunks:
            log.warning("artifact upload %s not submitted within %g s: dropped", upload_id,
                        self.config["jobmanager.upload-timeout"])
            self._drop_upload(upload_id)
        elif upload_id not in self._uploads:
            self._upload_bytes.pop(upload_id, None)  # submitted: its count outlived it

    def _drop_upload(self, upload_id: str) -> None:
        self._uploads.pop(upload_id, None)
        self._upload_bytes.pop(upload_id, None)

    def _after_job_ended(self, job_id: str) -> None:
        """Main thread, once a job ended: its artifact leaves the cache (a TaskManager
        that still needs it reads it from the store), and retention may delete old jobs."""
        self._artifacts.pop(job_id, None)
        self._rescales.pop(job_id, None)
        self._forget_load(job_id)
        self._apply_retention()

    def _start_retention(self) -> None:
        """Main thread, at start: trim what earlier runs left, then check again now and
        then, since an ended job grows older without any event."""
        self._apply_retention()
        self.schedule(min(600.0, max(1.0, self.retention.max_age / 4)), self._start_retention)

    def _apply_retention(self) -> None:
        """Drop the jobs retention chooses from the job list now; delete their files on a
        worker thread (thousands of folders must not stall the main thread)."""
        doomed = expired(self.jobs.values(), time.time(), self.retention)
        if not doomed:
            return
        underscored = [j for j in self.jobs if "_" in j]  # only these can be a longer id
        batch = [JobFiles(job_id, self.store.folder(job_id),
                          job_work_dir(self.work_root, job_id),
                          tuple(j for j in underscored if j.startswith(job_file_prefix(job_id))))
                 for job_id in doomed]
        for job_id in doomed:
            del self.jobs[job_id]
            self._progress.pop(job_id, None)
            self._artifacts.pop(job_id, None)
            self.rpc_service.clear_retained(topics.job_state(job_id))  # observers' copy
            self.rpc_service.clear_retained(topics.job_result(job_id))
        self._publish_job_list()
        attempt_logs = paths.cluster_log_dir(self.config["cluster.id"]) / "attempts"
        self.run_in_worker(delete_jobs, batch, attempt_logs, name="retention")

