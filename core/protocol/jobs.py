"""Jobs as a client sees them: submit, list, cancel, and the result.

The JobGraph, InputSplit, partition wiring, failures and the snapshot of a job's
ExecutionGraph are frozen dataclasses of their own modules; the codec validates them
field by field like any message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.sparkwork import SparkWork
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import message


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
    ``clusterdeck.core.client.jobclient.result_files`` reads either form.

    ``spark``: a PySpark script's Spark jobs and stages, of its last attempt, as the job's
    snapshot had them at the end (``clusterdeck result --json`` lists them)."""

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
    spark: tuple[SparkWork, ...] = ()

    @property
    def is_terminal(self) -> bool:
        return JobStatus(self.status).is_terminal
