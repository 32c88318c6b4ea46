"""The ExecutionGraph and its batch scheduler, as pure code: events in, instructions out.

A JobMaster builds an ``ExecutionGraph`` from a JobGraph, wraps it in a ``Scheduler``
with a restart strategy and an ``InputSplitAssigner``, feeds it what happens (``start``,
``slot_offered``, ``task_state_changed``, ``request_split``, ``taskmanager_lost``,
``restart_due``, ``cancel``) and carries out the instructions each event returns.
``ExecutionGraph.snapshot()`` is what observers draw. After a JobManager restart the
graph is built in a later ``epoch`` and ``Scheduler.restore_finished`` puts back the
subtasks that had finished before ``start``.
"""

from clusterdeck.core.executiongraph.execution import (
    Execution,
    ExecutionVertex,
    SlotRef,
)
from clusterdeck.core.executiongraph.failover import failover_region
from clusterdeck.core.executiongraph.graph import ExecutionGraph, ExecutionJobVertex
from clusterdeck.core.executiongraph.instructions import (
    AllocateSlot,
    AssignSplit,
    CancelAttempt,
    DeployTask,
    ExecutionStateChanged,
    Instruction,
    JobCanceled,
    JobFailed,
    JobFinished,
    JobStatusChanged,
    NewAttempt,
    Rejected,
    ReleaseSlot,
    ScheduleOrUpdateConsumers,
    ScheduleRestart,
    WithdrawSlotRequest,
)
from clusterdeck.core.executiongraph.recovery import FinishedSubtask
from clusterdeck.core.executiongraph.restart import (
    ExponentialDelay,
    FailureRate,
    FixedDelay,
    NoRestart,
    RestartStrategy,
)
from clusterdeck.core.executiongraph.scheduler import (
    FAILOVER_STRATEGIES,
    FailoverStrategy,
    Scheduler,
)
from clusterdeck.core.executiongraph.splitassigner import InputSplitAssigner
from clusterdeck.core.protocol.failures import TASKMANAGER_LOST, FailureRecord, TaskFailure
from clusterdeck.core.protocol.ids import attempt_id_of, epoch_of
from clusterdeck.core.protocol.states import ExecutionState, IllegalTransition, JobStatus
from clusterdeck.core.protocol.wiring import EdgeInput, EdgeOutput, ResultPartitionRef

__all__ = [
    "FAILOVER_STRATEGIES",
    "TASKMANAGER_LOST",
    "AllocateSlot",
    "AssignSplit",
    "CancelAttempt",
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
    "NoRestart",
    "Rejected",
    "ReleaseSlot",
    "RestartStrategy",
    "ResultPartitionRef",
    "ScheduleOrUpdateConsumers",
    "ScheduleRestart",
    "Scheduler",
    "SlotRef",
    "TaskFailure",
    "WithdrawSlotRequest",
    "attempt_id_of",
    "epoch_of",
    "failover_region",
]
