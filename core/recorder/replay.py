"""A recording read back as what a live watcher would have received: decoded events and
states by topic, and the control plane's messages as ``Traffic`` records, in the order
they were recorded. For the window, which shows a recording with the views it shows a
cluster with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.messages import JobResult, JobSnapshot
from clusterdeck.core.recorder.export import FRAME_LIMIT
from clusterdeck.core.recorder.store import connect
from clusterdeck.core.rpc import RpcError, TopicLayout, decode
from clusterdeck.core.rpc.mqtt import Traffic, traffic_record

TRANSPORT = ("rpc", "reply", "heartbeat")
BATCH = 2000  # rows read per query, so that a big recording is never all in memory


@dataclass(frozen=True)
class RecordedEvent:
    """A decoded message of an event or state topic (``topic`` relative to the root)."""

    at: float
    topic: str
    message: Any


def replay(path: Path) -> Iterator[RecordedEvent | Traffic]:
    """Every recorded message, decoded; undecodable ones become Traffic with the reason
    (transport) or are skipped (a cleared retained topic, an event nobody can read).

    Of a state topic (``state/...``: snapshots, overviews, results) only the last message
    is read: a watcher keeps the latest state, and a big job's many snapshots are most of
    the decoding. What happened in between is in the events and the messages."""
    with closing(connect(path, readonly=True)) as db:
        cluster = db.execute("SELECT value FROM meta WHERE key = 'cluster'").fetchone()
        layout = topics.layout(cluster[0] if cluster else "recording")
        latest_states = {row[0] for row in db.execute(
            "SELECT max(id) FROM messages WHERE topic LIKE 'state/%' GROUP BY topic")}
        last = 0
        while True:
            rows = db.execute("SELECT id, at, topic, payload FROM messages WHERE id > ? "
                              "ORDER BY id LIMIT ?", (last, BATCH)).fetchall()
            if not rows:
                return
            for row_id, at, topic, payload in rows:
                last = row_id
                if topic.startswith("state/") and row_id not in latest_states:
                    continue
                item = _item(layout, at, topic, bytes(payload))
                if item is not None:
                    yield item


def samples(path: Path, span: float = 3600.0
            ) -> Iterator[list[tuple[float, str, float, int]]]:
    """The recorded CPU and memory samples of the last ``span`` seconds recorded, (time,
    process, CPU %, resident bytes), oldest first, in batches of at most BATCH (a week's
    would be millions)."""
    with closing(connect(path, readonly=True)) as db:
        newest = db.execute("SELECT max(at) FROM metrics").fetchone()[0]
        if newest is None:
            return
        last = -1
        while True:
            rows = db.execute("SELECT rowid, at, process, cpu_percent, rss FROM metrics "
                              "WHERE rowid > ? AND at >= ? ORDER BY rowid LIMIT ?",
                              (last, newest - span, BATCH)).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield [(float(at), str(process), float(cpu), int(rss))
                   for _, at, process, cpu, rss in rows]


def recorded_runs(path: Path) -> dict[str, tuple[Any, Any]]:
    """Every job of a recording: its last snapshot's graph (a JobGraphSnapshot) and its
    JobResult (None when the recording holds none), by job id. Only the last message of
    each job's snapshot and result topics is read."""
    snapshots: dict[str, Any] = {}
    results: dict[str, Any] = {}
    with closing(connect(path, readonly=True)) as db:
        rows = db.execute(
            "SELECT topic, payload FROM messages WHERE id IN (SELECT max(id) FROM messages "
            "WHERE topic LIKE 'state/jobs/%' OR topic LIKE 'state/results/%' GROUP BY topic)"
        ).fetchall()
    for _, payload in rows:
        try:
            message = decode(bytes(payload), FRAME_LIMIT).message if payload else None
        except RpcError:
            continue  # unreadable: as replay skips it
        if isinstance(message, JobSnapshot):
            snapshots[message.job_id] = message.graph
        elif isinstance(message, JobResult):
            results[message.job_id] = message
    return {job: (graph, results.get(job)) for job, graph in snapshots.items()}


def _item(layout: TopicLayout, at: float, topic: str, payload: bytes
          ) -> RecordedEvent | Traffic | None:
    channel = topic.split("/", 1)[0]
    if channel in TRANSPORT:
        _, name, _ = layout.parse(layout.absolute(topic))
        return traffic_record(at, channel, name or topic, payload, FRAME_LIMIT)
    if not payload:
        return None
    try:
        return RecordedEvent(at, topic, decode(payload, FRAME_LIMIT).message)
    except RpcError:
        return None
