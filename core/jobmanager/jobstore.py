"""The job store: every submitted job's graph, artifact, status and result, on disk.

One folder per job under the cluster's data dir, written atomically, so a restarted
JobManager finds every job it had accepted (recovery builds on this).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clusterdeck.core.executiongraph.recovery import FinishedSubtask
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import from_data, to_data

ARTIFACT = "artifact.zip"
RECORD = "job.json"
PROGRESS = "progress.jsonl"


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
        folder = self.folder(record.job_id)
        if folder.exists():
            raise ValueError(f"job {record.job_id} was already submitted")
        folder.mkdir(parents=True)
        write_atomically(self.artifact_path(record.job_id), artifact)
        self.save(record)

    def save(self, record: JobRecord) -> None:
        data = json.dumps(to_data(record), indent=1).encode()
        write_atomically(self.folder(record.job_id) / RECORD, data)

    def update(self, record: JobRecord, **changes: Any) -> JobRecord:
        updated = replace(record, **changes)
        self.save(updated)
        return updated

    def load_all(self) -> list[JobRecord]:
        records = []
        for path in sorted(self.root.glob(f"*/{RECORD}")):
            try:
                records.append(from_data(json.loads(path.read_text()), JobRecord))
            except (ValueError, OSError):
                continue  # a half-written or foreign folder is not a job
        return sorted(records, key=lambda r: r.submitted_at)


class ProgressLog:
    """The finished subtasks of one job, appended as they finish, so a restarted
    JobManager resumes the job instead of starting it over. Appends run on one writer
    thread of their own: the JobMaster's main thread never waits for the disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="progress")

    def append(self, finished: FinishedSubtask) -> None:
        line = json.dumps(to_data(_Finished(finished.vertex_id, finished.subtask,
                                            finished.attempt_id, finished.attempt,
                                            finished.result, finished.input_splits)))
        self._writer.submit(self._write, line)

    def _write(self, line: str) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
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
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
