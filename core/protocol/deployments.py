"""Deploying attempts: a JobMaster's ``SubmitTasks`` to one TaskExecutor.

Inside each process an attempt's deployment is one ``SubmitTask``. On the wire a batch
says what its deployments share once (``JobDeployment``: the job's graph, artifact, work
dir, JobMaster and fencing token) and each deployment's own part (``TaskDeployment``),
as Flink's deployment descriptors carry the job's information once, not per task: with
the graph in every deployment, encoding and decoding it was half a deployment's cost.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from clusterdeck.core.protocol.checkpoints import StateHandle
from clusterdeck.core.protocol.jobgraph import InputSplit, JobGraph
from clusterdeck.core.protocol.wiring import DataEndpoint, EdgeInput, EdgeOutput, StreamChannel
from clusterdeck.core.rpc import message


@message
@dataclass(frozen=True)
class SubmitTask:
    """One attempt of one subtask, to run in a slot.

    ``inputs_offloaded``: a consumer of thousands of producers would not fit in one frame;
    its ``inputs`` then name the edges with no partitions, and the task asks its JobMaster
    for them page by page (RequestInputPartitions), as Flink offloads a large deployment
    descriptor's shuffle descriptors. ``data_endpoints``: the data services of the
    TaskManagers that wrote its input partitions, each with a capability for this job's
    work dir, for partitions the task cannot see on its own disk (core/dataservice).
    ``splits_given``: ``splits`` is the whole input of this source subtask (a generated
    source's own part), and it asks for no split; otherwise it pulls them one at a time
    (RequestNextInputSplit), in batches of at most ``split_share`` bytes (its fair share
    of the source's input, so a small input is shared by all its subtasks; 0: none known,
    the TaskManager's batch size). ``restore_checkpoint``/``restore_state``: a streaming task
    resumes from that completed checkpoint, with that snapshot of its own (None: it had
    none there); 0: it starts afresh."""

    job_id: str
    graph: JobGraph
    attempt_id: str
    vertex_id: str
    subtask: int
    parallelism: int
    attempt: int
    slot_index: int
    allocation_id: str
    jobmaster: str
    fencing_token: str
    artifact_sha256: str
    work_dir: str
    args: tuple[str, ...] = ()
    inputs: tuple[EdgeInput, ...] = ()
    outputs: tuple[EdgeOutput, ...] = ()
    task_timeout: float = 0.0
    inputs_offloaded: bool = False
    data_endpoints: tuple[DataEndpoint, ...] = ()
    splits: tuple[InputSplit, ...] = ()
    splits_given: bool = False
    split_share: int = 0
    restore_checkpoint: int = 0
    restore_state: StateHandle | None = None
    stream_inputs: tuple[StreamChannel, ...] = ()


@dataclass(frozen=True)
class JobDeployment:
    """The part of a ``SubmitTask`` that is the job's: the same for every attempt of the
    JobMaster's batch."""

    job_id: str
    graph: JobGraph
    jobmaster: str
    fencing_token: str
    artifact_sha256: str
    work_dir: str
    args: tuple[str, ...] = ()
    task_timeout: float = 0.0


@dataclass(frozen=True)
class TaskDeployment:
    """The part of a ``SubmitTask`` that is the attempt's own."""

    attempt_id: str
    vertex_id: str
    subtask: int
    parallelism: int
    attempt: int
    slot_index: int
    allocation_id: str
    inputs: tuple[EdgeInput, ...] = ()
    outputs: tuple[EdgeOutput, ...] = ()
    inputs_offloaded: bool = False
    data_endpoints: tuple[DataEndpoint, ...] = ()
    splits: tuple[InputSplit, ...] = ()
    splits_given: bool = False
    split_share: int = 0  # a file source's: the most bytes of splits in one batch
    restore_checkpoint: int = 0  # a streaming task's: the checkpoint it resumes from
    restore_state: StateHandle | None = None
    stream_inputs: tuple[StreamChannel, ...] = ()  # a streaming consumer's, per producer


_JOB_FIELDS = tuple(f.name for f in fields(JobDeployment))
_TASK_FIELDS = tuple(f.name for f in fields(TaskDeployment))


@message
@dataclass(frozen=True)
class SubmitTasks:
    """JobMaster -> TaskExecutor (ask): the deployments of one turn of the JobMaster's
    mailbox to one TaskManager, in order; answered by one TaskOperationResults with a
    result per task, in the same order. A batch too large for a frame is sent in halves
    (core/rpc/outbox.py)."""

    job: JobDeployment
    tasks: tuple[TaskDeployment, ...]

    @classmethod
    def of(cls, deployments: tuple[SubmitTask, ...]) -> SubmitTasks:
        """One JobMaster's deployments (at least one), its job's part said once."""
        first = deployments[0]
        job = JobDeployment(**{name: getattr(first, name) for name in _JOB_FIELDS})
        for deployment in deployments[1:]:
            if (deployment.job_id, deployment.fencing_token) != \
                    (job.job_id, job.fencing_token):
                raise ValueError(f"{deployment.attempt_id} is not of job {job.job_id}")
        return cls(job, tuple(TaskDeployment(**{name: getattr(d, name) for name in _TASK_FIELDS})
                              for d in deployments))

    def deployments(self) -> tuple[SubmitTask, ...]:
        shared = {name: getattr(self.job, name) for name in _JOB_FIELDS}
        return tuple(SubmitTask(**shared, **{name: getattr(task, name) for name in _TASK_FIELDS})
                     for task in self.tasks)
