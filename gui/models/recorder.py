"""What happened to each job, event by event, for the replay.

The bridge hands every ``ExecutionStateEvent`` and ``JobStatusEvent`` it drained to
``JobRecorder.record`` at its tick, so the recorder lives on the GUI thread and needs no
lock. It is bounded twice: per job (the oldest events of a very long job go first; the
job's snapshot still holds every attempt's state timestamps, see gui/models/replay.py) and in
the number of jobs (the job updated longest ago is forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Any

EVENTS_PER_JOB = 50_000
JOBS_KEPT = 100


class JobRecorder:
    """Job events per job id, in arrival order, bounded. GUI thread only."""

    def __init__(self, per_job: int = EVENTS_PER_JOB, jobs: int = JOBS_KEPT) -> None:
        self.per_job = per_job
        self.jobs = jobs
        self._events: OrderedDict[str, deque[Any]] = OrderedDict()

    def record(self, events: Iterable[Any]) -> set[str]:
        """Keep ``events`` (anything with a ``job_id``); returns the ids of the jobs they
        belong to."""
        touched: set[str] = set()
        for event in events:
            job_id = str(getattr(event, "job_id", "") or "")
            if not job_id:
                continue
            kept = self._events.get(job_id)
            if kept is None:
                kept = self._events[job_id] = deque(maxlen=self.per_job)
                while len(self._events) > self.jobs:
                    self._events.popitem(last=False)
            elif job_id not in touched:
                self._events.move_to_end(job_id)
            kept.append(event)
            touched.add(job_id)
        return touched

    def events(self, job_id: str) -> list[Any]:
        """The events kept of ``job_id``, oldest first (a copy)."""
        return list(self._events.get(job_id, ()))

    def count(self, job_id: str) -> int:
        return len(self._events.get(job_id, ()))

    def job_ids(self) -> list[str]:
        return list(self._events)

    def clear(self) -> None:
        self._events.clear()
