"""Which of Spark's pooled Python workers runs a batch attempt's records now, for the
flame graph of its vertex (docs/profiling.md, "One vertex's workers").

Spark does not say which Python worker runs which task, and its workers are pooled: one
runs a task of one attempt, then of another. So a worker says it itself: as it begins a
partition of an attempt's records (``marked``, the first step of each operator's input
and output: no cost per record), it notes the attempt (its Spark job group, a local
property every task carries) in a file named by its pid in the TaskManager's marks
folder; when the partition's records are all read it removes the note. Nested marks of
one partition (an operator's input and output in one Spark stage) count, so the note
stays until the outermost ends. A partition that fails midway leaves its note until the
worker's next partition replaces it, or the worker ends: the TaskManager's reader
(``read_marks``, once per live-numbers tick) drops notes of processes that are gone.

The folder comes to the workers in their environment (``MARKS_VARIABLE``, set with
``spark.executorEnv``), so only workers of this TaskManager's Spark write into it; with
no folder (a worker of another Spark), nothing is noted. What a note holds is data: at
most MAX_NOTE bytes, matched only against the attempt ids the TaskManager runs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

MARKS_VARIABLE = "CLUSTERDECK_WORKER_MARKS"
MAX_MARKS = 256  # notes read in one look: a TaskManager has a few workers per core
MAX_NOTE = 256   # bytes of one note (an attempt id)
FOLDER = "worker-marks"  # in the TaskManager's scratch folder
_JOB_GROUP = "spark.jobGroup.id"
_held: list[Any] = [None, 0]  # in a worker: the attempt noted, and how many marks hold it


def marks_folder(scratch: Path) -> Path:
    """The TaskManager's marks folder (``spark.executorEnv`` gives it to its workers)."""
    return scratch / FOLDER


def marked(records: Iterable[Any]) -> Iterator[Any]:
    """In a Spark Python worker, a partition's records as they are, while the worker's
    note says whose they are (a ``mapPartitions`` function)."""
    attempt_id = _note()
    if attempt_id is None:
        return iter(records)
    return itertools.chain(records, _Unmark(attempt_id))


def _note() -> str | None:
    folder = os.environ.get(MARKS_VARIABLE)
    if not folder:
        return None
    from pyspark.taskcontext import TaskContext

    context = TaskContext.get()
    attempt_id = context.getLocalProperty(_JOB_GROUP) if context is not None else None
    if not attempt_id:
        return None
    if _held[0] == attempt_id:
        _held[1] += 1
        return attempt_id
    note = Path(folder) / str(os.getpid())
    staged = note.with_name(f".{note.name}")
    try:
        staged.write_text(attempt_id[:MAX_NOTE], encoding="utf-8")
        os.replace(staged, note)
    except OSError:
        return None  # a note is a help for profiling, never a cause of failure
    _held[:] = [attempt_id, 1]
    return attempt_id


class _Unmark:
    """The end of a marked partition: iterated once its records are all read."""

    def __init__(self, attempt_id: str) -> None:
        self.attempt_id = attempt_id

    def __iter__(self) -> Iterator[Any]:
        if _held[0] == self.attempt_id:
            _held[1] -= 1
            if _held[1] <= 0:
                _held[:] = [None, 0]
                folder = os.environ.get(MARKS_VARIABLE, "")
                with contextlib.suppress(OSError):
                    (Path(folder) / str(os.getpid())).unlink()
        return iter(())


def read_marks(folder: Path) -> dict[str, list[int]]:
    """On the TaskManager: attempt id -> the pids of the workers running its records now
    (at most MAX_MARKS notes read; those of processes gone are removed)."""
    found: dict[str, list[int]] = {}
    try:
        entries = list(itertools.islice(os.scandir(folder), MAX_MARKS))
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if not _alive(pid):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
            continue
        try:
            with open(entry.path, "rb") as note:
                attempt_id = note.read(MAX_NOTE).decode("utf-8", "replace")
        except OSError:
            continue  # removed as its partition ended
        found.setdefault(attempt_id, []).append(pid)
    return found


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False  # 0 would ask after this process's whole group
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True
