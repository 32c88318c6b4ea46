"""A cluster's recording: one SQLite database (WAL) of what crossed its broker and what
its processes logged.

Messages are kept as they travelled (topic and payload bytes, never decoded here), so
recording costs no decoding and a reader decodes with the wire codec when it shows them.
One writer (the recorder's writer thread) owns the connection; readers open their own.
The database stays within ``max_bytes`` and ``max_age`` (retention): the oldest rows go
first.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 1
FILE_NAME = "recording.sqlite"
PRUNE_SHARE = 0.1  # rows dropped per prune, of the oldest ones, when over the size

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, topic TEXT NOT NULL, job_id TEXT,
    payload BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS messages_at ON messages (at);
CREATE INDEX IF NOT EXISTS messages_job ON messages (job_id) WHERE job_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS logs (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, process TEXT NOT NULL, line TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS logs_at ON logs (at);
CREATE TABLE IF NOT EXISTS metrics (
    at REAL NOT NULL, process TEXT NOT NULL, cpu_percent REAL NOT NULL,
    rss INTEGER NOT NULL, threads INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS metrics_at ON metrics (at);
"""
_TABLES = ("messages", "logs", "metrics")


@dataclass(frozen=True)
class Message:
    """One message as it crossed the broker; ``topic`` relative to the cluster's root."""

    at: float
    topic: str
    payload: bytes


@dataclass(frozen=True)
class LogLine:
    at: float
    process: str
    line: str


@dataclass(frozen=True)
class Sample:
    """CPU (percent of one core since the last sample), memory and threads of a process."""

    at: float
    process: str
    cpu_percent: float
    rss: int
    threads: int


_JOB_TOPICS = {("events", "jobs"), ("events", "output"), ("state", "jobs"),
               ("state", "results")}


def job_of(topic: str) -> str | None:
    """The job a topic concerns (core/protocol/topics.py: a job's events, output,
    snapshot and result), if any."""
    parts = topic.split("/", 3)
    if len(parts) >= 3 and (parts[0], parts[1]) in _JOB_TOPICS:
        return parts[2]
    return None


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        if not path.is_file():
            raise FileNotFoundError(f"no recording at {path}")
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    else:
        # Owner only, like the logs it holds; SQLite gives its -wal and -shm the same mode.
        path.touch(mode=0o600, exist_ok=True)
        # Opened where the recorder starts, then used by its writer thread alone.
        connection = sqlite3.connect(path, check_same_thread=False)
        # WAL: a kill -9 of the writer loses at most the last open transaction, and
        # readers (an export, the window) read while it writes.
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.executescript(_SCHEMA)
        connection.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                           (str(SCHEMA_VERSION),))
    connection.execute("PRAGMA busy_timeout=5000")
    return connection


class RecordingStore:
    """The writer's side: batched inserts and retention. One thread only."""

    def __init__(self, path: Path, cluster_id: str, *, max_bytes: int,
                 max_age: float) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._db = connect(path)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('cluster', ?)", (cluster_id,))
        self._db.commit()

    def add(self, messages: Sequence[Message], lines: Sequence[LogLine],
            samples: Sequence[Sample] = ()) -> None:
        with self._db:
            self._db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?)",
                                 [(x.at, x.process, x.cpu_percent, x.rss, x.threads)
                                  for x in samples])
            self._db.executemany(
                "INSERT INTO messages (at, topic, job_id, payload) VALUES (?, ?, ?, ?)",
                [(m.at, m.topic, job_of(m.topic), m.payload) for m in messages])
            self._db.executemany("INSERT INTO logs (at, process, line) VALUES (?, ?, ?)",
                                 [(x.at, x.process, x.line) for x in lines])

    def note(self, key: str, value: str) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def size(self) -> int:
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
        return (pages - free) * page_size

    def prune(self, now: float | None = None) -> int:
        """Drop what is older than ``max_age``, then the oldest tenth while the data is
        over ``max_bytes``; freed pages are reused, so the file stops growing. Rows
        dropped."""
        cutoff = (now if now is not None else time.time()) - self.max_age
        dropped = self._delete_before(cutoff)
        while self.size() > self.max_bytes:
            oldest = self._oldest_share()
            if oldest is None:
                break
            dropped += self._delete_before(oldest)
        return dropped

    def _delete_before(self, cutoff: float) -> int:
        with self._db:
            return sum(self._db.execute(f"DELETE FROM {table} WHERE at < ?",
                                        (cutoff,)).rowcount for table in _TABLES)

    def _oldest_share(self) -> float | None:
        """The time before which the oldest tenth of the messages lie (None: empty)."""
        count = self._db.execute("SELECT count(*) FROM messages").fetchone()[0]
        if count == 0:
            count = self._db.execute("SELECT count(*) FROM logs").fetchone()[0]
            table = "logs"
        else:
            table = "messages"
        if count == 0:
            return None
        row = self._db.execute(f"SELECT at FROM {table} ORDER BY at LIMIT 1 OFFSET ?",
                               (max(1, int(count * PRUNE_SHARE)),)).fetchone()
        if row is None:  # fewer rows than one tenth: drop them all
            return float("inf")
        return float(row[0])

    def close(self) -> None:
        self._db.close()


def messages(connection: sqlite3.Connection, job_ids: Iterable[str] = ()
             ) -> list[Message]:
    jobs = list(job_ids)
    query = "SELECT at, topic, payload FROM messages"
    if jobs:
        query += f" WHERE job_id IN ({','.join('?' * len(jobs))})"
    rows = connection.execute(query + " ORDER BY id", jobs).fetchall()
    return [Message(at, topic, bytes(payload)) for at, topic, payload in rows]


def log_lines(connection: sqlite3.Connection) -> list[LogLine]:
    rows = connection.execute("SELECT at, process, line FROM logs ORDER BY id").fetchall()
    return [LogLine(*row) for row in rows]


def samples(connection: sqlite3.Connection) -> list[Sample]:
    rows = connection.execute("SELECT at, process, cpu_percent, rss, threads FROM metrics "
                              "ORDER BY at").fetchall()
    return [Sample(*row) for row in rows]
