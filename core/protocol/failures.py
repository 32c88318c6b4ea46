"""What went wrong, as data: the failure a TaskManager reports and the record a job keeps.

Exceptions never cross the wire, so a task's exception arrives as its type name, message
and formatted traceback (with the chain of causes already in the text). The job keeps
every failure, in order; the first one is the root cause a user is shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TASKMANAGER_LOST = "TaskManagerLost"
"""``exception_type`` of the failure given to executions whose TaskManager was lost."""
DISK_FULL = "DiskFull"
"""``exception_type`` of a failure for want of space on the TaskManager's disks
(``clusterdeck.core.taskmanager.fulldisk``); the job blocks that TaskManager a while."""
MAX_UNREACHABLE = 16
"""TaskManagers one failure may name as ``unreachable``."""


def unreachable_ids(taskmanager_ids: Iterable[str]) -> tuple[str, ...]:
    """A failure's ``unreachable``: each TaskManager once, in order, at most
    ``MAX_UNREACHABLE`` of them (where it is made, and again where it is received)."""
    return tuple(dict.fromkeys(taskmanager_ids))[:MAX_UNREACHABLE]


@dataclass(frozen=True)
class TaskFailure:
    """Why one task failed, as reported (or, for a lost TaskManager, as concluded).

    ``lost_producers``: the attempt ids of producers whose result partitions the task
    could not find or read (a PartitionNotFound); failover runs them again before it.
    ``unreachable``: the TaskManagers among their hosts whose data service did not answer
    a fetch (not one that answered "not here"); the job blocks them a while, so the
    producers run again elsewhere (core/jobmanager/blocklist.py).
    ``exit_code``: a PySpark script's exit status (``clusterdeck submit`` exits with it,
    as spark-submit does); None for every other failure. ``stdout_path``/``stderr_path``:
    the files on the TaskManager's machine of all that a failed script printed ("" when
    it printed nothing)."""

    exception_type: str
    message: str
    traceback: str = ""
    log_excerpt: tuple[str, ...] = ()
    lost_producers: tuple[str, ...] = ()
    exit_code: int | None = None
    stdout_path: str = ""
    stderr_path: str = ""
    unreachable: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"exception_type": self.exception_type, "message": self.message,
                "traceback": self.traceback, "log_excerpt": list(self.log_excerpt),
                "lost_producers": list(self.lost_producers), "exit_code": self.exit_code,
                "stdout_path": self.stdout_path, "stderr_path": self.stderr_path,
                "unreachable": list(self.unreachable)}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TaskFailure:
        return TaskFailure(exception_type=str(data["exception_type"]),
                           message=str(data.get("message", "")),
                           traceback=str(data.get("traceback", "")),
                           log_excerpt=tuple(str(line) for line in data.get("log_excerpt", ())),
                           lost_producers=tuple(str(attempt_id) for attempt_id
                                                in data.get("lost_producers", ())),
                           exit_code=_exit_code(data.get("exit_code")),
                           stdout_path=str(data.get("stdout_path", "")),
                           stderr_path=str(data.get("stderr_path", "")),
                           unreachable=tuple(str(taskmanager_id) for taskmanager_id
                                             in data.get("unreachable", ())))


def _exit_code(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class FailureRecord:
    """One failure in a job's history: the reported failure plus where and when it struck.

    ``timestamp`` is when the failure was noticed (the attempt's end); ``start_time`` is
    when the attempt got its slot, None if it never did.
    """

    attempt_id: str
    vertex_id: str
    subtask: int
    attempt: int
    taskmanager_id: str | None
    failure: TaskFailure
    timestamp: float
    input_splits: tuple[int, ...] = field(default=())
    slot_index: int | None = None
    start_time: float | None = None

    @property
    def exception_type(self) -> str:
        return self.failure.exception_type

    @property
    def message(self) -> str:
        return self.failure.message

    @property
    def traceback(self) -> str:
        return self.failure.traceback

    @property
    def log_excerpt(self) -> tuple[str, ...]:
        return self.failure.log_excerpt

    @property
    def end_time(self) -> float:
        """The attempt's end: the failure is noticed when the attempt ends."""
        return self.timestamp

    def to_dict(self) -> dict[str, Any]:
        return {"attempt_id": self.attempt_id, "vertex_id": self.vertex_id,
                "subtask": self.subtask, "attempt": self.attempt,
                "taskmanager_id": self.taskmanager_id, "slot_index": self.slot_index,
                "start_time": self.start_time, "end_time": self.timestamp,
                "timestamp": self.timestamp, "input_splits": list(self.input_splits),
                **self.failure.to_dict()}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> FailureRecord:
        """The record back from ``to_dict()``'s flat form (a ``JobResult``'s failures).

        A job that could not start has a root cause with no attempt: its missing fields
        become ``""``, -1 (``subtask``, ``attempt``), None and 0.0 (``timestamp``)."""
        slot_index, start_time = data.get("slot_index"), data.get("start_time")
        taskmanager_id = data.get("taskmanager_id")
        return FailureRecord(
            attempt_id=str(data.get("attempt_id", "")), vertex_id=str(data.get("vertex_id", "")),
            subtask=int(data.get("subtask", -1)), attempt=int(data.get("attempt", -1)),
            taskmanager_id=str(taskmanager_id) if taskmanager_id is not None else None,
            failure=TaskFailure.from_dict(data),
            timestamp=float(data.get("timestamp") or 0.0),
            input_splits=tuple(int(split) for split in data.get("input_splits") or ()),
            slot_index=int(slot_index) if slot_index is not None else None,
            start_time=float(start_time) if start_time is not None else None)
