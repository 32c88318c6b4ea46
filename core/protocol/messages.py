"""The protocol's namespace: every message of the control plane, and the data types they carry.

Each conversation has a module of its own; this one only gathers them, so that
``from clusterdeck.core.protocol import messages as p`` names every message as ``p.X``.
Importing it registers every message type with the codec (``clusterdeck.core.rpc._codec``
finds a type by its class name), so every process that decodes imports it.

docs/protocol.md lists each message with its topic and QoS, and the version history.
PROTOCOL_VERSION changes whenever a message changes incompatibly; a TaskManager of another
version is refused at registration.
"""

from clusterdeck.core.protocol.checkpoints import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    SavepointCompleted,
    TriggerCheckpoint,
    TriggerSavepoint,
)
from clusterdeck.core.protocol.chunks import (
    ArtifactChunk,
    ArtifactChunkReceived,
    JobFileChunk,
    RequestArtifactChunk,
    RequestJobFile,
    RequestStateChunk,
    UploadArtifactChunk,
)
from clusterdeck.core.protocol.cluster import (
    ClusterOverview,
    LeadershipChanged,
    RequestClusterOverview,
    TaskManagerInfo,
    TaskManagerLost,
    TaskManagerRegistered,
    TaskManagerState,
)
from clusterdeck.core.protocol.deployments import (
    JobDeployment,
    SubmitTask,
    SubmitTasks,
    TaskDeployment,
)
from clusterdeck.core.protocol.elastic import (
    TaskManagerDemand,
    TaskManagerStartFailed,
)
from clusterdeck.core.protocol.failures import (
    FailureRecord,
    TaskFailure,
)
from clusterdeck.core.protocol.inputs import (
    InputPartitions,
    NextInputSplit,
    RequestInputPartitions,
    RequestNextInputSplit,
)
from clusterdeck.core.protocol.jobevents import (
    ExecutionStateEvent,
    ExecutionStateEvents,
    JobSnapshot,
    JobStatusEvent,
    job_events_in,
)
from clusterdeck.core.protocol.jobgraph import (
    InputSplit,
    JobGraph,
)
from clusterdeck.core.protocol.jobs import (
    CancelJob,
    JobList,
    JobResult,
    JobSubmitted,
    JobSummary,
    RequestJobList,
    RequestJobResult,
    SubmitJob,
)
from clusterdeck.core.protocol.metrics import (
    ATTEMPT_WORKERS,
    METRICS_ATTEMPTS,
    URL_LIMIT,
    AttemptMetrics,
    AttemptWorker,
    TaskManagerMetrics,
)
from clusterdeck.core.protocol.output import (
    OUTPUT_PIECE,
    PRINTED_KEPT,
    JobOutput,
    TaskOutput,
    printed_tail,
)
from clusterdeck.core.protocol.presence import (
    LeaderInfo,
    Presence,
    PresenceStatus,
)
from clusterdeck.core.protocol.registration import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    DisconnectTaskManager,
    RefuseRegistration,
    RegisterTaskManager,
    RegistrationAccepted,
    RegistrationResponse,
    ResourceManagerHeartbeat,
    SlotReport,
    SlotStatus,
    TaskManagerHeartbeat,
)
from clusterdeck.core.protocol.slots import (
    FreeSlot,
    OfferSlot,
    OfferSlots,
    ReleaseJobSlots,
    RequestSlot,
    SlotRequests,
)
from clusterdeck.core.protocol.snapshots import (
    JobGraphSnapshot,
)
from clusterdeck.core.protocol.sparkwork import (
    SparkWorkReport,
)
from clusterdeck.core.protocol.states import (
    ExecutionState,
    JobStatus,
)
from clusterdeck.core.protocol.tasks import (
    CancelTask,
    ExecutionReport,
    RequestExecutionReport,
    TaskOperationResult,
    TaskOperationResults,
    TaskResult,
    UpdateAcknowledged,
    UpdatesAcknowledged,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)
from clusterdeck.core.protocol.wiring import (
    ResultPartitionRef,
)

# 2: JobSnapshot.graph and ExecutionStateEvent.failure are typed; 3: offloaded deployment
# inputs, execution reports for reconciliation, a paged job list; 4: qualified endpoints
# and replies on client-id topics (rpc/taskexecutor/<cluster>.<id>, reply/<cluster>.<id>);
# 12: deployments, state updates, slots and execution events travel in batches
# (SubmitTasks, UpdateTaskExecutionStates, SlotRequests, OfferSlots, ExecutionStateEvents)
# 13: a SubmitTasks carries what its deployments share (the job's graph, artifact, ...) once
# 14: streaming jobs and checkpoints; 15: savepoints, stop, NotifyCheckpointAborted
# 17: SubmitTask.split_share, a file source subtask's fair share of its input
# 19: fencing tokens carry the leader's epoch (LeaderInfo.epoch), the cluster overview
# its leader and standbys (docs/ha.md)
# 20: SparkWorkReport, a PySpark script's Spark jobs, stages and failed tasks;
# JobGraphSnapshot.spark
# 21: LeadershipChanged, ClusterOverview.leader_cause
# 22: the active ResourceManager: TaskManagerDemand, TaskManagerStartFailed (docs/elastic.md)
# 23: JobGraphSnapshot.causes, the job's failover events linked by cause
# 24: JobGraph.max_parallelism (key groups)
# 25: SparkStage.parent_ids, the edges of a Spark job's stage DAG
# 26: TaskManagerHeartbeat.wall_time, TaskManagerInfo.clock_offset_s (clock skew measured)
# 28: RequestSlot.blocked and CauseKind TASKMANAGER_BLOCKED (a job's blocklist)
# 29: CauseKind JOB_RESCALED (reactive mode, docs/elastic.md)
# 30: AttemptMetrics.workers (where an attempt runs: a vertex's flame graph)
# (every version, 5 to 11 and 16 too, is explained in docs/protocol.md)
PROTOCOL_VERSION = 31

__all__ = [
    "ATTEMPT_WORKERS",
    "METRICS_ATTEMPTS",
    "OUTPUT_PIECE",
    "PRINTED_KEPT",
    "PROTOCOL_VERSION",
    "URL_LIMIT",
    "AcknowledgeCheckpoint",
    "AcknowledgeRegistration",
    "AlreadyRegistered",
    "ArtifactChunk",
    "ArtifactChunkReceived",
    "AttemptMetrics",
    "AttemptWorker",
    "CancelJob",
    "CancelTask",
    "ClusterOverview",
    "DeclineCheckpoint",
    "DisconnectTaskManager",
    "ExecutionReport",
    "ExecutionState",
    "ExecutionStateEvent",
    "ExecutionStateEvents",
    "FailureRecord",
    "FreeSlot",
    "InputPartitions",
    "InputSplit",
    "JobDeployment",
    "JobFileChunk",
    "JobGraph",
    "JobGraphSnapshot",
    "JobList",
    "JobOutput",
    "JobResult",
    "JobSnapshot",
    "JobStatus",
    "JobStatusEvent",
    "JobSubmitted",
    "JobSummary",
    "LeaderInfo",
    "LeadershipChanged",
    "NextInputSplit",
    "NotifyCheckpointAborted",
    "NotifyCheckpointComplete",
    "OfferSlot",
    "OfferSlots",
    "Presence",
    "PresenceStatus",
    "RefuseRegistration",
    "RegisterTaskManager",
    "RegistrationAccepted",
    "RegistrationResponse",
    "ReleaseJobSlots",
    "RequestArtifactChunk",
    "RequestClusterOverview",
    "RequestExecutionReport",
    "RequestInputPartitions",
    "RequestJobFile",
    "RequestJobList",
    "RequestJobResult",
    "RequestNextInputSplit",
    "RequestSlot",
    "RequestStateChunk",
    "ResourceManagerHeartbeat",
    "ResultPartitionRef",
    "SavepointCompleted",
    "SlotReport",
    "SlotRequests",
    "SlotStatus",
    "SparkWorkReport",
    "SubmitJob",
    "SubmitTask",
    "SubmitTasks",
    "TaskDeployment",
    "TaskFailure",
    "TaskManagerDemand",
    "TaskManagerHeartbeat",
    "TaskManagerInfo",
    "TaskManagerLost",
    "TaskManagerMetrics",
    "TaskManagerRegistered",
    "TaskManagerStartFailed",
    "TaskManagerState",
    "TaskOperationResult",
    "TaskOperationResults",
    "TaskOutput",
    "TaskResult",
    "TriggerCheckpoint",
    "TriggerSavepoint",
    "UpdateAcknowledged",
    "UpdateTaskExecutionState",
    "UpdateTaskExecutionStates",
    "UpdatesAcknowledged",
    "UploadArtifactChunk",
    "job_events_in",
    "printed_tail",
]
