"""The desktop app under load: a job of 1,000 subtasks changing state 500 times a second.

No broker and no cluster: a producer *process* plays the JobMaster, the TaskManagers and
the ResourceManager. It keeps a job's ExecutionGraph snapshot (three vertices, 1,000
subtasks; every attempt goes CREATED, SCHEDULED, DEPLOYING on a free slot, RUNNING, then
FINISHED, or FAILED one time in ten, and the subtask starts a new attempt) and sends,
encoded with the runtime's wire codec, what the GUI's client would receive: the changes
of each 2 ms as the JobMaster batches them per turn of its mailbox (one
``ExecutionStateEvents`` and one tapped ``UpdateTaskExecutionStates`` per TaskManager), the
``JobSnapshot`` at the JobMaster's rate (two a second for 1,000 subtasks) and a ``ClusterOverview``
(25 TaskManagers x 10 slots) once a second.

In this process a feeder thread plays paho's network thread: it decodes each payload
(``clusterdeck.core.rpc.decode``) and hands it to the bridge's inputs (``post``, ``post_job_event``,
``post_traffic``), except snapshots, which it hands over undecoded (``route_encoded``, the
bridge decodes them on a thread of its own): exactly what the bridge's subscription
callbacks do. The main window
runs offscreen with every view; the ExecutionGraph shows the job.

Measured, for ``--seconds`` (20 by default) after a 3 s warm-up:

- event to repaint: from a state change in the producer (its ``at``) to the end of the
  first paint of the ExecutionGraph after the GUI applied it (events recolour cells at the
  bridge's tick); posted to repaint, the GUI's part of it: from the feeder's
  ``post_job_event`` (the event decoded, as paho would hand it over) to that paint; and
  snapshot to repaint, from a snapshot's sending to the paint after it was drawn;
- GUI thread busy: share of wall time the GUI thread spent handling events (inside the
  outermost ``QApplication.notify``; waiting for the next event is idle), and its CPU
  time (``time.thread_time``) in brackets: the difference is time it waited for the GIL
  or for a core;
- the bridge's tick (``flush``, which runs every connected view) p50/p95/max;
- resident memory of this process before the run, after 10,000 events and at the end.

    QT_QPA_PLATFORM=offscreen python -m benchmarks.gui_bridge [--seconds 20]
        [--rate 500] [--subtasks 1000] [--view jobs|messages|failures|result]
        [--snapshot-hz HZ] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing
import os
import pstats
import random
import struct
import sys
import threading
import time
from collections import deque
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    LoadMeter,
    exit_on_sigterm,
    fresh_home,
    machine_summary,
    markdown_table,
    percentile,
)
from clusterdeck.core.jobmanager.jobevents import (
    EVENTS_PER_MESSAGE,
    SNAPSHOT_INTERVAL,
    SUBTASKS_PER_SNAPSHOT_SECOND,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.failures import FailureRecord, TaskFailure
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.rpc import Envelope, decode, encode, from_data, to_data

JOB_ID = "bench-job-0001"
FRAMESIZE = 64 * 1024 * 1024
"""Far above ``rpc.framesize``: a 1,000-subtask snapshot is ~0.4 MB (see docs)."""
TASKMANAGERS, SLOTS_PER_TM = 25, 10
ATTEMPTS_KEPT = 3
WARM_UP = 3.0
S = ExecutionState
_NEXT = {S.CREATED: S.SCHEDULED, S.SCHEDULED: S.DEPLOYING, S.DEPLOYING: S.RUNNING}
_SENT = struct.Struct("<d")
"""A snapshot's payload is preceded by when the producer sent it (snapshot to repaint)."""

# -- the producer (a child process: the cluster's side) --------------------------------------


def _job_snapshot(subtasks: int) -> dict[str, Any]:
    """The snapshot as the JSON data the codec writes (``to_data``), so the producer can
    change it in place cheaply; ``snapshot_bytes`` checks it still reads back."""
    from dataclasses import replace

    from clusterdeck.core.executiongraph import ExecutionGraph
    from clusterdeck.core.protocol.jobgraph import (
        JobEdge,
        JobGraph,
        JobKind,
        JobVertex,
        OperatorSpec,
        ShipStrategy,
    )

    def vertex(vertex_id: str, parallelism: int, kind: str) -> JobVertex:
        return JobVertex(vertex_id, vertex_id, parallelism,
                         (OperatorSpec(f"{vertex_id}.0", kind, kind),))
    sources = subtasks * 2 // 5
    graph = JobGraph("bench-1000", JobKind.DATAFLOW,
                     (vertex("source", sources, "source.range"), vertex("map", sources, "map"),
                      vertex("sink", subtasks - 2 * sources, "sink.collect")),
                     (JobEdge("source", "map", ShipStrategy.FORWARD),
                      JobEdge("map", "sink", ShipStrategy.HASH)))
    now = time.time()
    return to_data(replace(ExecutionGraph(graph, JOB_ID).snapshot(), status=JobStatus.RUNNING,
                           status_timestamps={JobStatus.CREATED: now, JobStatus.RUNNING: now}))


def _overview(free: dict[tuple[str, int], bool]) -> p.ClusterOverview:
    now = time.time()
    taskmanagers = tuple(
        p.TaskManagerInfo(f"taskmanager-{n:02d}", p.TaskManagerState.REGISTERED, "localhost",
                          10_000 + n, SLOTS_PER_TM,
                          sum(free[(f"taskmanager-{n:02d}", i)] for i in range(SLOTS_PER_TM)),
                          0.1, now - 60)
        for n in range(1, TASKMANAGERS + 1))
    return p.ClusterOverview("bench", taskmanagers, TASKMANAGERS * SLOTS_PER_TM,
                             sum(free.values()), 9999, now)


class _Job:
    """The producer's job: a snapshot's JSON data changed in place, one state change at a
    time (states are ExecutionState members: a StrEnum is JSON's string as it is)."""

    def __init__(self, subtasks: int, seed: int = 7) -> None:
        self.snapshot = _job_snapshot(subtasks)
        self.cells = [(vertex, subtask) for vertex in self.snapshot["vertices"]
                      for subtask in vertex["subtasks"]]
        self.free = {(f"taskmanager-{n:02d}", i): True for n in range(1, TASKMANAGERS + 1)
                     for i in range(SLOTS_PER_TM)}
        self.rng = random.Random(seed)
        self.finished = 0
        self._checked = False

    def change(self) -> tuple[p.ExecutionStateEvent, p.UpdateTaskExecutionState]:
        while True:
            vertex, subtask = self.rng.choice(self.cells)
            current = subtask["attempts"][-1]
            if current["state"] in (S.FINISHED, S.FAILED):
                self._new_attempt(vertex, subtask)
                continue
            if current["state"] == S.SCHEDULED and not any(self.free.values()):
                continue
            return self._advance(vertex, subtask, current)

    def _advance(self, vertex: dict[str, Any], subtask: dict[str, Any], current: dict[str, Any]
                 ) -> tuple[p.ExecutionStateEvent, p.UpdateTaskExecutionState]:
        now = time.time()
        old = S(current["state"])
        new = _NEXT.get(old) or (S.FAILED if self.rng.random() < 0.1 else S.FINISHED)
        failure = None
        if new is S.DEPLOYING:
            slot = self.rng.choice([key for key, free in self.free.items() if free])
            self.free[slot] = False
            current["slot"] = {"taskmanager_id": slot[0], "slot_index": slot[1]}
            current["start_time"] = now
        if new in (S.FINISHED, S.FAILED):
            slot = current["slot"]
            self.free[(slot["taskmanager_id"], slot["slot_index"])] = True
            current["end_time"] = now
            self.finished += new is S.FINISHED
        if new is S.FAILED:
            failure = FailureRecord(
                current["attempt_id"], vertex["id"], subtask["subtask"], current["attempt"],
                current["slot"]["taskmanager_id"], TaskFailure(
                    "ValueError", "record 777 is bad", "Traceback (most recent call last):\n"
                    "  File \"job.py\", line 12, in check\nValueError: record 777 is bad\n",
                    ("reading input split 3", "attempt failed")),
                timestamp=now, input_splits=(3,), slot_index=current["slot"]["slot_index"],
                start_time=current["start_time"])
            record = current["failure"] = to_data(failure)
            self.snapshot["failures"] = [*self.snapshot["failures"][-99:], record]
            self.snapshot["root_cause"] = self.snapshot["root_cause"] or record
        current["state"] = subtask["state"] = new
        current["state_timestamps"][new] = now
        counts = vertex["state_counts"]
        counts[old] -= 1
        counts[new] = counts.get(new, 0) + 1
        if not counts[old]:
            del counts[old]
        slot = current["slot"] or {}
        event = p.ExecutionStateEvent(
            JOB_ID, current["attempt_id"], vertex["id"], subtask["subtask"], current["attempt"],
            old, new, now, slot.get("taskmanager_id"), slot.get("slot_index"), failure)
        update = p.UpdateTaskExecutionState(JOB_ID, current["attempt_id"], new)
        return event, update

    def _new_attempt(self, vertex: dict[str, Any], subtask: dict[str, Any]) -> None:
        counts = vertex["state_counts"]
        counts[subtask["state"]] -= 1
        counts[S.CREATED] = counts.get(S.CREATED, 0) + 1
        number = subtask["attempts"][-1]["attempt"] + 1
        attempt_id = f"{JOB_ID}/{subtask['id']}/a{number}"
        subtask["attempts"] = [*subtask["attempts"][-(ATTEMPTS_KEPT - 1):], {
            "attempt_id": attempt_id, "attempt": number, "state": S.CREATED, "slot": None,
            "state_timestamps": {S.CREATED: time.time()}, "start_time": None,
            "end_time": None, "failure": None, "input_splits": [], "partitions_lost": False,
            "epoch": 0, "restored": False}]
        subtask["attempt_id"] = attempt_id
        subtask["state"] = S.CREATED

    def snapshot_bytes(self) -> bytes:
        """The JobSnapshot as the codec writes it (the data is JSON already, so it is
        dumped directly by orjson, as ``encode`` writes a typed message: the same bytes),
        preceded by the time it is sent."""
        total = len(self.cells)
        done = sum(s["state"] == S.FINISHED for _, s in self.cells)
        self.snapshot["progress"] = {"finished": done, "total": total}
        if not self._checked:  # the GUI's decode would refuse data the codec cannot read
            from_data(json.loads(json.dumps(self.snapshot)), JobGraphSnapshot)
            self._checked = True
        document = {"v": 1, "kind": "event", "from": "jobmaster-bench", "id": "",
                    "reply_to": "", "fencing": None, "type": "JobSnapshot",
                    "body": {"job_id": JOB_ID, "graph": self.snapshot}, "error": None}
        return _SENT.pack(time.time()) + orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS)


def produce(connection: Connection, subtasks: int, rate: float, seconds: float,
            snapshot_hz: float = 10.0) -> None:
    """Child process: send tagged payloads at ``rate`` state changes a second and
    ``snapshot_hz`` snapshots a second."""
    job = _Job(subtasks)
    connection.send_bytes(b"O" + encode(Envelope("event", "resourcemanager",
                                                 _overview(job.free)), FRAMESIZE))
    connection.send_bytes(b"S" + job.snapshot_bytes())
    start = time.time()
    changes = 0
    next_snapshot = next_overview = start
    while (now := time.time()) - start < seconds:
        due = int((now - start) * rate)
        events: list[p.ExecutionStateEvent] = []
        updates: dict[str, list[p.UpdateTaskExecutionState]] = {}
        while changes < due:  # one turn of the JobMaster's mailbox: its batches
            event, update = job.change()
            events.append(event)
            updates.setdefault(event.taskmanager_id or "taskmanager-01", []).append(update)
            changes += 1
        for start_at in range(0, len(events), EVENTS_PER_MESSAGE):
            connection.send_bytes(b"E" + encode(Envelope("event", "jobmaster-bench",
                p.ExecutionStateEvents(JOB_ID, tuple(
                    events[start_at:start_at + EVENTS_PER_MESSAGE]))), FRAMESIZE))
        for tm, batch in updates.items():
            connection.send_bytes(b"R" + encode(Envelope(
                "ask", tm, p.UpdateTaskExecutionStates(tuple(batch)),
                correlation_id=f"c{changes}-{tm}", reply_to=tm), FRAMESIZE))
        if now >= next_snapshot:
            connection.send_bytes(b"S" + job.snapshot_bytes())
            next_snapshot += 1.0 / snapshot_hz
        if now >= next_overview:
            connection.send_bytes(b"O" + encode(Envelope("event", "resourcemanager",
                                                         _overview(job.free)), FRAMESIZE))
            next_overview += 1.0
        time.sleep(0.002)
    connection.send_bytes(b"")
    connection.close()


# -- the GUI's side ---------------------------------------------------------------------------


class Probe:
    """What the GUI thread did and when; filled on the GUI thread, except ``events`` and
    ``snapshot_bytes`` (the feeder's)."""

    def __init__(self) -> None:
        self.applied: list[tuple[float, float]] = []  # (event time, posted) since the paint
        self.posted: dict[float, float] = {}    # event time -> when the feeder posted it
        self.drawn: list[float] = []            # snapshot send times drawn since the last paint
        self.sent: deque[tuple[Any, float]] = deque(maxlen=4)  # the feeder's latest snapshots
        self.event_latency: list[float] = []
        self.bridge_latency: list[float] = []
        self.snapshot_latency: list[float] = []
        self.flush_ms: list[float] = []
        self.decode_ms: list[float] = []        # the decode of each snapshot decoded
        self.paints = 0
        self.busy = 0.0
        self.events = 0
        self.snapshot_bytes = 0
        self.measuring = False
        self.profile: cProfile.Profile | None = None
        self.cpu_seconds = 0.0

    def painted(self) -> None:
        now = time.time()
        self.paints += 1
        if self.measuring:
            self.event_latency += [now - at for at, _ in self.applied]
            self.bridge_latency += [now - posted for _, posted in self.applied]
            self.snapshot_latency += [now - at for at in self.drawn]
        self.applied.clear()
        self.drawn.clear()



def instrument(probe: Probe) -> None:
    """Wrap the graph's paint, the events' and snapshots' arrival in the graph view, and the
    bridge's tick (class attributes, before any window exists)."""
    from clusterdeck.gui.bridge import ClusterBridge
    from clusterdeck.gui.views.graphview import ExecutionGraphView
    from clusterdeck.gui.views.jobsview import JobsView

    paint, apply_events, set_job, flush = (ExecutionGraphView.paintEvent, JobsView.apply_events,
                                          JobsView.set_job, ClusterBridge.flush)

    def paint_event(self: Any, event: Any) -> None:
        paint(self, event)
        probe.painted()

    def applied(self: Any, events: list[Any]) -> None:
        apply_events(self, events)
        # an event emitted again after an older snapshot was posted and counted before
        probe.applied += [(e.at, probe.posted.pop(e.at)) for e in events
                          if isinstance(e, p.ExecutionStateEvent) and e.at in probe.posted]

    def drawn(self: Any, job_id: str, snapshot: JobGraphSnapshot) -> None:
        set_job(self, job_id, snapshot)
        # list() copies the deque in one step under the GIL, while the feeder appends
        probe.drawn += [sent for posted, sent in list(probe.sent) if posted is snapshot]

    def timed_flush(self: Any) -> None:
        started = time.perf_counter()
        flush(self)
        if probe.measuring:
            probe.flush_ms.append((time.perf_counter() - started) * 1000)

    ExecutionGraphView.paintEvent = paint_event
    JobsView.apply_events = applied
    JobsView.set_job = drawn
    ClusterBridge.flush = timed_flush


def feed(connection: Connection, bridge: Any, probe: Probe, done: threading.Event) -> None:
    """Feeder thread, paho's stand-in: decode each payload and post it to the bridge (a
    snapshot undecoded, as its subscription does)."""
    from clusterdeck.core.rpc.mqtt import Traffic
    from clusterdeck.gui.bridge import OVERVIEW

    def snapshot_decoder(sent: float) -> Any:
        def decode_snapshot(payload: bytes) -> Any:  # the bridge's decoder thread
            started = time.perf_counter()
            message = decode(payload, FRAMESIZE).message
            if probe.measuring:
                probe.decode_ms.append((time.perf_counter() - started) * 1000)
            probe.sent.append((message.graph, sent))  # the bridge draws the latest only
            return message
        return decode_snapshot

    try:
        while data := connection.recv_bytes():
            tag, payload = data[:1], data[1:]
            if tag == b"S":
                (sent,), payload = _SENT.unpack_from(payload), payload[_SENT.size:]
                probe.snapshot_bytes = len(payload)
                bridge.route_encoded(f"state/jobs/{JOB_ID}", payload, snapshot_decoder(sent))
                continue
            envelope = decode(payload, FRAMESIZE)
            if tag == b"E":
                for event in p.job_events_in(envelope.message):
                    probe.events += 1
                    probe.posted[event.at] = time.time()
                    bridge.post_job_event(event)
            elif tag == b"R":
                bridge.post_traffic(Traffic(time.time(), "rpc", "jobmaster-bench",
                                            envelope.sender, envelope.kind,
                                            envelope.type_name, len(payload), envelope.message))
            elif tag == b"O":
                bridge.post(OVERVIEW, "", envelope.message)
    except EOFError:
        pass
    finally:
        done.set()


def rss_mib() -> float:
    import psutil
    return psutil.Process().memory_info().rss / 1024 ** 2


def run(seconds: float, rate: float, subtasks: int, view: str, profile: bool = False,
        snapshot_hz: float = 10.0) -> dict[str, Any]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication

    class TimedApplication(QApplication):
        """Every event the GUI thread handles goes through ``notify``: the time inside
        the outermost call is the thread's busy time (waiting for the next event is not)."""

        depth = 0

        def notify(self, receiver: QObject, event: QEvent) -> bool:
            if self.depth:
                return super().notify(receiver, event)
            self.depth = 1
            started = time.perf_counter()
            try:
                return super().notify(receiver, event)
            finally:
                self.depth = 0
                if probe.measuring:
                    probe.busy += time.perf_counter() - started

    probe = Probe()
    probe.profile = cProfile.Profile() if profile else None
    instrument(probe)
    from clusterdeck.gui.controllers.mainwindow import MainWindow

    app = TimedApplication(["clusterdeck-bench"])
    from clusterdeck.gui.collector import MainThreadCollector
    collector = MainThreadCollector(app)  # as the app does: collections on the GUI thread
    window = MainWindow()
    window.resize(1500, 940)
    window.show()
    {"jobs": window.jobs_dock, "messages": window.messages_dock,
     "failures": window.failures_dock, "result": window.result_dock}[view].raise_()
    app.processEvents()
    memory_before = rss_mib()
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    producer = context.Process(target=produce, args=(sender, subtasks, rate,
                                                     seconds + WARM_UP + 1.0, snapshot_hz),
                               daemon=True)
    producer.start()
    sender.close()
    done = threading.Event()
    threading.Thread(target=feed, args=(receiver, window.bridge, probe, done),
                     daemon=True).start()
    marks: dict[str, Any] = {"memory_10k": None}

    def begin() -> None:
        marks["load"] = LoadMeter()
        marks["events"] = probe.events
        marks["from"] = time.monotonic()
        marks["cpu"] = time.thread_time()
        probe.measuring = True

    def check() -> None:
        if marks["memory_10k"] is None and probe.events >= 10_000:
            marks["memory_10k"] = rss_mib()
        if "from" in marks and (time.monotonic() - marks["from"] >= seconds or done.is_set()):
            probe.measuring = False
            marks["elapsed"] = time.monotonic() - marks["from"]
            probe.cpu_seconds = time.thread_time() - marks["cpu"]
            marks["events"] = probe.events - marks["events"]
            marks["load"].stop()
            app.quit()

    checker = QTimer()
    checker.timeout.connect(check)
    checker.start(50)
    QTimer.singleShot(int(WARM_UP * 1000), begin)
    try:
        if probe.profile is not None:  # the whole GUI thread: ticks, timers, paints
            probe.profile.runcall(app.exec)
        else:
            app.exec()  # the real event loop: it blocks when there is nothing to do
    finally:
        checker.stop()
        producer.terminate()
        producer.join(10)
        window.session.shutdown()
        window.close()
        collector.stop()
    elapsed, load, memory_at_10k = marks["elapsed"], marks["load"], marks["memory_10k"]
    return {"elapsed": elapsed, "events": marks["events"],
            "total_events": probe.events, "probe": probe, "load": load,
            "memory_before": memory_before, "memory_10k": memory_at_10k,
            "memory_end": rss_mib(), "view": view, "snapshot_hz": snapshot_hz,
            "cells": len(window.jobs.graph.cells()),
            "messages": window.messages.model.rowCount()}


def report(result: dict[str, Any]) -> str:
    probe: Probe = result["probe"]

    def ms(values: list[float], fraction: float) -> str:
        return f"{percentile(values, fraction) * 1000:.0f}" if values else "\u2013"

    elapsed = result["elapsed"]
    busy = f"{100 * probe.busy / elapsed:.0f}% ({100 * probe.cpu_seconds / elapsed:.0f}% CPU)"
    memory_10k = result["memory_10k"]
    rows = [[f"{result['view']}, {result['snapshot_hz']:g}/s",
             f"{result['events'] / result['elapsed']:.0f}",
             f"{ms(probe.event_latency, 0.5)} / {ms(probe.event_latency, 0.95)}",
             f"{ms(probe.bridge_latency, 0.5)} / {ms(probe.bridge_latency, 0.95)}",
             f"{ms(probe.snapshot_latency, 0.5)} / {ms(probe.snapshot_latency, 0.95)}",
             busy,
             f"{percentile(probe.flush_ms, 0.5):.1f} / {percentile(probe.flush_ms, 0.95):.1f}"
             f" / {max(probe.flush_ms, default=0):.0f}",
             f"{result['memory_before']:.0f} / "
             + (f"{memory_10k:.0f}" if memory_10k else "\u2013")
             + f" / {result['memory_end']:.0f}",
             result["load"].describe()]]
    return markdown_table(
        ["view raised, snapshots", "changes/s", "event\u2192paint p50/p95 ms",
         "posted\u2192paint p50/p95 ms", "snapshot\u2192paint p50/p95 ms", "GUI thread busy",
         "tick p50/p95/max ms",
         "RSS MiB before / 10k events / end", "CPU busy / load"], rows) + (
        f"\n\n{result['cells']} subtask cells drawn, snapshot {probe.snapshot_bytes:,} bytes, "
        f"decoded on the bridge's decoder thread (newest only, holding the GIL) in "
        f"{percentile(probe.decode_ms, 0.5):.0f} ms p50 / {percentile(probe.decode_ms, 0.95):.0f}"
        f" ms p95; {result['total_events']:,} events in all, {probe.paints} graph paints, "
        f"{result['messages']:,} messages in the table.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=500.0, help="state changes a second")
    parser.add_argument("--subtasks", type=int, default=1000)
    parser.add_argument("--snapshot-hz", type=float,
                        help="snapshots a second (default: the JobMaster's rate for the "
                        "job's size, at most 10, 2 for 1,000 subtasks)")
    parser.add_argument("--view", choices=["jobs", "messages", "failures", "result"],
                        default="jobs", help="the bottom tab raised during the run")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile of the GUI thread (warm-up included), top 30 by "
                        "internal time")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    print(f"# GUI bridge benchmark, {time.strftime('%Y-%m-%d %H:%M')}\n\n{machine_summary()}; "
          f"load average at start {os.getloadavg()[0]:.2f}\n")
    snapshot_hz = args.snapshot_hz or min(1 / SNAPSHOT_INTERVAL,
                                          SUBTASKS_PER_SNAPSHOT_SECOND / args.subtasks)
    with fresh_home():
        result = run(args.seconds, args.rate, args.subtasks, args.view, args.profile,
                     snapshot_hz)
    print(report(result))
    if result["probe"].profile is not None:
        out = io.StringIO()
        pstats.Stats(result["probe"].profile, stream=out).sort_stats("tottime").print_stats(30)
        print(f"\n```\n{out.getvalue().strip()}\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())

