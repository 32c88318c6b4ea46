"""The ExecutionGraph and its batch scheduler, as pure code: events in, instructions out.

A JobMaster builds an ``ExecutionGraph`` from a JobGraph, wraps it in a ``Scheduler``
with a restart strategy and an ``InputSplitAssigner``, feeds it what happens (``start``,
``slot_offered``, ``task_state_changed``, ``request_split``, ``taskmanager_lost``,
``restart_due``, ``cancel``) and carries out the instructions each event returns.
``ExecutionGraph.snapshot()`` is what observers draw. After a JobManager restart the
graph is built in a later ``epoch`` and ``Scheduler.restore_finished`` puts back the
subtasks that had finished before ``start``.
"""

from core.executiongraph.execution import (
    Execution,
    ExecutionVertex,
    SlotRef,
    attempt_id_of,
    epoch_of,
)
from core.executiongraph.failover import failover_region
from core.executiongraph.failures import TASKMANAGER_LOST, FailureRecord, TaskFailure
from core.executiongraph.graph import ExecutionGraph, ExecutionJobVertex
from core.executiongraph.instructions import (
    CancelTask,
    DeployTask,
    ExecutionStateChanged,
    Instruction,
    JobCanceled,
    JobFailed,
    JobFinished,
    JobStatusChanged,
    NewAttempt,
    NextInputSplit,
    Rejected,
    ReleaseSlot,
    RequestSlot,
    ScheduleOrUpdateConsumers,
    ScheduleRestart,
)
from core.executiongraph.recovery import FinishedSubtask
from core.executiongraph.restart import (
    ExponentialDelay,
    FailureRate,
    FixedDelay,
    NoRestart,
    RestartStrategy,
)
from core.executiongraph.scheduler import FAILOVER_STRATEGIES, FailoverStrategy, Scheduler
from core.executiongraph.splits import InputSplitAssigner
from core.executiongraph.states import ExecutionState, IllegalTransition, JobStatus
from core.executiongraph.wiring import EdgeInput, EdgeOutput, ResultPartitionRef

__all__ = [
    "FAILOVER_STRATEGIES",
    "TASKMANAGER_LOST",
    "CancelTask",
    "DeployTask",
    "EdgeInput",
    "EdgeOutput",
    "Execution",
    "ExecutionGraph",
    "ExecutionJobVertex",
    "ExecutionState",
    "ExecutionStateChanged",
    "ExecutionVertex",
    "ExponentialDelay",
    "FailoverStrategy",
    "FailureRate",
    "FailureRecord",
    "FinishedSubtask",
    "FixedDelay",
    "IllegalTransition",
    "InputSplitAssigner",
    "Instruction",
    "JobCanceled",
    "JobFailed",
    "JobFinished",
    "JobStatus",
    "JobStatusChanged",
    "NewAttempt",
    "NextInputSplit",
    "NoRestart",
    "Rejected",
    "ReleaseSlot",
    "RequestSlot",
    "RestartStrategy",
    "ResultPartitionRef",
    "ScheduleOrUpdateConsumers",
    "ScheduleRestart",
    "Scheduler",
    "SlotRef",
    "TaskFailure",
    "attempt_id_of",
    "epoch_of",
    "failover_region",
]
