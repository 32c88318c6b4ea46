"""Recovery after a JobManager restart: put back the subtasks that had already finished.

The JobMaster persists one ``FinishedSubtask`` for every subtask that reaches FINISHED.
A new leader builds a fresh ExecutionGraph in a later epoch, restores those records
before ``start()``, and the scheduler then runs only what is missing: the restored
attempts keep their ids, so consumers read the partitions they wrote in the shared work
directory, and the splits they consumed are never handed out again. Splits that source
subtasks had taken without finishing were never recorded, so they are still in the
fresh pool.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from clusterdeck.core.executiongraph.execution import Execution
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.executiongraph.splitassigner import InputSplitAssigner
from clusterdeck.core.protocol.ids import attempt_id_of, epoch_of, subtask_id
from clusterdeck.core.protocol.states import ExecutionState


@dataclass(frozen=True)
class FinishedSubtask:
    """What the job store keeps of one finished subtask; ``result`` is opaque here (a
    TaskResult in practice) and ``input_splits`` are the ids of the splits it read."""

    vertex_id: str
    subtask: int
    attempt_id: str
    attempt: int
    result: Any = None
    input_splits: tuple[int, ...] = ()


def restore_finished(graph: ExecutionGraph, splits: InputSplitAssigner,
                     records: Iterable[FinishedSubtask]) -> list[Execution]:
    """Make each record's attempt the FINISHED current attempt of its subtask and take
    its splits out of the pool. All records are checked first: on a ValueError (a record
    that does not fit this job) nothing has changed."""
    records = list(records)
    _check(graph, splits, records)
    restored = []
    for record in records:
        execution = Execution(graph.job_id, record.vertex_id, record.subtask, record.attempt,
                              state=ExecutionState.FINISHED, result=record.result,
                              epoch=epoch_of(record.attempt_id) or 0, restored=True)
        execution.input_splits = splits.restore_consumed(record.vertex_id, record.subtask,
                                                         record.input_splits)
        graph.restore(execution)
        restored.append(execution)
    return restored


def _check(graph: ExecutionGraph, splits: InputSplitAssigner,
           records: list[FinishedSubtask]) -> None:
    seen_subtasks: set[tuple[str, int]] = set()
    seen_splits: set[tuple[str, int]] = set()
    for record in records:
        where = f"restored {record.attempt_id!r}"
        if record.vertex_id not in graph.vertices:
            raise ValueError(f"{where}: job {graph.job_id} has no vertex {record.vertex_id!r}")
        if not 0 <= record.subtask < graph.vertex(record.vertex_id).parallelism:
            raise ValueError(f"{where}: {record.vertex_id!r} has no subtask {record.subtask}")
        epoch = epoch_of(record.attempt_id)
        if epoch is None or record.attempt_id != attempt_id_of(
                graph.job_id, record.vertex_id, record.subtask, record.attempt, epoch):
            raise ValueError(f"{where}: not attempt {record.attempt} of "
                             f"{subtask_id(record.vertex_id, record.subtask)} "
                             f"in job {graph.job_id}")
        if epoch >= graph.epoch:
            raise ValueError(f"{where}: epoch {epoch} is not before this run's "
                             f"epoch {graph.epoch}")
        if (record.vertex_id, record.subtask) in seen_subtasks:
            raise ValueError(f"{where}: {subtask_id(record.vertex_id, record.subtask)} is "
                             f"restored twice")
        seen_subtasks.add((record.vertex_id, record.subtask))
        pool = {split.split_id for split in splits.remaining(record.vertex_id)}
        for split_id in record.input_splits:
            if split_id not in pool or (record.vertex_id, split_id) in seen_splits:
                raise ValueError(f"{where}: split {split_id} of {record.vertex_id!r} is "
                                 f"unknown or consumed twice")
            seen_splits.add((record.vertex_id, split_id))
