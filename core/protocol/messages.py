"""Every message of the control plane: small frozen dataclasses, validated on receipt.

The wire format and its checks are in ``clusterdeck.core.rpc._codec``; docs/protocol.md lists each
message with its topic and QoS. PROTOCOL_VERSION changes whenever a message changes
incompatibly; a TaskManager of another version is refused at registration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from clusterdeck.core.protocol.checkpoints import (  # noqa: F401 - messages of this namespace
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    SavepointCompleted,
    TriggerCheckpoint,
    TriggerSavepoint,
)
from clusterdeck.core.protocol.deployments import (  # noqa: F401 - messages of this namespace
    JobDeployment,
    SubmitTask,
    SubmitTasks,
    TaskDeployment,
)
from clusterdeck.core.protocol.failures import FailureRecord, TaskFailure
from clusterdeck.core.protocol.jobgraph import InputSplit, JobGraph
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.protocol.wiring import (
    ResultPartitionRef,
)
from clusterdeck.core.rpc import message

# 2: JobSnapshot.graph and ExecutionStateEvent.failure are typed; 3: offloaded deployment
# inputs, execution reports for reconciliation, a paged job list; 4: qualified endpoints
# and replies on client-id topics (rpc/taskexecutor/<cluster>.<id>, reply/<cluster>.<id>);
# 12: deployments, state updates, slots and execution events travel in batches
# (SubmitTasks, UpdateTaskExecutionStates, SlotRequests, OfferSlots, ExecutionStateEvents)
# 13: a SubmitTasks carries what its deployments share (the job's graph, artifact, ...) once
# 14: streaming jobs and checkpoints; 15: savepoints, stop, NotifyCheckpointAborted
PROTOCOL_VERSION = 16

# -- presence and leadership (retained) -------------------------------------------------


class PresenceStatus(StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"


@message
@dataclass(frozen=True)
class Presence:
    """On ``presence/<service>``, retained; the ``offline`` one is the process's last will."""

    service_id: str
    role: str
    status: PresenceStatus
    instance_id: str
    pid: int
    host: str
    started_at: float


@message
@dataclass(frozen=True)
class LeaderInfo:
    """On ``state/leader``, retained: where the JobManager's endpoints are, and its token."""

    resource_manager: str
    dispatcher: str
    fencing_token: str
    protocol_version: int
    pid: int
    host: str
    started_at: float


# -- registration (seed 000) ------------------------------------------------------------


@message
@dataclass(frozen=True)
class SlotStatus:
    index: int
    allocation_id: str | None = None
    job_id: str | None = None


@message
@dataclass(frozen=True)
class SlotReport:
    """``spark_ready``: the TaskManager's SparkSession is up, so a task starts at once; the
    ResourceManager prefers such slots (a TaskManager just restarted is still starting
    its JVM)."""

    slots: tuple[SlotStatus, ...]
    spark_ready: bool = True

    @property
    def free(self) -> int:
        return sum(1 for slot in self.slots if slot.allocation_id is None)


@message
@dataclass(frozen=True)
class RegisterTaskManager:
    """TaskExecutor -> ResourceManager (unfenced: the answer hands out the token)."""

    cluster_id: str
    protocol_version: int
    resource_id: str
    instance_id: str
    endpoint_id: str
    host: str
    pid: int
    slot_report: SlotReport
    data_url: str = ""  # its data service (core/dataservice), "" when it runs none
    data_fingerprint: str = ""
    data_key: str = ""
    stream_address: str = ""  # host:port of its channel server (same key and certificate)


@message
@dataclass(frozen=True)
class AcknowledgeRegistration:
    registration_id: str
    resource_manager: str
    fencing_token: str
    heartbeat_interval: float
    # The cluster's spark.* settings: a TaskManager's session gets those its own
    # configuration does not set (one on another machine has only its own file).
    spark_properties: dict[str, str] = field(default_factory=dict)


@message
@dataclass(frozen=True)
class AlreadyRegistered:
    """The same TaskManager instance registered again (e.g. a retried ask)."""

    registration_id: str
    resource_manager: str
    fencing_token: str
    heartbeat_interval: float
    # The cluster's spark.* settings: a TaskManager's session gets those its own
    # configuration does not set (one on another machine has only its own file).
    spark_properties: dict[str, str] = field(default_factory=dict)


@message
@dataclass(frozen=True)
class RefuseRegistration:
    reason: str


RegistrationResponse = AcknowledgeRegistration | AlreadyRegistered | RefuseRegistration

# -- liveness ---------------------------------------------------------------------------


@message
@dataclass(frozen=True)
class TaskManagerHeartbeat:
    """TaskExecutor -> ResourceManager on ``heartbeat/<rm>``, fenced, QoS 0."""

    resource_id: str
    registration_id: str
    slot_report: SlotReport
    cpu_percent: float = 0.0
    memory_bytes: int = 0


@message
@dataclass(frozen=True)
class ResourceManagerHeartbeat:
    """ResourceManager -> TaskExecutor on ``heartbeat/<te>``, QoS 0."""

    registration_id: str
    fencing_token: str


@message
@dataclass(frozen=True)
class DisconnectTaskManager:
    """ResourceManager -> TaskExecutor: you are not (or no longer) registered here."""

    resource_id: str
    reason: str


# -- cluster overview and events --------------------------------------------------------


class TaskManagerState(StrEnum):
    REGISTERED = "registered"
    LOST = "lost"


@message
@dataclass(frozen=True)
class TaskManagerInfo:
    id: str
    state: TaskManagerState
    host: str
    pid: int
    slots_total: int
    slots_free: int
    heartbeat_age_s: float | None
    registered_at: float
    endpoint_id: str = ""
    lost_cause: str = ""
    cpu_percent: float = 0.0
    memory_bytes: int = 0


@message
@dataclass(frozen=True)
class RequestClusterOverview:
    """Client -> Dispatcher (unfenced) and Dispatcher -> ResourceManager."""


@message
@dataclass(frozen=True)
class ClusterOverview:
    """The answer to RequestClusterOverview, and the retained ``state/cluster`` snapshot."""

    cluster_id: str
    taskmanagers: tuple[TaskManagerInfo, ...]
    slots_total: int
    slots_free: int
    jobmanager_pid: int
    taken_at: float
    fencing_token: str = ""
    taskmanagers_left_out: int = 0  # not listed: the overview would not fit rpc.framesize


@message
@dataclass(frozen=True)
class TaskManagerRegistered:
    """Event on ``events/cluster``."""

    info: TaskManagerInfo


@message
@dataclass(frozen=True)
class TaskManagerLost:
    """Event on ``events/cluster``; ``detected_by`` is "last will" or "heartbeat timeout"."""

    resource_id: str
    cause: str
    detected_by: str
    at: float = field(default=0.0)


# -- jobs: submission, artifacts, results ------------------------------------------------
# The JobGraph, InputSplit, partition wiring, failures and the snapshot of a job's
# ExecutionGraph are frozen dataclasses of their own modules; the codec validates them
# field by field like any message.


@message
@dataclass(frozen=True)
class UploadArtifactChunk:
    """JobClient -> Dispatcher: one base64 piece of a job artifact (a zip), so an artifact
    larger than rpc.framesize still travels; ``sha256`` is of the whole artifact."""

    upload_id: str
    index: int
    total: int
    data: str
    sha256: str


@message
@dataclass(frozen=True)
class ArtifactChunkReceived:
    upload_id: str
    index: int


@message
@dataclass(frozen=True)
class SubmitJob:
    """JobClient -> Dispatcher, after every artifact chunk was received."""

    job_id: str
    graph: JobGraph
    upload_id: str
    artifact_sha256: str
    args: tuple[str, ...] = ()
    restart_strategy: dict[str, Any] | None = None
    task_timeout: float = 0.0


@message
@dataclass(frozen=True)
class JobSubmitted:
    job_id: str


@message
@dataclass(frozen=True)
class RequestArtifactChunk:
    """TaskExecutor -> Dispatcher: fetch a job's artifact to run its tasks."""

    job_id: str
    index: int


@message
@dataclass(frozen=True)
class ArtifactChunk:
    job_id: str
    index: int
    total: int
    data: str
    sha256: str


@message
@dataclass(frozen=True)
class RequestJobFile:
    """Client -> Dispatcher: a chunk of one of a job's result files (collected rows,
    printed output, the files manifest) from ``offset`` on, for a client that cannot
    read it where it runs (another machine than the JobManager's)."""

    job_id: str
    path: str
    offset: int = 0


@message
@dataclass(frozen=True)
class JobFileChunk:
    """``data``: base64 of at most half ``rpc.framesize`` bytes; ``total``: the file's size."""

    job_id: str
    path: str
    offset: int
    total: int
    data: str


@message
@dataclass(frozen=True)
class RequestStateChunk:
    """TaskExecutor -> JobMaster (ask, fenced): a chunk of the snapshot an attempt is
    deployed to restore (``SubmitTask.restore_state`` of ``checkpoint_id``), from
    ``offset`` on, when the TaskManager cannot see the JobManager's checkpoint folder.
    Answered with a ``JobFileChunk`` whose ``path`` is the snapshot's ``StateHandle.path``."""

    job_id: str
    attempt_id: str
    checkpoint_id: int
    offset: int = 0


@message
@dataclass(frozen=True)
class JobSummary:
    job_id: str
    name: str
    kind: str
    status: JobStatus
    submitted_at: float
    finished: int
    total: int
    duration: float | None = None


@message
@dataclass(frozen=True)
class RequestJobList:
    """Client -> Dispatcher: one page of the job list, newest first. ``limit`` 0 (or one
    too large) asks for as many as fit one message; the answer may hold fewer."""

    offset: int = 0
    limit: int = 0


@message
@dataclass(frozen=True)
class JobList:
    """A page of the job list, newest first: ``jobs`` starts at ``offset`` of ``total``.

    The retained ``state/joblist`` holds a window instead (every running job, then the
    newest ended ones), bounded so it always fits ``rpc.framesize``; ``total`` says how
    many jobs the store holds in all (0 from a sender that does not say)."""

    jobs: tuple[JobSummary, ...]
    total: int = 0
    offset: int = 0


@message
@dataclass(frozen=True)
class CancelJob:
    job_id: str


@message
@dataclass(frozen=True)
class RequestJobResult:
    job_id: str


@message
@dataclass(frozen=True)
class JobResult:
    """Flink's JobResultSuccess and JobResultFailure in one message, told apart by
    ``status`` (FINISHED, FAILED or CANCELED; RUNNING and the like while it is pending).

    ``root_cause`` and ``failure_history`` hold ``FailureRecord.to_dict()``'s flat form
    (``FailureRecord.from_dict`` reads it back): a result is kept in the job store's
    files and printed by ``clusterdeck failures --json`` in that form.

    Collected rows and outputs stay in files (``collected_paths``), never in messages. A
    large job's file lists are cut to their first entries and listed whole in the JSON file
    ``files_manifest`` (``outputs_total`` and ``collected_total`` say how many there are);
    ``clusterdeck.core.client.jobclient.result_files`` reads either form."""

    job_id: str
    name: str
    status: JobStatus
    duration: float | None = None
    accumulators: dict[str, Any] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    collected_paths: tuple[str, ...] = ()
    stdout: str = ""
    stderr: str = ""
    root_cause: dict[str, Any] | None = None
    failures: int = 0
    finished: int = 0
    total: int = 0
    failure_history: tuple[dict[str, Any], ...] = ()
    files_manifest: str = ""
    outputs_total: int = 0
    collected_total: int = 0
    stdout_paths: tuple[str, ...] = ()
    stderr_paths: tuple[str, ...] = ()

    @property
    def is_terminal(self) -> bool:
        return JobStatus(self.status).is_terminal


# -- slots ---------------------------------------------------------------------------------


@message
@dataclass(frozen=True)
class RequestSlot:
    """JobMaster -> ResourceManager (tell): answered later by an OfferSlot."""

    job_id: str
    allocation_id: str
    jobmaster: str


@message
@dataclass(frozen=True)
class OfferSlot:
    """ResourceManager -> JobMaster: a free slot, now allocated to ``allocation_id``."""

    allocation_id: str
    resource_id: str
    endpoint_id: str
    host: str
    slot_index: int
    data_url: str = ""  # the TaskManager's data service, as it registered it
    data_fingerprint: str = ""
    data_key: str = ""
    stream_address: str = ""  # its channel server, as it registered it


@message
@dataclass(frozen=True)
class FreeSlot:
    """JobMaster -> ResourceManager (tell): the allocation is no longer needed."""

    job_id: str
    allocation_id: str


@message
@dataclass(frozen=True)
class SlotRequests:
    """JobMaster -> ResourceManager (tell): the slot requests and frees of one turn of
    the JobMaster's mailbox. The ResourceManager takes the requests first (a free may
    withdraw a request of the same batch), then the frees, then offers what it can."""

    requests: tuple[RequestSlot, ...] = ()
    frees: tuple[FreeSlot, ...] = ()


@message
@dataclass(frozen=True)
class OfferSlots:
    """ResourceManager -> JobMaster (tell): the slots allocated to its requests in one
    assignment round, oldest request first."""

    offers: tuple[OfferSlot, ...]


@message
@dataclass(frozen=True)
class ReleaseJobSlots:
    """JobMaster -> ResourceManager (tell): the job ended; drop its requests and slots."""

    job_id: str


# -- tasks ----------------------------------------------------------------------------------


@message
@dataclass(frozen=True)
class TaskOperationResults:
    results: tuple[TaskOperationResult, ...]


@message
@dataclass(frozen=True)
class TaskOperationResult:
    """``known`` False: the TaskExecutor does not run that attempt (it ended, or its
    deployment never arrived); a cancel of it is then done."""

    attempt_id: str
    success: bool
    message: str = ""
    known: bool = True


@message
@dataclass(frozen=True)
class CancelTask:
    """JobMaster -> TaskExecutor (ask): cancel the attempt's Spark job group, free its slot."""

    job_id: str
    attempt_id: str


@message
@dataclass(frozen=True)
class TaskResult:
    """What a finished attempt hands back; bulk data stays in the named files.

    ``stdout``/``stderr`` are the end of what the task printed (``printed_tail``); all of
    it is in ``stdout_path``/``stderr_path`` when the task printed anything."""

    records_in: int = 0
    records_out: int = 0
    counters: dict[str, Any] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    collected_path: str = ""
    stdout: str = ""
    stderr: str = ""
    stdout_path: str = ""
    stderr_path: str = ""


PRINTED_KEPT = 16 * 1024
"""Characters of a task's or a job's printed output a message carries; the rest is in
files. A script that prints megabytes must not make its result larger than a frame."""


def printed_tail(text: str, kept: int = PRINTED_KEPT) -> str:
    """The end of ``text``, at most ``kept`` characters, saying how much was cut."""
    if len(text) <= kept:
        return text
    cut = len(text) - kept
    return f"[... {cut:,} earlier characters cut; all of it is in the output files]\n" + \
        text[cut:]


OUTPUT_PIECE = 16_000  # characters of printed output in one TaskOutput or JobOutput


@message
@dataclass(frozen=True)
class TaskOutput:
    """TaskExecutor -> JobMaster (tell), every few tenths of a second while a PySpark
    script prints: what it printed since, to be passed on to the submitter. ``path`` is
    the output file that will hold all of it (under the job's work dir, ``output/``) and
    ``offset`` the piece's start in that file's bytes; ``text`` at most OUTPUT_PIECE
    characters. The feed may skip (core/engine/liveoutput.py): the file never does."""

    job_id: str
    attempt_id: str
    stream: str  # "stdout" or "stderr"
    path: str
    offset: int
    text: str


@message
@dataclass(frozen=True)
class JobOutput:
    """JobMaster -> ``events/output/<job-id>``: a TaskOutput, passed on to whoever
    follows the job's output (``clusterdeck submit``)."""

    job_id: str
    attempt_id: str
    stream: str
    path: str
    offset: int
    text: str


# -- live numbers (docs/metrics.md) -----------------------------------------------------


@message
@dataclass(frozen=True)
class AttemptMetrics:
    """One attempt's numbers so far: records and bytes in and out, seconds it has run.
    ``final``: it ended and these are its last (a finished one's equal its TaskResult's).

    A streaming attempt's too: ``backpressured``, seconds so far it waited for its
    consumers to take its buffers (a total, as ``busy``: the window takes its share of
    each second, Flink's backPressuredTimeMsPerSecond, from two messages, so a lost one
    costs nothing); ``watermark``, the event time (seconds) it last sent on, a sink's
    input watermark, None while it has none; ``watermark_end``: its watermark is the end
    of event time (infinity, which JSON has not: ``watermark`` is then None). Defaults for
    a batch attempt and for senders that predate them."""

    job_id: str
    vertex_id: str
    subtask: int
    attempt: int
    attempt_id: str
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    busy: float
    final: bool = False
    backpressured: float = 0.0
    watermark: float | None = None
    watermark_end: bool = False


METRICS_ATTEMPTS = 200  # AttemptMetrics in one TaskManagerMetrics: about 75 kB at most
URL_LIMIT = 512  # characters of an address a message carries (a Spark UI's)


@message
@dataclass(frozen=True)
class TaskManagerMetrics:
    """TaskExecutor -> ``metrics/<taskmanager-id>`` (QoS 0, not retained): once a second
    while it runs tasks (every attempt running, and those that ended since), every few
    seconds when idle (its heap only). ``heap_used``/``heap_max``: its Spark JVM's heap in
    bytes, -1 before the JVM is up; ``spark_ui``: its Spark UI's address, "" without one."""

    taskmanager_id: str
    time: float
    attempts: tuple[AttemptMetrics, ...] = ()
    heap_used: int = -1
    heap_max: int = -1
    spark_ui: str = ""


@message
@dataclass(frozen=True)
class UpdateTaskExecutionState:
    """TaskExecutor -> JobMaster (ask, fenced): sent again until acknowledged; applying it
    twice changes nothing (updates are idempotent per attempt id)."""

    job_id: str
    attempt_id: str
    state: ExecutionState
    failure: TaskFailure | None = None
    result: TaskResult | None = None


@message
@dataclass(frozen=True)
class UpdateAcknowledged:
    attempt_id: str
    accepted: bool
    reason: str = ""


@message
@dataclass(frozen=True)
class UpdateTaskExecutionStates:
    """TaskExecutor -> JobMaster (ask, fenced): the state updates of one turn of the
    TaskExecutor's mailbox for one JobMaster, in order (a subtask's own transitions keep
    theirs); one UpdatesAcknowledged answers all of them, an acknowledgement per update
    in the same order. An update not acknowledged is sent again, alone or in a later
    batch."""

    updates: tuple[UpdateTaskExecutionState, ...]


@message
@dataclass(frozen=True)
class UpdatesAcknowledged:
    acknowledgements: tuple[UpdateAcknowledged, ...]


@message
@dataclass(frozen=True)
class RequestNextInputSplit:
    """A source task -> its JobMaster (ask, fenced). ``sequence`` counts the requests of
    one attempt: a request sent again after a lost answer gets the same split back, so a
    retry never loses a split."""

    job_id: str
    attempt_id: str
    host: str
    sequence: int = 0


@message
@dataclass(frozen=True)
class NextInputSplit:
    """None when the source's input is exhausted."""

    split: InputSplit | None


@message
@dataclass(frozen=True)
class RequestInputPartitions:
    """A task of an offloaded deployment -> its JobMaster (ask, fenced): the partitions
    of input edge ``input_index`` from ``offset`` on."""

    job_id: str
    attempt_id: str
    input_index: int
    offset: int = 0


@message
@dataclass(frozen=True)
class InputPartitions:
    """One page of an edge's partitions; ``total`` is how many the edge has in all."""

    partitions: tuple[ResultPartitionRef, ...]
    total: int


# -- deployment reconciliation (the JobMaster's heartbeat to its TaskExecutors) -----------


@message
@dataclass(frozen=True)
class RequestExecutionReport:
    """JobMaster -> TaskExecutor (ask), every heartbeat interval while the job has attempts
    there: which of this job's attempts do you run? An update that was lost shows up as an
    attempt the JobMaster believes deployed that its TaskManager no longer reports."""

    job_id: str


@message
@dataclass(frozen=True)
class ExecutionReport:
    """The job's attempts the TaskExecutor runs (at most its slots), and those it ended
    whose final update it is still sending (so they are not taken for lost)."""

    resource_id: str
    running: tuple[str, ...] = ()
    reporting: tuple[str, ...] = ()


# -- job events and snapshots for observers ---------------------------------------------------


@message
@dataclass(frozen=True)
class JobStatusEvent:
    """On ``events/jobs/<job-id>``."""

    job_id: str
    old: JobStatus
    new: JobStatus
    at: float


@message
@dataclass(frozen=True)
class ExecutionStateEvent:
    """On ``events/jobs/<job-id>``: one execution moved; failures carry their record."""

    job_id: str
    attempt_id: str
    vertex_id: str
    subtask: int
    attempt: int
    old: ExecutionState
    new: ExecutionState
    at: float
    taskmanager_id: str | None = None
    slot_index: int | None = None
    failure: FailureRecord | None = None


@message
@dataclass(frozen=True)
class ExecutionStateEvents:
    """On ``events/jobs/<job-id>``: the moves of one turn of the JobMaster's mailbox, in
    order (core/jobmanager/jobevents.py)."""

    job_id: str
    events: tuple[ExecutionStateEvent, ...]


def job_events_in(message: Any) -> tuple[ExecutionStateEvent | JobStatusEvent, ...]:
    """The job events a message on ``events/jobs/<job-id>`` holds, one by one."""
    if isinstance(message, ExecutionStateEvents):
        return message.events
    if isinstance(message, ExecutionStateEvent | JobStatusEvent):
        return (message,)
    return ()


@message
@dataclass(frozen=True)
class JobSnapshot:
    """Retained on ``state/jobs/<job-id>``: the whole ExecutionGraph as data
    (``ExecutionGraph.snapshot()``, see ``clusterdeck.core.protocol.snapshots``), so a
    late observer can redraw it at once."""

    job_id: str
    graph: JobGraphSnapshot
