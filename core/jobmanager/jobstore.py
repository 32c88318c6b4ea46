"""The job store: every submitted job's graph, artifact, status and result, on disk.

One folder per job under the cluster's data dir, written atomically and synced (the
file, then its folder), so a restarted JobManager finds every job it had accepted, even
after a power cut (recovery builds on this). A folder that cannot be read back as a job is
reported and set aside as ``<name>.broken``: it never stops the other jobs from loading,
and it is not read again on every start.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clusterdeck.core.executiongraph.recovery import FinishedSubtask
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.ids import JOB_ID
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import from_data, to_data

log = logging.getLogger(__name__)
ARTIFACT = "artifact.zip"
RECORD = "job.json"
PROGRESS = "progress.jsonl"
SET_ASIDE = ".broken"  # never part of a job id (ids.JOB_ID has no dot)
BROKEN_RECORD = "BrokenJobRecord"  # root cause type of a job whose stored record is broken
STORE_WRITE_FAILED = "JobStoreWriteError"  # root cause type of a job whose end was not stored


class BrokenRecordError(ValueError):
    """A job folder of the store cannot be run as a job; the message says why."""


class JobStoreFull(OSError):
    """The job store's disk is full: named as such, for the submitter or the job's root
    cause, rather than a bare ENOSPC on a file deep inside it."""


@contextmanager
def _naming_a_full_store(root: Path) -> Iterator[None]:
    try:
        yield
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT) or isinstance(error, JobStoreFull):
            raise
        where = f": {error.filename}" if error.filename else ""
        raise JobStoreFull(error.errno, f"the JobManager's job store {root} is full "
                           f"({error.strerror}{where})") from error


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    graph: JobGraph
    artifact_sha256: str
    args: tuple[str, ...] = ()
    restart_strategy: dict[str, Any] | None = None
    task_timeout: float = 0.0
    submitted_at: float = field(default_factory=time.time)
    status: JobStatus = JobStatus.CREATED
    result: p.JobResult | None = None
    epoch: int = 0  # one more on every JobManager run of the job: attempt ids never repeat

    @property
    def is_terminal(self) -> bool:
        return self.status.is_terminal

    def summary(self, finished: int = 0, total: int = 0) -> p.JobSummary:
        result = self.result
        if result is not None:
            finished, total = result.finished, result.total
        return p.JobSummary(
            job_id=self.job_id, name=self.graph.name, kind=str(self.graph.kind),
            status=self.status, submitted_at=self.submitted_at, finished=finished,
            total=total or sum(v.parallelism for v in self.graph.vertices),
            duration=result.duration if result else None)

    def submission(self) -> p.SubmitJob:
        """The SubmitJob that stored this job (its upload long gone): a stored job is
        checked on recovery as a submission is checked, since a record written by an
        older version never was."""
        return p.SubmitJob(self.job_id, self.graph, "", self.artifact_sha256, self.args,
                           self.restart_strategy, self.task_timeout)

    def matches(self, request: p.SubmitJob) -> bool:
        """Whether ``request`` is this job's own submission sent again, as a client does
        when the first answer was lost; compared as data, so a record read back from disk
        matches what the client still holds."""
        return (request.artifact_sha256 == self.artifact_sha256
                and to_data(request.graph) == to_data(self.graph)
                and tuple(request.args) == tuple(self.args)
                and (request.restart_strategy or None) == (self.restart_strategy or None)
                and request.task_timeout == self.task_timeout)


@dataclass(frozen=True)
class SetAside:
    """A job folder that could not be read back as a job, and where it was moved."""

    name: str
    reason: str
    moved_to: Path | None  # None: it could not be moved, so it is reported again next start


@dataclass(frozen=True)
class StoredJobs:
    """What a JobManager finds in the store when it starts, oldest job first."""

    records: list[JobRecord]
    set_aside: list[SetAside]


class JobStore:
    """Used on the Dispatcher's main thread only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def folder(self, job_id: str) -> Path:
        return self.root / job_id

    def artifact_path(self, job_id: str) -> Path:
        return self.folder(job_id) / ARTIFACT

    def progress(self, job_id: str) -> ProgressLog:
        return ProgressLog(self.folder(job_id) / PROGRESS)

    def add(self, record: JobRecord, artifact: bytes) -> None:
        """Store a new job; on any failure (a full disk) nothing of it is left behind, so
        the client can submit it again under the same id."""
        folder = self.folder(record.job_id)
        if folder.exists():
            raise ValueError(f"job {record.job_id} was already submitted")
        try:
            with _naming_a_full_store(self.root):
                folder.mkdir(parents=True)
                write_atomically(self.artifact_path(record.job_id), artifact)
                self.save(record)
                fsync_directory(self.root)  # the job's folder must survive a power cut
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def save(self, record: JobRecord) -> None:
        data = json.dumps(to_data(record), indent=1).encode()
        with _naming_a_full_store(self.root):
            write_atomically(self.folder(record.job_id) / RECORD, data)

    def update(self, record: JobRecord, **changes: Any) -> JobRecord:
        updated = replace(record, **changes)
        self.save(updated)
        return updated

    def load_all(self) -> StoredJobs:
        """Every job of the store. A folder that is not a readable job of its own name is
        logged and set aside, never skipped silently: it may be a job a client waits for."""
        records: list[JobRecord] = []
        set_aside: list[SetAside] = []
        for folder in sorted(self.root.iterdir()):
            if not folder.is_dir() or folder.name.startswith(".") \
                    or folder.name.endswith(SET_ASIDE):
                continue
            try:
                records.append(self._load(folder))
            except BrokenRecordError as error:
                set_aside.append(self._set_aside(folder, str(error)))
        return StoredJobs(sorted(records, key=lambda r: r.submitted_at), set_aside)

    def load(self, job_id: str) -> JobRecord:
        """One job's record, read as a restarted JobManager reads it (any thread: it only
        reads); BrokenRecordError says what is wrong, or that there is no such job."""
        if not JOB_ID.fullmatch(job_id) or not self.folder(job_id).is_dir():
            raise BrokenRecordError(f"no job {job_id[:80]!r} in the job store {self.root}")
        return self._load(self.folder(job_id))

    def _load(self, folder: Path) -> JobRecord:
        if not JOB_ID.fullmatch(folder.name):
            raise BrokenRecordError(f"{folder.name!r} is not a job id")
        try:
            text = (folder / RECORD).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BrokenRecordError(f"it has no {RECORD}: a submission cut short before it "
                                    f"was stored") from None
        except (OSError, ValueError) as error:  # ValueError: not UTF-8
            raise BrokenRecordError(f"its {RECORD} cannot be read: {error}") from None
        try:
            record = from_data(json.loads(text), JobRecord)
        except (ValueError, RecursionError) as error:  # RecursionError: nested too deep
            raise BrokenRecordError(f"its {RECORD} is not a job record: "
                                    f"{type(error).__name__}: {str(error)[:300]}") from None
        if record.job_id != folder.name:
            raise BrokenRecordError(f"its {RECORD} names job {record.job_id[:80]!r}")
        return record

    def _set_aside(self, folder: Path, reason: str) -> SetAside:
        target = folder.with_name(folder.name + SET_ASIDE)
        copy = 1
        while target.exists():
            copy += 1
            target = folder.with_name(f"{folder.name}.{copy}{SET_ASIDE}")
        try:
            folder.rename(target)
            fsync_directory(self.root)
        except OSError as error:
            log.error("job store: folder %s is broken (%s) and cannot be set aside: %s",
                      folder, reason, error)
            return SetAside(folder.name, reason, None)
        log.error("job store: folder %s is broken (%s); set aside as %s", folder, reason,
                  target.name)
        return SetAside(folder.name, reason, target)

    def check_artifact(self, record: JobRecord) -> None:
        """Raise BrokenRecordError unless the job's artifact is there and is the one that
        was submitted: a job that cannot be run must fail now, not on every TaskManager."""
        path = self.artifact_path(record.job_id)
        try:
            with open(path, "rb") as artifact:
                sha256 = hashlib.file_digest(artifact, "sha256").hexdigest()
        except FileNotFoundError:
            raise BrokenRecordError(f"its artifact {path} is missing") from None
        except OSError as error:
            raise BrokenRecordError(f"its artifact {path} cannot be read: {error}") from None
        if sha256 != record.artifact_sha256:
            raise BrokenRecordError(f"its artifact {path} is not the one submitted (SHA-256 "
                                    f"{sha256}, submitted {record.artifact_sha256[:64]})")


class ProgressLog:
    """The finished subtasks of one job, appended as they finish, so a restarted
    JobManager resumes the job instead of starting it over. Appends run on one writer
    thread of their own: the JobMaster's main thread never waits for the disk. The
    writer commits what has queued up meanwhile with one fsync (a group commit): one per
    subtask would hold back a job that finishes hundreds of subtasks a second."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="progress")
        # Appends and pops are atomic across threads. The records are frozen: the writer
        # encodes them, off the JobMaster's main thread.
        self._queued: deque[FinishedSubtask] = deque()
        self._commit_due = False  # a commit is submitted that has not started draining

    def append(self, finished: FinishedSubtask) -> None:
        self._queued.append(finished)
        if not self._commit_due:  # one commit per batch, not a submit per subtask
            self._commit_due = True
            self._writer.submit(self._write_queued)

    def _write_queued(self) -> None:
        self._commit_due = False  # before draining: what comes after asks for another
        lines = []
        while self._queued:
            finished = self._queued.popleft()
            lines.append(json.dumps(to_data(_Finished(
                finished.vertex_id, finished.subtask, finished.attempt_id, finished.attempt,
                finished.result, finished.input_splits))))
        if not lines:
            return  # an earlier commit took them
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> list[FinishedSubtask]:
        """The latest record per subtask; a torn last line (a crash mid-write) is skipped."""
        latest: dict[tuple[str, int], FinishedSubtask] = {}
        if not self.path.exists():
            return []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = from_data(json.loads(line), _Finished)
            except ValueError:
                continue
            latest[(record.vertex_id, record.subtask)] = FinishedSubtask(
                record.vertex_id, record.subtask, record.attempt_id, record.attempt,
                record.result, record.input_splits)
        return list(latest.values())

    def close(self) -> None:
        self._writer.shutdown(wait=True)


@dataclass(frozen=True)
class _Finished:
    """FinishedSubtask with its result typed, so the codec can check what it reads back."""

    vertex_id: str
    subtask: int
    attempt_id: str
    attempt: int
    result: p.TaskResult | None = None
    input_splits: tuple[int, ...] = ()


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: readers see the old or the new content, never a
    torn one, and once this returns the new content survives a crash or power cut (the
    data is synced before the rename, the folder's entry after it)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def fsync_directory(folder: Path) -> None:
    """Sync a folder's entries: a rename or a new file is durable only then (POSIX)."""
    if os.name == "nt":  # pragma: no cover - Windows cannot open a folder; NTFS journals it
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
