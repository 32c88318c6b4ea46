"""Recordings handed over: one self-contained file, and what it holds, read offline.

An export is an SQLite backup of the cluster's recording (consistent while the recorder
writes), narrowed to some jobs when asked, in rollback-journal mode so that it is one
file. Reading one needs no cluster and no broker: the payloads are decoded with the
wire codec, as the window does.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.recorder.store import connect
from clusterdeck.core.rpc import RpcError, decode

MARGIN = 3.0  # seconds of everything else kept on either side of the chosen jobs (the
# TaskManagers' last live numbers of a job come up to a second after its end)
FRAME_LIMIT = 64 * 1024 * 1024  # what a recorded payload may be when read back


class RecordingError(Exception):
    """Not a recording, or not one that holds what was asked for."""


@dataclass(frozen=True)
class JobSummary:
    job_id: str
    name: str
    status: str
    root_cause: str


@dataclass(frozen=True)
class ProcessPeak:
    """The most CPU and memory one process used while it was recorded."""

    process: str
    samples: int
    cpu_percent: float
    rss: int


@dataclass(frozen=True)
class RecordingSummary:
    cluster: str
    first: float | None
    last: float | None
    messages: int
    log_lines: int
    jobs: tuple[JobSummary, ...]
    processes: tuple[ProcessPeak, ...] = ()


def export(source: Path, target: Path, job_ids: Sequence[str] = ()) -> RecordingSummary:
    """Write ``source``'s recording (of ``job_ids`` only, when given) to ``target``."""
    try:
        # Readable by its owner only, like the logs it holds (job arguments, paths, errors).
        target.touch(mode=0o600, exist_ok=False)
    except FileExistsError:
        raise RecordingError(f"{target} exists; choose another name") from None
    try:
        with closing(connect(source, readonly=True)) as original, \
                closing(sqlite3.connect(target)) as copy:
            original.backup(copy)
        narrow(target, job_ids)
        finish(target)
        return describe(target)
    except BaseException as error:
        for leftover in (target, *(target.with_name(target.name + end)
                                   for end in ("-wal", "-shm", "-journal"))):
            leftover.unlink(missing_ok=True)
        if isinstance(error, sqlite3.DatabaseError):
            raise RecordingError(f"{source} is not a recording: {error}") from None
        raise


def narrow(path: Path, job_ids: Sequence[str]) -> None:
    """Keep the rows of ``job_ids`` and everything else from the time they ran."""
    if not job_ids:
        return
    marks = ",".join("?" * len(job_ids))
    with closing(sqlite3.connect(path)) as db, db:
        first, last = db.execute(f"SELECT min(at), max(at) FROM messages WHERE job_id IN "
                                 f"({marks})", list(job_ids)).fetchone()
        if first is None:
            raise RecordingError(f"the recording holds nothing of job {', '.join(job_ids)}")
        db.execute(f"DELETE FROM messages WHERE (job_id IS NOT NULL AND job_id NOT IN "
                   f"({marks})) OR (job_id IS NULL AND (at < ? OR at > ?))",
                   [*job_ids, first - MARGIN, last + MARGIN])
        for table in ("logs", "metrics"):
            db.execute(f"DELETE FROM {table} WHERE at < ? OR at > ?", (first - MARGIN,
                                                                       last + MARGIN))


def finish(path: Path) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('exported', ?)", (str(time.time()),))
        db.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
        db.execute("VACUUM")


def describe(path: Path) -> RecordingSummary:
    """What a recording holds: its span, its counts and how each of its jobs ended."""
    try:
        with closing(connect(path, readonly=True)) as db:
            cluster = db.execute("SELECT value FROM meta WHERE key = 'cluster'").fetchone()
            first, last, count = db.execute(
                "SELECT min(at), max(at), count(*) FROM messages").fetchone()
            lines = db.execute("SELECT count(*) FROM logs").fetchone()[0]
            peaks = db.execute(
                "SELECT process, count(*), max(cpu_percent), max(rss) FROM metrics "
                "GROUP BY process ORDER BY process").fetchall()
            results = db.execute(
                "SELECT payload FROM messages WHERE topic LIKE 'state/results/%' "
                "ORDER BY id").fetchall()
    except sqlite3.DatabaseError as error:
        raise RecordingError(f"{path} is not a recording: {error}") from None
    jobs: dict[str, JobSummary] = {}
    for (payload,) in results:
        summary = _job_summary(bytes(payload))
        if summary is not None:
            jobs[summary.job_id] = summary
    return RecordingSummary(cluster[0] if cluster else "?", first, last, count, lines,
                            tuple(jobs.values()), tuple(ProcessPeak(*row) for row in peaks))


def _job_summary(payload: bytes) -> JobSummary | None:
    if not payload:
        return None  # a cleared retained result
    try:
        result = decode(payload, FRAME_LIMIT).message
    except RpcError:
        return None
    if not isinstance(result, p.JobResult):
        return None
    cause = result.root_cause or {}
    text = f"{cause.get('exception_type', '')}: {cause.get('message', '')}".strip(": ")
    return JobSummary(result.job_id, result.name, str(result.status), text)
