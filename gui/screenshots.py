"""Screenshots for the docs: the main window and each view, against a real local cluster.

    QT_QPA_PLATFORM=offscreen python -m gui.screenshots [--out docs/screenshots]

Starts a local cluster (amqtt broker, two TaskManagers with two slots each) in a
throw-away CLUSTERDECK_HOME, opens the main window on it, waits until both TaskManagers
are registered and the utilisation plot has a few samples, and saves PNGs with
``QWidget.grab()``. Until jobs can be submitted from the window, the ExecutionGraph shows
a snapshot made by the real ExecutionGraph and Scheduler (core.executiongraph) driven
through a few events, fed through the bridge like a JobMaster's snapshot.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication, QWidget

from core.config import Config
from core.executiongraph import (
    ExecutionGraph,
    ExecutionState,
    FixedDelay,
    Instruction,
    ReleaseSlot,
    RequestSlot,
    Scheduler,
    ScheduleRestart,
    SlotRef,
    TaskFailure,
)
from core.jobs.graph import JobEdge, JobGraph, JobKind, JobVertex, OperatorSpec, ShipStrategy
from gui.bridge import JOB
from gui.mainwindow import MainWindow

_FAST = {"heartbeat.interval": 0.5, "heartbeat.timeout": 3.0, "taskmanager.count": 2,
         "taskmanager.slots": 2, "broker.kind": "amqtt"}


def demo_job_graph() -> JobGraph:
    def vertex(vertex_id: str, name: str, parallelism: int, *kinds: str) -> JobVertex:
        return JobVertex(vertex_id, name, parallelism, tuple(
            OperatorSpec(f"{vertex_id}.{n}", kind, kind) for n, kind in enumerate(kinds)))

    return JobGraph(
        name="word-count", kind=JobKind.DATAFLOW,
        vertices=(vertex("lines", "Read lines", 4, "source.text", "flat_map", "filter"),
                  vertex("stopwords", "Read stopwords", 1, "source.csv"),
                  vertex("count", "Count words", 3, "join", "key_by", "reduce"),
                  vertex("write", "Write counts", 3, "map", "sink.parquet")),
        edges=(JobEdge("lines", "count", ShipStrategy.HASH),
               JobEdge("stopwords", "count", ShipStrategy.BROADCAST, input_index=1),
               JobEdge("count", "write", ShipStrategy.FORWARD)))


def demo_snapshot(taskmanagers: list[str], slots: int) -> dict[str, Any]:
    """A word count half way through: sources finished or running, one source attempt
    failed and restarted on another slot, the consumers still waiting for their inputs."""
    graph = ExecutionGraph(demo_job_graph(), f"job-{uuid.uuid4().hex[:8]}")
    scheduler = Scheduler(graph, FixedDelay(3, 2.0))
    clock = [time.time() - 45.0]
    free: deque[SlotRef] = deque(SlotRef(tm, i) for tm in taskmanagers for i in range(slots))
    waiting: list[RequestSlot] = []

    def carry_out(event: Callable[[float], list[Instruction]]) -> None:
        clock[0] += 2.5
        pending = list(event(clock[0]))
        while pending:
            instruction = pending.pop(0)
            if isinstance(instruction, RequestSlot):
                waiting.append(instruction)
            elif isinstance(instruction, ReleaseSlot):
                free.append(instruction.slot)
            elif isinstance(instruction, ScheduleRestart):
                clock[0] += instruction.delay
                pending += scheduler.restart_due(clock[0])
            if waiting and free and not pending:
                waiting.pop(0)
                slot = free.popleft()
                pending += scheduler.slot_offered(slot.taskmanager_id, slot.slot_index,
                                                  clock[0])

    def report(vertex_id: str, subtask: int, state: ExecutionState, **details: Any) -> None:
        attempt_id = graph.subtask(vertex_id, subtask).current.attempt_id
        carry_out(lambda now: scheduler.task_state_changed(attempt_id, state, now, **details))

    carry_out(scheduler.start)
    for subtask in range(4):
        report("lines", subtask, ExecutionState.RUNNING)
    report("lines", 0, ExecutionState.FINISHED)
    report("lines", 1, ExecutionState.FAILED, failure=TaskFailure(
        "FileNotFoundError", "[Errno 2] No such file or directory: 'input/part-0001.txt'",
        "Traceback (most recent call last):\n"
        '  File "examples/word_count.py", line 14, in split_lines\n'
        "    with open(path) as lines:\n"
        "FileNotFoundError: [Errno 2] No such file or directory: 'input/part-0001.txt'",
        ("reading split 1 of 8: input/part-0001.txt",)))
    report("lines", 3, ExecutionState.FINISHED)
    report("stopwords", 0, ExecutionState.RUNNING)
    report("stopwords", 0, ExecutionState.FINISHED)
    report("lines", 1, ExecutionState.RUNNING)
    return graph.snapshot()


def wait_until(app: QApplication, condition: Callable[[], bool], timeout: float,
               what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        app.processEvents()
        time.sleep(0.02)


def save(widget: QWidget, path: Path) -> None:
    widget.grab().save(str(path))
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    args = parser.parse_args(argv)
    # Read when the QApplication is made and when paths are looked up, both below.
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("CLUSTERDECK_HOME", tempfile.mkdtemp(prefix="clusterdeck-screens-"))
    args.out.mkdir(parents=True, exist_ok=True)
    QCoreApplication.setApplicationName("clusterdeck")
    app = QApplication.instance() or QApplication(["clusterdeck"])
    assert isinstance(app, QApplication)
    window = MainWindow()
    window.resize(1500, 940)
    window.show()
    try:
        app.processEvents()
        save(window.cluster_panel, args.out / "cluster-panel-idle.png")
        window.session.start(Config({"cluster.id": "demo", **_FAST}))
        names = ["taskmanager-1", "taskmanager-2"]

        def registered() -> bool:
            rows = [window.model.row_named(name) for name in names]
            return all(row is not None and row.registration == "registered" for row in rows)

        wait_until(app, registered, 60, "both TaskManagers registered")
        snapshot = demo_snapshot(names, 2)
        window.bridge.post(JOB, snapshot["job_id"], snapshot)
        wait_until(app, lambda: window.jobs.graph.snapshot is not None, 5, "the job drawn")
        window.jobs.graph.select("lines", 1)
        window.cluster_panel.select_process("taskmanager-1")
        window.show_log("taskmanager-1")
        window.slots_dock.raise_()
        wait_until(app, lambda: len(window.slots.plot.samples()[0]) >= 8, 20,
                   "a few utilisation samples")
        wait_until(app, lambda: any(r.cpu_percent for r in window.model.rows()), 10,
                   "CPU samples")
        window.jobs.graph.fit()
        app.processEvents()
        save(window, args.out / "main-window.png")
        save(window.cluster_panel, args.out / "cluster-panel.png")
        save(window.jobs, args.out / "executiongraph.png")
        save(window.slots, args.out / "slots.png")
        log_dock = window.log_docks["taskmanager-1"]
        log_dock.raise_()
        app.processEvents()
        save(log_dock, args.out / "process-log.png")
    finally:
        window.session.shutdown()
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
