"""What a failure leaves behind, for the ``Scheduler``: its record, the result partitions it
takes with it, the input splits nobody can read, and what a full restart runs again.

Pure functions of the ExecutionGraph (and the split assigner); only the scheduler calls
them, on the JobMaster's main thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from clusterdeck.core.executiongraph.execution import Execution, ExecutionVertex
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.executiongraph.splitassigner import InputSplitAssigner
from clusterdeck.core.protocol.failures import TASKMANAGER_LOST, FailureRecord, TaskFailure
from clusterdeck.core.protocol.states import ExecutionState

# The cause a producer's attempt records when it runs again because the partitions it
# wrote went with its TaskManager.
PARTITIONS_LOST_WITH = "result partitions lost with TaskManager"


def record_failure(graph: ExecutionGraph, execution: Execution, failure: TaskFailure,
                   now: float) -> FailureRecord:
    """Add the failure of ``execution`` to the job's failure history; returns the record."""
    record = FailureRecord(
        attempt_id=execution.attempt_id, vertex_id=execution.vertex_id,
        subtask=execution.subtask, attempt=execution.attempt,
        taskmanager_id=execution.taskmanager_id, failure=failure, timestamp=now,
        input_splits=tuple(split.split_id for split in execution.input_splits),
        slot_index=execution.slot.slot_index if execution.slot else None,
        start_time=execution.start_time)
    graph.failures.append(record)
    return record


def stranded_splits(graph: ExecutionGraph, splits: InputSplitAssigner,
                    execution: Execution) -> TaskFailure | None:
    """The last subtask of a source finishing while splits are left: they are bound
    to hosts where none of its subtasks ran (files on one machine's own disk). Its
    failure says so, and failover runs it again, perhaps there; a job never ends
    FINISHED with part of its input."""
    vertex = graph.vertex(execution.vertex_id)
    # the others all finished: this one is the only unfinished subtask
    if vertex.unfinished != 1 or execution.state is ExecutionState.FINISHED:
        return None
    left = splits.remaining(execution.vertex_id)
    if not left:
        return None
    hosts = sorted({host for split in left for host in split.hosts})
    return TaskFailure("InputSplitUnreadable", (
        f"{len(left)} input split(s) of {execution.vertex_id} were read by no subtask, "
        f"e.g. {left[0].path or left[0].split_id}: they are files on the disk of "
        f"{', '.join(hosts) or 'no known host'}, and no subtask of {execution.vertex_id} "
        f"ran there. Start a TaskManager there, or name the input so every TaskManager "
        f"reads it (a URL such as file:///shared/..., hdfs://..., s3a://...)."))


def without_usable_result(graph: ExecutionGraph) -> list[ExecutionVertex]:
    """What a full restart runs again: every subtask that has not finished, and
    finished ones whose lost partitions a consumer still needs."""
    return [subtask for subtask in graph.subtasks()
            if not subtask.current.has_usable_partitions
            and (subtask.current.state is not ExecutionState.FINISHED
                 or graph.partitions_needed(subtask))]


def lose_partitions(graph: ExecutionGraph, taskmanager_id: str, cause: str, now: float,
                    kept: Callable[[Execution], bool]) -> list[str]:
    """Mark the partitions of finished subtasks on a lost TaskManager as gone, unless
    ``kept`` says they outlive it; those a consumer still needs count as failed, with the
    loss as the cause on the attempt, so they are computed again (their ids)."""
    needed: list[str] = []
    for subtask in graph.subtasks():
        execution = subtask.current
        if (execution.state is not ExecutionState.FINISHED
                or execution.taskmanager_id != taskmanager_id or kept(execution)):
            continue
        execution.partitions_lost = True
        if graph.partitions_needed(subtask):
            execution.failure = record_failure(graph, execution, TaskFailure(
                TASKMANAGER_LOST, f"{PARTITIONS_LOST_WITH} {taskmanager_id}: {cause}"), now)
            needed.append(subtask.id)
    return needed


def partitions_not_found(graph: ExecutionGraph, consumer: Execution,
                         lost_producers: Iterable[str]) -> None:
    """The consumer could not find or read the partitions of these producer attempts
    (Flink's PartitionNotFound): they count as lost, so the failover region runs the
    producers again before the consumer instead of rerunning the consumer against the
    same missing files. Only the consumer's own producers' current, finished attempts
    are marked; a producer already running again is left alone."""
    named = frozenset(lost_producers)
    if not named:
        return
    for producer in graph.producers_of(graph.subtask(consumer.vertex_id, consumer.subtask)):
        if (producer.current.attempt_id in named
                and producer.current.state is ExecutionState.FINISHED):
            producer.current.partitions_lost = True
