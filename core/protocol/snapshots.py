"""A job's ExecutionGraph as data: what ``JobSnapshot.graph`` carries to observers.

``ExecutionGraph.snapshot()`` renders the graph as these frozen dataclasses, so the codec
checks a received snapshot field by field like every other message: a state that is not
an ``ExecutionState``, a vertex without its id, are refused on receipt rather than found
by a view later. Field names are the keys the snapshot had as a dict, so the JSON shape
is that of the dict; states are the enums, sequences tuples (the classes are frozen).

Job  ->  vertices (JobVertex)  ->  subtasks (one per parallel instance)  ->  attempts.
A streaming job's snapshot also sums up its checkpoints (``checkpoints``, from its
JobMaster's checkpoint coordinator, ``clusterdeck.core.protocol.checkpointstats``).
A large job's snapshot is published reduced (``clusterdeck.core.jobmanager.reductions``):
``truncated`` says what was left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from clusterdeck.core.protocol.causes import CauseChain
from clusterdeck.core.protocol.checkpointstats import CheckpointStatsSnapshot
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.jobgraph import JobEdge, JobKind
from clusterdeck.core.protocol.sparkwork import SparkWork
from clusterdeck.core.protocol.states import ExecutionState, JobStatus


class Truncation(StrEnum):
    """What a reduced snapshot left out; falsy when nothing was (the member is ``""``)."""

    NONE = ""
    CHECKPOINTS = "checkpoints"  # a streaming job's checkpoint history (its counts stay)
    ATTEMPTS = "attempts"  # only each subtask's current attempt; the last 20 failures
    SUBTASKS = "subtasks"  # no subtasks at all: each vertex's ``state_counts`` only


@dataclass(frozen=True)
class SlotSnapshot:
    """The slot an attempt got: its TaskManager and its index in that slot table."""

    taskmanager_id: str
    slot_index: int


@dataclass(frozen=True)
class AttemptSnapshot:
    """One attempt (an Execution) of one subtask.

    ``start_time`` is when it got its slot (DEPLOYING), ``end_time`` when it reached a
    terminal state; ``input_splits`` are the ids of the splits a source attempt took.
    ``restored``: finished in an earlier JobManager run (epoch), taken from the job store.
    """

    attempt_id: str
    attempt: int
    state: ExecutionState
    slot: SlotSnapshot | None = None
    state_timestamps: dict[ExecutionState, float] = field(default_factory=dict)
    start_time: float | None = None
    end_time: float | None = None
    failure: FailureRecord | None = None
    input_splits: tuple[int, ...] = ()
    partitions_lost: bool = False
    epoch: int = 0
    restored: bool = False


@dataclass(frozen=True)
class SubtaskSnapshot:
    """One parallel instance of a vertex: ``id`` is ``<vertex-id>#<subtask>``; ``state``
    and ``attempt_id`` are its current (last) attempt's; ``attempts`` oldest first."""

    id: str
    subtask: int
    state: ExecutionState
    attempt_id: str
    attempts: tuple[AttemptSnapshot, ...] = ()

    @property
    def current(self) -> AttemptSnapshot | None:
        """The current attempt; None only in a hand-made snapshot without attempts."""
        return self.attempts[-1] if self.attempts else None


@dataclass(frozen=True)
class OperatorSnapshot:
    """One operator of a vertex's chain (its ``OperatorSpec`` without the params, which
    can be long: SQL text, paths)."""

    id: str
    kind: str
    name: str


@dataclass(frozen=True)
class VertexSnapshot:
    """One JobVertex with its subtasks; ``state_counts`` counts the subtasks per current
    state (states no subtask is in are left out). In a snapshot truncated to
    ``subtasks``, ``subtasks`` is empty and ``state_counts`` is all there is."""

    id: str
    name: str
    parallelism: int
    is_source: bool
    is_sink: bool
    operators: tuple[OperatorSnapshot, ...]
    state_counts: dict[ExecutionState, int]
    subtasks: tuple[SubtaskSnapshot, ...] = ()


@dataclass(frozen=True)
class JobProgress:
    """Subtasks whose current attempt finished, of all subtasks; or, with
    ``spark_stages``, a running script's Spark stages done, of those known (its
    JobMaster's choice, ``JobMaster.progress``), so that a reader need not guess which."""

    finished: int
    total: int
    spark_stages: bool = False


@dataclass(frozen=True)
class JobGraphSnapshot:
    """The whole ExecutionGraph of one job; vertices in topological order.

    ``epoch`` numbers the JobManager runs of the job (0 first); ``status_timestamps``
    says when the job last entered each status; ``failures`` is every failure, oldest
    first, and ``root_cause`` the first of them, or the first caused by the root of its
    chain of causes when that came later (``causes``: the job's failover events linked
    by cause, ``clusterdeck.core.protocol.causes``; None before its first). ``hosts``
    (TaskManager id -> host) is filled by the JobMaster from the slots it was offered.
    ``checkpoints``: a streaming job's checkpoints, summed up by its JobMaster; None for
    a batch job (and in the snapshot of a sender that predates them). ``spark``: a
    PySpark script's Spark jobs, stages and failed tasks, of its last attempts (oldest
    first; each bounded, ``clusterdeck.core.protocol.sparkwork``); its ``progress`` then
    counts the newest attempt's Spark stages done, not subtasks.
    """

    job_id: str
    name: str
    epoch: int
    kind: JobKind
    status: JobStatus
    status_timestamps: dict[JobStatus, float]
    progress: JobProgress
    vertices: tuple[VertexSnapshot, ...]
    edges: tuple[JobEdge, ...] = ()
    failures: tuple[FailureRecord, ...] = ()
    root_cause: FailureRecord | None = None
    hosts: dict[str, str] = field(default_factory=dict)
    truncated: Truncation = Truncation.NONE
    checkpoints: CheckpointStatsSnapshot | None = None
    spark: tuple[SparkWork, ...] = ()
    causes: CauseChain | None = None

    def vertex(self, vertex_id: str) -> VertexSnapshot | None:
        return next((vertex for vertex in self.vertices if vertex.id == vertex_id), None)
