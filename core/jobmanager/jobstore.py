"""The job store: every submitted job's graph, artifact, status and result, on disk.

One folder per job under the cluster's data dir, written atomically, so a restarted
JobManager finds every job it had accepted (recovery builds on this).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core import protocol as p
from core.jobs.graph import JobGraph
from core.rpc import from_data, to_data

ARTIFACT = "artifact.zip"
RECORD = "job.json"


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    graph: JobGraph
    artifact_sha256: str
    args: tuple[str, ...] = ()
    restart_strategy: dict[str, Any] | None = None
    task_timeout: float = 0.0
    submitted_at: float = field(default_factory=time.time)
    status: str = "CREATED"
    result: p.JobResult | None = None

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

    def add(self, record: JobRecord, artifact: bytes) -> None:
        folder = self.folder(record.job_id)
        if folder.exists():
            raise ValueError(f"job {record.job_id} was already submitted")
        folder.mkdir(parents=True)
        _write_atomically(self.artifact_path(record.job_id), artifact)
        self.save(record)

    def save(self, record: JobRecord) -> None:
        data = json.dumps(to_data(record), indent=1).encode()
        _write_atomically(self.folder(record.job_id) / RECORD, data)

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


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
