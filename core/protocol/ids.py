"""The ids of jobs, subtasks and attempts: built and read only here.

* a job id is a plain name, ``JOB_ID``; a client makes one of 16 hex digits;
* a subtask id is ``<vertex id>#<index>``;
* an attempt id is ``<job id>/<subtask id>/a<n>``, or ``<job id>/<subtask id>/e<E>a<n>``
  when made by the JobManager run of epoch E > 0 (every recovery starts a new epoch).

Attempt ids never repeat, not even across JobManager runs: result partitions, collected
rows and printed output are files named after them (``attempt_file_stem``), and a late
file of an old attempt must not mix with a new one's. The ids travel in messages and name
files on disk, so their format is part of the protocol: it does not change.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""What a job id may be: it names folders and topic levels, so no dot, slash or ``#``."""

_ATTEMPT_PART = re.compile(r"(?:e(\d+))?a(\d+)")


def new_job_id() -> str:
    """A fresh job id for a submission that does not name its own."""
    return uuid.uuid4().hex[:16]


def subtask_id(vertex_id: str, subtask: int) -> str:
    return f"{vertex_id}#{subtask}"


def parse_subtask_id(subtask_id: str) -> tuple[str, int]:
    """The vertex id and index of a subtask id; raises ValueError for a string that is
    not one."""
    vertex_id, hash_sign, index = subtask_id.rpartition("#")
    if not hash_sign or not index.isdigit():
        raise ValueError(f"{subtask_id!r} is not a subtask id (vertex#index)")
    return vertex_id, int(index)


def attempt_id_of(job_id: str, vertex_id: str, subtask: int, attempt: int,
                  epoch: int = 0) -> str:
    """The id of attempt ``attempt`` made in epoch ``epoch``; epoch 0 keeps the short form."""
    return f"{job_id}/{subtask_id(vertex_id, subtask)}/{_attempt_part(attempt, epoch)}"


def _attempt_part(attempt: int, epoch: int) -> str:
    marker = f"e{epoch}" if epoch else ""
    return f"{marker}a{attempt}"


def attempt_part_of(attempt_id: str) -> str:
    """An attempt id's last part, which attempt of its subtask it is: ``a3``, or ``e1a3``
    when made in epoch 1."""
    return attempt_id.rpartition("/")[2]


@dataclass(frozen=True)
class AttemptId:
    """An attempt id taken apart; ``str()`` puts it back together."""

    job_id: str
    vertex_id: str
    subtask: int
    attempt: int
    epoch: int = 0

    @property
    def subtask_id(self) -> str:
        return subtask_id(self.vertex_id, self.subtask)

    @property
    def part(self) -> str:
        """The last part alone (``a3``, ``e1a3``): which attempt of its subtask it is."""
        return _attempt_part(self.attempt, self.epoch)

    def __str__(self) -> str:
        return attempt_id_of(self.job_id, self.vertex_id, self.subtask, self.attempt,
                             self.epoch)


def parse_attempt_id(attempt_id: str) -> AttemptId | None:
    """The parts of an attempt id; None for a string that is not one."""
    job_id, slash, rest = attempt_id.partition("/")
    middle, slash_too, last = rest.rpartition("/")
    match = _ATTEMPT_PART.fullmatch(last)
    if not slash or not slash_too or match is None or not JOB_ID.fullmatch(job_id):
        return None
    try:
        vertex_id, subtask = parse_subtask_id(middle)
    except ValueError:
        return None
    return AttemptId(job_id, vertex_id, subtask, int(match.group(2)), int(match.group(1) or 0))


def attempt_order(part: str) -> tuple[int, int] | None:
    """Where an attempt's last part (``a3``, ``e1a3``) stands among its subtask's
    attempts: a later epoch first, then a later attempt in it; None for a part that is
    not an attempt's. An attempt made later replaced every one before it."""
    match = _ATTEMPT_PART.fullmatch(part)
    return (int(match.group(1) or 0), int(match.group(2))) if match else None


def epoch_of(attempt_id: str) -> int | None:
    """The epoch an attempt id was issued in; None when its last part is not an attempt's.
    Reads the last part only, so it also answers for an id of another job."""
    match = _ATTEMPT_PART.fullmatch(attempt_part_of(attempt_id))
    return int(match.group(1) or 0) if match else None


def attempt_file_stem(attempt_id: str) -> str:
    """The attempt id as a file name: ``job_vertex-0_a1`` for ``job/vertex#0/a1``."""
    return attempt_id.replace("/", "_").replace("#", "-")


def job_file_prefix(job_id: str) -> str:
    """How the file stem of every attempt of job ``job_id`` starts (``job_``); a longer job
    id may start the same way, as job ids may hold ``_``."""
    return attempt_file_stem(f"{job_id}/")
