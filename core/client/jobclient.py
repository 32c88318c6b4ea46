"""The client side of a cluster: find its leader and ask its Dispatcher.

Used by the CLI and, through the bridge, by the desktop app.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.core.client.outputfeed import OutputFeed
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobapi.artifact import pack_artifact
from clusterdeck.core.jobapi.loader import load_job
from clusterdeck.core.node.service import broker_address, connect_service
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.checkpoints import SavepointRestore
from clusterdeck.core.protocol.fencing import EpochFence
from clusterdeck.core.protocol.gateways import DispatcherGateway
from clusterdeck.core.protocol.ids import new_job_id
from clusterdeck.core.rpc import (
    AskTimeoutError,
    EndpointStoppedError,
    FencingTokenMismatchError,
    RemoteError,
    RpcError,
)
from clusterdeck.core.rpc.mqtt import MqttRpcService, TrafficCallback

SUBMIT_TRIES = 3  # upload and SubmitJob, each try waiting rpc.ask-timeout per ask
SUBMIT_RETRY_DELAY = 1.0  # seconds before the second try, twice that before the third
SAVEPOINT_TIMEOUT = 660.0  # the default checkpoint timeout (600 s), and some
# A JobManager that restarted (new fencing token) or was stopping while the job went in:
# the next try goes to the leader as it is then.
LEADER_CHANGED = frozenset({FencingTokenMismatchError.__name__, EndpointStoppedError.__name__})


Retained = TypeVar("Retained")


class ClusterUnreachableError(RpcError):
    """No JobManager answered: the cluster is down, or still starting."""


class WatchOnlyError(RpcError):
    """An observer login was asked to ask the JobManager, which the broker would not let
    through (broker/acl.py): said at once instead of after an ask's timeout."""


class SubmitUnconfirmedError(ClusterUnreachableError):
    """Every try to submit a job went unanswered. The job may still have been stored (a
    lost answer): ``job_id`` says which job to look for."""

    def __init__(self, message: str, job_id: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class ClusterClient:
    """``role``: whose login to connect with (broker/acl.py says what each may do). The
    ``client`` login submits, asks the Dispatcher and reads state and events; watching the
    whole control plane (``tap``) takes the read-only ``observer`` login, on a connection
    of its own."""

    def __init__(self, config: Config, broker_url: str | BrokerAddress | None = None,
                 connect_timeout: float = 10.0, *, role: str = "client") -> None:
        self.config = config
        self.role = role
        # Every client of a login is one identity on the wire (core/rpc/_topics.py); its
        # own name is unguessable, as the broker binds its reply topic to it.
        identity = "observer" if role == "observer" else "client"
        self.service: MqttRpcService = connect_service(
            config, role, f"{identity}-{uuid.uuid4().hex}",
            broker_address(config, role, broker_url), connect_timeout=connect_timeout,
            with_presence=False, identity=identity)
        self._leader: p.LeaderInfo | None = None
        self._fence = EpochFence("client")
        self._leader_known = threading.Event()
        self._broker_url = broker_url
        self._observer: MqttRpcService | None = None
        self.observer_error = ""  # why the observer login is not connected, if it was tried
        self.service.subscribe(topics.LEADER, self._on_leader)

    def open_observer(self, connect_timeout: float = 10.0) -> None:
        """Connect the read-only observer login, which ``tap`` watches through: it reads
        all and writes nothing. Blocking; raises BrokerUnreachableError (or NoBrokerError)
        when that login is refused or unknown here."""
        if self._observer is None:
            self._observer = connect_service(
                self.config, "observer", f"observer-{uuid.uuid4().hex}",
                broker_address(self.config, "observer", self._broker_url),
                connect_timeout=connect_timeout, with_presence=False, identity="observer")

    @property
    def observing(self) -> bool:
        """Whether the observer login is connected, so that ``tap`` will not block."""
        return self._observer is not None

    def tap(self, callback: TrafficCallback) -> None:
        """Watch every rpc, reply and heartbeat message of the cluster (the GUI's messages
        view); the callback runs on paho's network thread. Opens the observer login first
        (blocking) unless ``open_observer`` did."""
        self.open_observer()
        assert self._observer is not None
        self._observer.tap(callback)

    def _on_leader(self, _topic: str, message: Any) -> None:
        """Paho's thread: the newest leader; a stale one's record (a lower epoch than one
        seen, docs/ha.md) is refused, so asks never go to a deposed JobManager."""
        if isinstance(message, p.LeaderInfo) and not self._fence.admit(
                message.fencing_token,
                f"the leader record of JobManager pid {message.pid} on {message.host}"):
            self._leader = message
            self._leader_known.set()

    def leader(self, timeout: float) -> p.LeaderInfo:
        if not self._leader_known.wait(timeout) or self._leader is None:
            raise ClusterUnreachableError(
                f"no JobManager of cluster {self.config['cluster.id']!r} is known on the "
                f"broker after {timeout:g} s: is the cluster running (clusterdeck up)?")
        return self._leader

    def dispatcher(self, timeout: float = 5.0) -> DispatcherGateway:
        if self.role == "observer":
            raise WatchOnlyError("the observer login may only watch: submitting, cancelling "
                                 "and reading results need a client login (clusterdeck "
                                 "credentials export --role client)")
        leader = self.leader(timeout)
        return self.service.gateway(DispatcherGateway, leader.dispatcher, leader.fencing_token)

    def cluster_overview(self, timeout: float = 5.0) -> p.ClusterOverview:
        if self.role == "observer":
            return self.retained(topics.CLUSTER_STATE, p.ClusterOverview, timeout)
        try:
            return self.dispatcher(timeout).request_cluster_overview(timeout).result()
        except AskTimeoutError:
            raise ClusterUnreachableError(
                f"the JobManager of cluster {self.config['cluster.id']!r} did not answer "
                f"within {timeout:g} s") from None

    def retained(self, topic: str, kind: type[Retained], timeout: float = 5.0) -> Retained:
        """The message of ``kind`` retained on ``topic``: how an observer login, which may
        read everything but ask nothing (broker/acl.py), learns the cluster's state. The
        callback runs on paho's thread; this one waits for it."""
        found: list[Retained] = []
        arrived = threading.Event()

        def on_message(_topic: str, message: Any) -> None:
            if isinstance(message, kind):
                found[:] = [message]
                arrived.set()
        self.service.subscribe(topic, on_message)
        try:
            if not arrived.wait(timeout):
                raise ClusterUnreachableError(
                    f"no {kind.__name__} of cluster {self.config['cluster.id']!r} is "
                    f"retained on the broker after {timeout:g} s: is the cluster running?")
        finally:
            self.service.unsubscribe(topic, on_message)
        return found[0]

    def close(self) -> None:
        if self._observer is not None:
            self._observer.close()
        self.service.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JobClient(ClusterClient):
    """Submits jobs and follows them: what ``clusterdeck submit`` and the GUI use."""

    def submit(self, job_file: Path | str, args: Sequence[str] = (), *,
               parallelism: int | None = None, restart_strategy: dict[str, Any] | None = None,
               task_timeout: float = 0.0, cwd: str | None = None,
               spark_conf: Mapping[str, str] | None = None, job_id: str | None = None,
               savepoint: SavepointRestore | None = None) -> str:
        """Load the job here (a broken file raises JobLoadError before anything is sent),
        upload its artifact in chunks, submit it; returns the job id.

        A PySpark script goes with ``cwd`` (default: this process's working directory),
        against which its relative paths resolve where the TaskManager sees that folder,
        and ``spark_conf``, settings for its session (``submit --conf``). A streaming job
        with ``savepoint`` starts from that savepoint (``submit --from-savepoint``).

        The job id is chosen here, so a try that timed out is sent again, under the same
        id, up to SUBMIT_TRIES times: the Dispatcher answers a repeated submission with the
        job it stored, so the job runs once however many answers were lost. Every try
        unanswered raises SubmitUnconfirmedError naming the job id."""
        job = load_job(job_file, args, parallelism=parallelism,
                       cwd=os.getcwd() if cwd is None else cwd, spark_conf=spark_conf)
        graph = job.graph if savepoint is None else replace(job.graph, savepoint=savepoint)
        artifact = pack_artifact(job_file)
        pieces = list(artifact.chunks(max(1024, self.config["rpc.framesize"] // 2)))
        job_id = job_id or new_job_id()
        attempt = 0
        while True:
            attempt += 1
            try:
                dispatcher = self.dispatcher()
                upload_id = uuid.uuid4().hex  # a fresh upload: the last one may be half there
                for index, piece in enumerate(pieces):
                    dispatcher.upload_artifact_chunk(p.UploadArtifactChunk(
                        upload_id, index, len(pieces), base64.b64encode(piece).decode(),
                        artifact.sha256)).result()
                dispatcher.submit_job(p.SubmitJob(
                    job_id, graph, upload_id, artifact.sha256, tuple(args),
                    restart_strategy, task_timeout)).result()
                return job_id
            except (AskTimeoutError, RemoteError) as error:
                if isinstance(error, RemoteError) and error.type_name not in LEADER_CHANGED:
                    raise  # the JobManager refused the job: trying again changes nothing
                if attempt == SUBMIT_TRIES:
                    raise SubmitUnconfirmedError(
                        f"the JobManager of cluster {self.config['cluster.id']!r} did not "
                        f"confirm job {job_id} after {SUBMIT_TRIES} tries ({error}); it may "
                        f"still have been accepted: clusterdeck result {job_id}",
                        job_id) from None
                time.sleep(SUBMIT_RETRY_DELAY * attempt)

    def wait(self, job_id: str, on_progress: Callable[[p.JobSnapshot], None] | None = None,
             poll: float = 5.0) -> p.JobResult:
        """Block until the job ends; progress arrives as the job's retained snapshots.

        Keeps waiting while the JobManager is away for less than
        ``client.unreachable-timeout`` (a restarted one recovers its jobs); past that it
        raises ClusterUnreachableError instead of waiting for ever on a cluster that is
        gone."""
        ended: list[p.JobResult] = []
        done = threading.Event()

        def on_result(_topic: str, result: Any) -> None:
            if isinstance(result, p.JobResult) and result.is_terminal:
                ended.append(result)
                done.set()

        def on_snapshot(_topic: str, snapshot: Any) -> None:
            if isinstance(snapshot, p.JobSnapshot) and on_progress is not None:
                on_progress(snapshot)

        # A long-lived client (the desktop app, a benchmark) waits for thousands of jobs:
        # each wait lets go of its subscriptions when it ends.
        self.service.subscribe(topics.job_result(job_id), on_result)
        if on_progress is not None:
            self.service.subscribe(topics.job_state(job_id), on_snapshot)
        try:
            return self._wait_for(job_id, done, ended, poll)
        finally:
            self.service.unsubscribe(topics.job_result(job_id), on_result)
            if on_progress is not None:
                self.service.unsubscribe(topics.job_state(job_id), on_snapshot)

    def _wait_for(self, job_id: str, done: threading.Event, ended: list[p.JobResult],
                  poll: float) -> p.JobResult:
        patience = self.config["client.unreachable-timeout"]
        answered = time.monotonic()
        while not done.wait(poll):
            try:
                result = self.dispatcher(poll).request_job_result(job_id, poll).result()
            except RpcError:
                if time.monotonic() - answered > patience:
                    raise ClusterUnreachableError(
                        f"the JobManager of cluster {self.config['cluster.id']!r} has not "
                        f"answered for {patience:g} s (client.unreachable-timeout); job "
                        f"{job_id} may go on when the cluster is back: clusterdeck result "
                        f"{job_id}") from None
                continue
            answered = time.monotonic()
            if result.is_terminal:
                return result
        return ended[0]

    def jobs(self, offset: int = 0, limit: int = 0) -> p.JobList:
        """One page of the job list, newest first, from ``offset`` on: at most ``limit``
        jobs (0: as many as one message holds); its ``total`` counts every job."""
        return self.dispatcher().request_job_list(offset, limit).result()

    def all_jobs(self, limit: int = 0) -> p.JobList:
        """Every job, or the newest ``limit``, newest first, asked for page by page. A job
        submitted meanwhile moves the later pages on by one: each job is listed once.
        An observer reads the list the Dispatcher keeps retained: the newest jobs only."""
        if self.role == "observer":
            retained = self.retained(topics.JOB_LIST, p.JobList)
            return p.JobList(retained.jobs[:limit or None], retained.total, 0)
        found: dict[str, p.JobSummary] = {}
        offset = total = 0
        while not limit or len(found) < limit:
            page = self.jobs(offset, limit - len(found) if limit else 0)
            total = page.total
            for summary in page.jobs:
                found.setdefault(summary.job_id, summary)
            offset += len(page.jobs)
            if not page.jobs or offset >= page.total:
                break
        return p.JobList(tuple(found.values())[:limit or None], total, 0)

    def cancel(self, job_id: str) -> p.JobSummary:
        return self.dispatcher().cancel_job(job_id).result()

    def savepoint(self, job_id: str, stop: bool = False, savepoint: bool = True,
                  timeout: float = SAVEPOINT_TIMEOUT) -> p.SavepointCompleted:
        """Take a savepoint of a running streaming job (``stop``: and stop it there);
        RemoteError says why not, AskTimeoutError after ``timeout`` seconds."""
        return self.dispatcher().trigger_savepoint(
            p.TriggerSavepoint(job_id, stop, savepoint), timeout).result()

    def result(self, job_id: str) -> p.JobResult:
        return self.dispatcher().request_job_result(job_id).result()

    def job_file(self, job_id: str, path: str, offset: int = 0) -> Iterator[bytes]:
        """One of the job's result files (collected rows, printed output, its files
        manifest) from ``offset`` on, in chunks: from this machine's disk when it is here
        (the JobManager's machine, or a shared mount), else from the JobManager, a
        message at a time."""
        if os.path.isfile(path) and os.access(path, os.R_OK):
            yield from local_chunks(path, offset)
        else:
            yield from self.job_file_from_jobmanager(job_id, path, offset)

    def job_file_from_jobmanager(self, job_id: str, path: str,
                                 offset: int = 0) -> Iterator[bytes]:
        """``job_file`` as a client on another machine reads it: through the Dispatcher,
        one chunk of at most half ``rpc.framesize`` bytes per ask."""
        while True:
            chunk = self.dispatcher().request_job_file(
                p.RequestJobFile(job_id, path, offset)).result()
            data = base64.b64decode(chunk.data, validate=True)
            yield data
            offset += len(data)
            if not data or offset >= chunk.total:
                return

    def reader(self, job_id: str) -> FileReader:
        """``job_file`` of one job, for ``collected_rows`` and ``result_files``."""
        return lambda path, offset: self.job_file(job_id, path, offset)

    @contextmanager
    def following_output(self, job_id: str, write: Callable[[str, str], None]
                         ) -> Iterator[OutputFeed]:
        """While inside, what the job's scripts print is written through ``write(stream,
        text)`` as it arrives (core/client/outputfeed.py); subscribe before submitting
        (``submit(job_id=...)``) to miss nothing."""
        feed = OutputFeed(write)
        self.service.subscribe(topics.job_output(job_id), feed.receive)
        try:
            yield feed
        finally:
            feed.close()
            self.service.unsubscribe(topics.job_output(job_id), feed.receive)

    def snapshot(self, job_id: str, timeout: float = 5.0) -> p.JobSnapshot | None:
        """The job's retained snapshot, as a late observer sees it."""
        found: list[p.JobSnapshot] = []
        arrived = threading.Event()

        def on_snapshot(_topic: str, snapshot: Any) -> None:
            if isinstance(snapshot, p.JobSnapshot):
                found[:] = [snapshot]
                arrived.set()
        self.service.subscribe(topics.job_state(job_id), on_snapshot)
        arrived.wait(timeout)
        return found[0] if found else None

    def live_metrics(self, seconds: float, most: int = 1000) -> list[p.TaskManagerMetrics]:
        """The TaskManagers' live numbers heard over ``seconds`` (they send once a
        second), at most ``most`` messages, in the order heard; a message on another
        TaskManager's topic than its own is dropped. Waits on the calling thread."""
        heard: list[p.TaskManagerMetrics] = []

        def on_metrics(topic: str, message: Any) -> None:  # paho's thread
            if (isinstance(message, p.TaskManagerMetrics) and len(heard) < most
                    and topic == topics.metrics(message.taskmanager_id)):
                heard.append(message)
        self.service.subscribe(topics.METRICS_ALL, on_metrics)
        try:
            time.sleep(seconds)  # listening, not hoping: every TaskManager sends within it
        finally:
            self.service.unsubscribe(topics.METRICS_ALL, on_metrics)
        return list(heard)

    def failure_history(self, job_id: str) -> list[dict[str, Any]]:
        """A running job's failures so far, from its snapshot."""
        snapshot = self.snapshot(job_id)
        return [failure.to_dict() for failure in snapshot.graph.failures] if snapshot else []


# The bytes of one of a job's result files from an offset on, in chunks: ``local_chunks``
# where the files are on this machine's disk, ``JobClient.job_file`` anywhere.
FileReader = Callable[[str, int], Iterator[bytes]]
LOCAL_CHUNK = 1024 * 1024


def local_chunks(path: str, offset: int = 0) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        handle.seek(offset)
        while chunk := handle.read(LOCAL_CHUNK):
            yield chunk


def result_files(result: p.JobResult, read: FileReader = local_chunks
                 ) -> tuple[list[str], list[str]]:
    """Every output file and every collected-row file of a job, also when the result
    message lists only the first of them and the rest are in its ``files_manifest``."""
    if not result.files_manifest:
        return list(result.outputs), list(result.collected_paths)
    manifest = json.loads(b"".join(read(result.files_manifest, 0)))
    return list(manifest["outputs"]), list(manifest["collected_paths"])


def collected_rows(result: p.JobResult, read: FileReader = local_chunks) -> list[Any]:
    """The rows a job's collect() sinks gathered, in subtask order (they live in files)."""
    rows: list[Any] = []
    for path in result_files(result, read)[1]:
        rows.extend(json.loads(b"".join(read(path, 0))))
    return rows
