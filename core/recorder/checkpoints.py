"""What a recording holds of a job's checkpoints: not their state (the recorder keeps
messages, not the files of the job's checkpoint folder) but every subtask's
acknowledgement (``AcknowledgeCheckpoint``), whose state handle names the snapshot's
files and their sizes: the bytes each subtask's state took per checkpoint, and so its
growth. Read in batches (a week's recording is large); a reader's thread."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.protocol.checkpoints import AcknowledgeCheckpoint
from clusterdeck.core.protocol.ids import JOB_ID
from clusterdeck.core.recorder.export import FRAME_LIMIT
from clusterdeck.core.recorder.store import connect
from clusterdeck.core.rpc import RpcError, decode

CHECKPOINTS_KEPT = 500
"""The newest checkpoints a reading keeps (a job checkpointing every second for a week
acknowledged 600,000)."""
_BATCH = 2000
_MARK = b'"type":"AcknowledgeCheckpoint"'


@dataclass(frozen=True)
class RecordedSnapshot:
    """One subtask's acknowledged snapshot: ``bytes`` of its files (its state file and,
    with the rocksdb backend, the shared files of its chain), ``files`` how many."""

    subtask: str
    bytes: int
    files: int

    @property
    def vertex(self) -> str:
        return self.subtask.rpartition("#")[0]


@dataclass(frozen=True)
class RecordedCheckpoint:
    """A checkpoint as its acknowledgements were recorded: ``at`` the first one's
    arrival; ``snapshots`` by subtask id (a subtask that keeps no state: 0 bytes)."""

    checkpoint_id: int
    at: float
    snapshots: tuple[RecordedSnapshot, ...]

    def bytes_by_vertex(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for snapshot in self.snapshots:
            totals[snapshot.vertex] = totals.get(snapshot.vertex, 0) + snapshot.bytes
        return totals


def recorded_cluster(path: Path) -> str:
    """The id of the cluster the recording is of ('' when it does not say)."""
    with closing(connect(path, readonly=True)) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'cluster'").fetchone()
    return str(row[0]) if row else ""


def recorded_checkpoints(path: Path, job_id: str) -> list[RecordedCheckpoint]:
    """The job's acknowledged checkpoints in the recording, oldest first (the newest
    ``CHECKPOINTS_KEPT``); a subtask acknowledged twice (a restarted attempt) counts
    once, its last acknowledgement."""
    if not JOB_ID.fullmatch(job_id):
        raise ValueError(f"{job_id[:80]!r} is not a job id")
    checkpoints: collections.OrderedDict[int, tuple[float, dict[str, RecordedSnapshot]]] = \
        collections.OrderedDict()
    for at, ack in _acknowledgements(path, job_id):
        _, snapshots = checkpoints.setdefault(ack.checkpoint_id, (at, {}))
        state = ack.state
        snapshots[ack.subtask_id] = RecordedSnapshot(
            ack.subtask_id,
            0 if state is None else state.size + sum(file.size for file in state.shared),
            0 if state is None else 1 + len(state.shared))
        while len(checkpoints) > CHECKPOINTS_KEPT:
            checkpoints.popitem(last=False)
    return [RecordedCheckpoint(checkpoint_id, at, tuple(
                snapshots[subtask] for subtask in sorted(snapshots, key=_subtask_order)))
            for checkpoint_id, (at, snapshots) in sorted(checkpoints.items())]


def _acknowledgements(path: Path, job_id: str) -> Iterator[tuple[float, AcknowledgeCheckpoint]]:
    """The job's acknowledgements, in the order recorded. The payloads are searched for
    the message's type and the job's id before any is decoded: the recording's
    heartbeats and other messages, most of it, are never parsed."""
    job_mark = f'"job_id":"{job_id}"'.encode()
    with closing(connect(path, readonly=True)) as db:
        last = 0
        while True:
            rows = db.execute(
                "SELECT id, at, payload FROM messages WHERE id > ? AND topic LIKE 'rpc/%' "
                "AND instr(payload, ?) > 0 AND instr(payload, ?) > 0 ORDER BY id LIMIT ?",
                (last, _MARK, job_mark, _BATCH)).fetchall()
            if not rows:
                return
            for row_id, at, payload in rows:
                last = row_id
                try:
                    message = decode(bytes(payload), FRAME_LIMIT).message
                except RpcError:
                    continue  # unreadable: the messages view shows why
                if isinstance(message, AcknowledgeCheckpoint) and message.job_id == job_id:
                    yield float(at), message


def _subtask_order(subtask: str) -> tuple[str, int]:
    vertex, _, index = subtask.rpartition("#")
    return vertex, int(index) if index.isdigit() else -1
