"""Screenshots for the docs: the main window and each view, from a real run.

    QT_QPA_PLATFORM=offscreen python scripts/screenshots.py [--out docs/screenshots]

Starts a local cluster from the window (two TaskManagers with two slots each, Spark
started eagerly) in a throw-away CLUSTERDECK_HOME and submits real jobs through the
window's own submission flow, with the submit dialog filled in as a user would:
``examples/failing_job.py`` (one restart, then it fails), ``examples/wordcount.py`` with
parallelism 4, and ``examples/pi.py`` (a PySpark script, for its stdout). A file that is
not a job is offered too, for the error dialog. Then each view is brought to the front
and saved with ``QWidget.grab()``; the replay is the word count half way through.
Takes about a minute and a half, most of it Spark starting in each TaskManager.

    QT_QPA_PLATFORM=offscreen python scripts/screenshots.py --attach CLUSTER

attaches the window to a cluster already running (``clusterdeck up``) instead, waits
for a streaming job of it with a few completed checkpoints (``clusterdeck submit
examples/streaming_rate.py -- OUT 0``) and saves its checkpoints view, its failures
view when the job resumed from a checkpoint, and the window with its ExecutionGraph
(``streaming-job``: records/s, backpressure and watermark per vertex) once a vertex is
back-pressured (a slow sink's job: docs/metrics.md), or after a minute without.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QApplication, QDockWidget, QWidget

from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.models.replay import JobHistory
from clusterdeck.gui.session import SessionMode, attach_config

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPARK_HOME = Path(importlib.util.find_spec("pyspark").origin).parent  # the wheel's own examples
SPARK_EXAMPLES = SPARK_HOME / "examples" / "src" / "main" / "python"
SPARK_DATA = SPARK_HOME / "data"
_CLUSTER = {"cluster.id": "demo", "heartbeat.interval": 0.5, "heartbeat.timeout": 3.0,
            "taskmanager.count": 2, "taskmanager.slots": 2, "spark.start": "eager"}


class Shooter:
    """Drives the window and saves pictures; everything on the GUI thread."""

    def __init__(self, app: QApplication, window: MainWindow, out: Path) -> None:
        self.app = app
        self.window = window
        self.out = out

    def wait(self, condition: Callable[[], object], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
            self.app.processEvents()
            time.sleep(0.02)

    def settle(self, seconds: float = 0.4) -> None:
        """Let the bridge tick and the timers redraw."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            time.sleep(0.02)

    def save(self, widget: QWidget, name: str) -> None:
        self.settle()
        path = self.out / f"{name}.png"
        widget.grab().save(str(path))
        print(f"wrote {path}")

    def raise_dock(self, dock: QDockWidget, height: int | None = None) -> None:
        """Bring ``dock``'s tab to the front; ``height`` resizes the bottom dock area."""
        dock.show()
        dock.raise_()
        if height is not None:
            self.window.resizeDocks([dock], [height], Qt.Orientation.Vertical)
        self.settle()

    def submit(self, path: Path, *, parallelism: int = 0, strategy: str = "",
               attempts: int = 1, delay: float = 0.5, shoot: str = "",
               arguments: str = "") -> str:
        """Offer ``path`` like a drop, fill in the dialog, Submit; the job id."""
        flow = self.window.submission
        flow.offer(path)
        self.wait(lambda: flow.dialog is not None and flow.dialog.isVisible(), 20,
                  f"the submit dialog of {path.name}")
        dialog = flow.dialog
        assert dialog is not None
        dialog.parallelism.setValue(parallelism)
        dialog.arguments.setText(arguments)
        if strategy:
            dialog.strategy.setCurrentText(strategy)
            dialog.attempts.setValue(attempts)
            dialog.delay.setValue(delay)
        if shoot:
            self.save(dialog, shoot)
        submitted: list[str] = []
        flow.submitted.connect(lambda job_id, _path: submitted.append(job_id))
        dialog.submit_button.click()
        self.wait(lambda: submitted, 60, f"{path.name} submitted")
        return submitted[0]

    def ended(self, job_id: str, timeout: float = 240) -> str:
        def status() -> str:
            row = self.window.job_model.row(job_id)
            return row.status if row is not None and row.ended else ""
        self.wait(status, timeout, f"job {job_id} to end")
        return status()


def shoot_all(shooter: Shooter) -> None:
    window, app = shooter.window, shooter.app
    shooter.save(window.cluster_panel, "cluster-panel-idle")
    window.session.start(Config(_CLUSTER))

    def registered() -> bool:
        rows = [window.model.row_named(f"taskmanager-{n}") for n in (1, 2)]
        return all(row is not None and row.registration == "registered" for row in rows)

    shooter.wait(lambda: window.session.state.mode is SessionMode.RUNNING and registered(),
                 90, "both TaskManagers registered")

    failing = shooter.submit(EXAMPLES / "failing_job.py", strategy="fixed-delay", attempts=1,
                             delay=0.5, shoot="submit-dialog")
    print(f"failing_job: {shooter.ended(failing)}")
    wordcount = shooter.submit(EXAMPLES / "wordcount.py", parallelism=4)
    print(f"wordcount: {shooter.ended(wordcount)}")
    pi = shooter.submit(EXAMPLES / "pi.py")
    print(f"pi: {shooter.ended(pi)}")
    # Spark's own pagerank.py, copied out of the wheel unmodified as a user would: pyspark
    # names a Spark job's call site after the first frame outside its own folder.
    pagerank_py = Path(tempfile.mkdtemp(prefix="clusterdeck-shots-")) / "pagerank.py"
    shutil.copy(SPARK_EXAMPLES / "pagerank.py", pagerank_py)
    pagerank = shooter.submit(pagerank_py,
                              arguments=f"{SPARK_DATA / 'mllib' / 'pagerank_data.txt'} 3")
    print(f"pagerank: {shooter.ended(pagerank)}")
    shoot_live_numbers(shooter, wordcount)

    not_a_job = Path(tempfile.mkdtemp(prefix="clusterdeck-shots-")) / "notes_to_self.py"
    not_a_job.write_text("print('remember to write build(env)')\n")
    window.submission.offer(not_a_job)
    shooter.wait(lambda: window.submission.error_dialog is not None, 20, "the error dialog")
    shooter.save(window.submission.error_dialog, "error-dialog")
    window.submission.error_dialog.close()

    # The word count, finished: jobs, graph with a subtask's attempts, result, slots.
    window.choose_job(wordcount)
    shooter.wait(lambda: window.result.rows.rowCount() > 0, 20, "the word count's rows")
    window.jobs.graph.fit()
    box = next(iter(window.jobs.graph.boxes.values()))
    window.jobs.graph.select(box.vertex_id, 0)
    shooter.raise_dock(window.jobs_dock, 300)
    shooter.save(window, "main-window")
    shooter.save(window.jobs_dock, "jobs")
    shooter.save(window.jobs, "executiongraph")
    window.slots.tabs.setCurrentWidget(window.slots.timeline)
    shooter.save(window.slots_dock, "slots")
    shooter.raise_dock(window.result_dock, 400)
    shooter.save(window.result_dock, "result")

    window.choose_job(pi)
    shooter.wait(lambda: "Pi is roughly" in window.result.stdout.toPlainText(), 20, "pi's stdout")
    shooter.save(window.result_dock, "result-stdout")

    # Spark's own pagerank.py, unmodified: its vertex opens into its Spark jobs and stages.
    window.choose_job(pagerank)
    shooter.raise_dock(window.jobs_dock, 500)
    box = next(iter(window.jobs.graph.boxes.values()))
    window.jobs.graph.select(box.vertex_id, 0)
    shooter.save(window.jobs, "spark-jobs")

    # The failing job: root cause, history, and a click that finds the subtask in the graph.
    window.choose_job(failing)
    shooter.raise_dock(window.failures_dock, 400)
    items = window.failures.failure_items()
    if items:
        window.failures.tree.setCurrentItem(items[0])
        window.failures.tree.itemClicked.emit(items[0], 0)
    shooter.save(window.failures_dock, "failures")
    shooter.save(window, "failures-window")

    # The control plane: heartbeats left out, one task deployment opened.
    shooter.raise_dock(window.messages_dock, 400)
    messages = window.messages
    messages.heartbeats.setChecked(False)
    messages.select_type("SubmitTask")
    if messages.proxy.rowCount():
        messages.select_row(messages.proxy.rowCount() - 1)
    messages.select_type("all types")
    shooter.save(window.messages_dock, "messages")

    # Replay: the word count when about half of it had run.
    window.choose_job(wordcount)
    shooter.raise_dock(window.jobs_dock, 300)
    replay = window.jobs.replay
    history = window.jobs.history()
    moment = replay.start + 0.5 * (replay.end - replay.start)
    if history is not None:
        running = [t for t in _change_times(history) if replay.start < t < replay.end]
        moment = running[len(running) // 2] + 0.05 if running else moment
    replay.show_moment(moment)
    shooter.save(window, "replay")
    shooter.save(window.jobs, "replay-graph")
    replay.go_live()

    window.cluster_panel.select_process("taskmanager-1")
    window.show_log("taskmanager-1")
    shooter.save(window.cluster_panel, "cluster-panel")
    log_dock = window.log_docks["taskmanager-1"]
    shooter.raise_dock(log_dock)
    shooter.save(log_dock, "process-log")
    app.processEvents()


def shoot_live_numbers(shooter: Shooter, small_wordcount: str) -> None:
    """The word count over a few megabytes of generated text, shot while it runs: live
    numbers on the graph, coloured by busy share, the source's plot; then a TaskManager's
    load (CPU, memory, Spark JVM heap)."""
    window = shooter.window
    data = Path(tempfile.mkdtemp(prefix="clusterdeck-words-"))
    words = ["spark", "flink", "slot", "vertex", "mailbox", "split", "barrier", "watermark",
             "partition"]
    for index in range(8):
        (data / f"part-{index}.txt").write_text("\n".join(
            " ".join(words[(index + line + k) % len(words)] for k in range(10))
            for line in range(200_000)) + "\n")
    job_id = shooter.submit(EXAMPLES / "wordcount.py", arguments=f"{data} 4")
    window.choose_job(job_id)
    graph = window.jobs.graph
    shooter.wait(lambda: graph.boxes and any(n.rate_in > 0 for n in graph.numbers.values()),
                 120, "the word count's first records/s")
    shooter.settle(3.0)
    window.jobs.by_busy.setChecked(True)
    graph.fit()
    source = next(iter(graph.boxes))
    graph.select(source, 0)
    shooter.raise_dock(window.jobs_dock, 300)
    shooter.save(window.jobs, "metrics")
    window.cluster_panel.select_process("taskmanager-1")
    opened: list[QWidget] = []
    window.inspector.opened.connect(opened.append)
    window.actions.flame_graph.trigger()
    shooter.wait(lambda: opened, 60, "the flame graph")
    opened[0].resize(1300, 620)
    shooter.save(opened[0], "flamegraph")
    opened[0].close()
    print(f"wordcount over {data}: {shooter.ended(job_id)}")
    shooter.wait(lambda: job_id in window.result.results, 20, "the big word count's result")
    window.job_list.table.clearSelection()
    model, selection = window.job_model, window.job_list.table.selectionModel()
    for job in (small_wordcount, job_id):
        selection.select(model.index(model.row_of(job), 0),
                         selection.SelectionFlag.Select | selection.SelectionFlag.Rows)
    compared = window.compare_selected_jobs()
    if compared is not None:
        shooter.save(compared, "compare")
        compared.close()
    window.jobs.by_busy.setChecked(False)
    window.cluster_panel.select_process("taskmanager-1")
    shooter.raise_dock(window.load_dock, 400)
    shooter.save(window.load_dock, "load")


def shoot_checkpoints(shooter: Shooter, cluster_id: str, completed: int = 5) -> None:
    """A running streaming job of ``cluster_id``: its checkpoints once ``completed`` of
    them did, and its failures when it was restored from one."""
    window = shooter.window
    window.session.attach(attach_config(cluster_id))
    shooter.wait(lambda: window.session.state.mode is SessionMode.ATTACHED, 30,
                 f"the window attached to {cluster_id}")

    def streaming_job() -> str:
        for job_id, snapshot in window.jobs.snapshots.items():
            stats = snapshot.checkpoints
            if snapshot.kind is JobKind.STREAMING and stats is not None \
                    and stats.completed >= completed and not snapshot.status.is_terminal:
                return job_id
        return ""

    shooter.wait(streaming_job, 120, f"a running streaming job with {completed} checkpoints")
    job_id = streaming_job()
    window.choose_job(job_id)
    window.jobs.graph.fit()
    shooter.raise_dock(window.checkpoints_dock, 380)
    shooter.wait(lambda: window.checkpoints_model.rowCount() > 0, 20, "checkpoint rows")
    shooter.save(window.checkpoints_dock, "checkpoints")
    shooter.save(window, "checkpoints-window")
    snapshot = window.jobs.snapshots[job_id]
    if snapshot.checkpoints is not None and snapshot.checkpoints.restored is not None:
        shooter.raise_dock(window.failures_dock, 380)
        shooter.save(window.failures_dock, "failures-restored")
    graph = window.jobs.graph
    shooter.settle(8.0)  # rates over whole windows since every subtask first reported
    with contextlib.suppress(TimeoutError):  # a source waits in bursts: one while it sends
        shooter.wait(lambda: any(n.backpressure > 0.1 for n in graph.numbers.values())
                     and all(n.rate_out > 0 for n in graph.numbers.values()), 60,
                     "a back-pressured vertex while records flow")
    graph.select(next(iter(graph.boxes)), 0)
    shooter.raise_dock(window.jobs_dock, 220)
    shooter.save(window, "streaming-job")
    shoot_state(shooter)


def shoot_state(shooter: Shooter) -> None:
    """The current job's State view at its latest checkpoint: its keys' first page."""
    window = shooter.window
    window.inspect_state()
    view = window.state_inspection.windows[-1]
    view.resize(1100, 700)
    shooter.wait(lambda: view.keys_model.rowCount() > 0 or view.message.text(), 120,
                 "the State view's first page of keys (or why not)")
    view.tabs.setCurrentIndex(1)  # Keys
    shooter.settle(1.0)
    shooter.save(view, "state-view")


def _change_times(history: JobHistory) -> list[float]:
    """Moments where a subtask of the replayed job changed state (for a telling replay)."""
    snapshot = history.snapshot
    return sorted(t for vertex in snapshot.vertices for subtask in vertex.subtasks
                  for attempt in subtask.attempts
                  for state, t in attempt.state_timestamps.items()
                  if state in (ExecutionState.RUNNING, ExecutionState.FINISHED))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--attach", metavar="CLUSTER", default="",
                        help="shoot the checkpoints of a running cluster's streaming job")
    parser.add_argument("--checkpoints", type=int, default=5, metavar="N",
                        help="with --attach: wait for N completed checkpoints (a "
                             "back-pressured job completes few)")
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
        if args.attach:
            shoot_checkpoints(Shooter(app, window, args.out), args.attach, args.checkpoints)
        else:
            shoot_all(Shooter(app, window, args.out))
    finally:
        window.session.shutdown()
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
