"""Job retention: which ended jobs leave the cluster, and deleting what they left behind.

An ended job keeps its job store folder (graph, artifact, result), its work dir (result
partitions, collected rows, its files manifest) and its attempt logs. Kept for ever they
fill the disk and the job list outgrows any message, so ``jobstore.retention.max-jobs``
bounds how many ended jobs are kept and ``jobstore.retention.max-age`` how long. The
choice is pure (records, now and the limits in; job ids out); the deletion is file I/O
and runs on a worker thread, never on the Dispatcher's main thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager.jobstore import JobRecord
from clusterdeck.core.protocol.ids import job_file_prefix

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionPolicy:
    max_jobs: int  # ended jobs kept
    max_age: float  # seconds an ended job is kept after it ended

    @classmethod
    def from_config(cls, config: Config) -> RetentionPolicy:
        return cls(config["jobstore.retention.max-jobs"], config["jobstore.retention.max-age"])


def ended_at(record: JobRecord) -> float:
    """When the job ended, as near as its record says: submitted plus its duration (a
    result's duration runs from its start to its end), else when it was submitted."""
    duration = record.result.duration if record.result is not None else None
    return record.submitted_at + (duration or 0.0)


def expired(records: Iterable[JobRecord], now: float, policy: RetentionPolicy) -> list[str]:
    """The ended jobs to delete, oldest first: those beyond the newest ``max_jobs`` ended
    ones, and those that ended more than ``max_age`` ago. A job that has not ended is
    never chosen, however old."""
    ended = sorted((r for r in records if r.is_terminal), key=ended_at)
    excess = max(0, len(ended) - policy.max_jobs)
    return [r.job_id for index, r in enumerate(ended)
            if index < excess or now - ended_at(r) > policy.max_age]


@dataclass(frozen=True)
class JobFiles:
    """Everything on this machine that belongs to one job."""

    job_id: str
    store_folder: Path
    work_dir: Path
    longer_job_ids: tuple[str, ...] = ()  # other jobs whose id starts with this one's + "_"


def is_attempt_log_of(name: str, job_id: str, longer_job_ids: Collection[str] = ()) -> bool:
    """Whether the file ``name`` is one of the job's attempt logs:
    ``<job id>_<vertex>-<subtask>_<attempt>.log`` or a rotated end of one (the
    TaskManager's name for attempt ``<job id>/<vertex>#<i>/a<n>``). A job id may be another's
    followed by ``_`` (both are plain names), so a file of such a longer id is not."""
    return name.startswith(job_file_prefix(job_id)) and not any(
        name.startswith(job_file_prefix(other)) for other in longer_job_ids)


DELETING = ".deleting-"  # a store folder being deleted; the store skips dot-folders


def delete_jobs(batch: Sequence[JobFiles], attempt_logs: Path) -> None:
    """Worker thread: delete the jobs' folders and attempt logs (in ``attempt_logs``).
    A store folder is first renamed out of the store in one step, so a crash halfway
    leaves no half job for the next JobManager to find, only a hidden folder that the
    next deletion removes."""
    roots = set()
    for files in batch:
        roots.add(files.store_folder.parent)
        # FileNotFoundError: never stored (the store could not be written), or gone already
        with contextlib.suppress(FileNotFoundError):
            files.store_folder.rename(files.store_folder.with_name(
                DELETING + files.store_folder.name))
        shutil.rmtree(files.work_dir, ignore_errors=True)
    for root in roots:
        for leftover in root.glob(f"{DELETING}*"):
            shutil.rmtree(leftover, ignore_errors=True)
    try:
        names = os.listdir(attempt_logs)
    except FileNotFoundError:
        names = []
    by_id = {files.job_id: files for files in batch}
    for name in names:  # a job's id is the part of the name before one of its "_"
        owners = (by_id.get(name[:i]) for i, c in enumerate(name) if c == "_")
        if any(f is not None and is_attempt_log_of(name, f.job_id, f.longer_job_ids)
               for f in owners):
            (attempt_logs / name).unlink(missing_ok=True)
    log.info("retention deleted %d ended job(s): %s", len(batch),
             ", ".join(f.job_id for f in batch[:10]) + (" ..." if len(batch) > 10 else ""))
