"""The ExecutionGraph view: pick a job, see its status and progress, its ExecutionGraph,
a replay slider under it and, below, the attempts of the subtask clicked in it, and the
job's root cause when it failed. A PySpark script's vertex opens, beside its attempts,
into its Spark jobs and stages (``sparkworkview.py``).

It keeps the latest snapshot of every job the bridge delivered (``set_job``) and draws
the chosen one; execution events recolour single cells between two snapshots
(``apply_events``). A click on a subtask cell fills the attempts panel from the same
snapshot, and later snapshots keep it current. Moving the replay slider draws the job as
it was then (gui/models/replay.py, from the snapshot and the bridge's recorder) and announces it
with ``replay_changed`` so the slot views follow; new snapshots are kept but not drawn
until the slider is back at its live end. GUI thread only.
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.protocol.ids import subtask_id
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.gui.models.metrics import MetricsStore
from clusterdeck.gui.models.palette import (
    EXECUTION_STATE_COLOURS,
    JOB_STATUS_COLOURS,
    text_colour_on,
)
from clusterdeck.gui.models.recorder import JobRecorder
from clusterdeck.gui.models.replay import JobHistory
from clusterdeck.gui.views.attempts import AttemptsPanel
from clusterdeck.gui.views.graphview import ExecutionGraphView
from clusterdeck.gui.views.plots import VertexPlot
from clusterdeck.gui.views.progress import ProgressStrip
from clusterdeck.gui.views.replaybar import ReplayBar
from clusterdeck.gui.views.sparkworkview import SparkWorkView

NO_JOBS = "No jobs yet.\nJobs submitted to this cluster appear here with their ExecutionGraph."


class StateLegend(QWidget):
    """One chip per execution state, in the colours of the subtask cells."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        for state, colour in EXECUTION_STATE_COLOURS.items():
            chip = QLabel(state.lower())
            chip.setStyleSheet(f"background: {colour.name()}; color: "
                               f"{text_colour_on(colour).name()}; border-radius: 3px; "
                               "padding: 1px 5px;")
            layout.addWidget(chip)
        layout.addStretch(1)


def job_span(snapshot: JobGraphSnapshot) -> tuple[float, float]:
    """The job's life from its snapshot: creation to its end, or to now while it runs."""
    stamps = list(snapshot.status_timestamps.values())
    if not stamps:
        return 0.0, 0.0
    end = max(stamps) if snapshot.status.is_terminal else time.time()
    return min(stamps), max(end, min(stamps))


class JobsView(QWidget):
    """Job selector and header, then the graph (as wide as the view: DAGs grow to the
    right) with the replay bar, then the attempts panel."""

    job_chosen = Signal(str)
    """The job on screen changed (the user chose it, or a new job replaced an ended one)."""
    replay_changed = Signal(object, object)
    """``(snapshot, moment)`` of the replayed job, or ``(None, None)`` back to live."""

    def __init__(self, recorder: JobRecorder | None = None,
                 metrics: MetricsStore | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.recorder = recorder or JobRecorder()
        self.metrics = metrics or MetricsStore()
        self.snapshots: dict[str, JobGraphSnapshot] = {}
        self._history: tuple[tuple[Any, ...], JobHistory] | None = None
        self.jobs = QComboBox()
        self.jobs.setMinimumContentsLength(24)
        self.jobs.setPlaceholderText("no jobs")
        self.status = QLabel()
        self.status.setMinimumWidth(90)
        self.status.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.progress = ProgressStrip()
        self.root_cause = QLabel()
        self.root_cause.setWordWrap(True)
        self.root_cause.setStyleSheet("color: #b03a36;")
        self.root_cause.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.root_cause.hide()
        self.graph = ExecutionGraphView()
        self.graph.clear(NO_JOBS)
        self.replay = ReplayBar()
        self.attempts = AttemptsPanel()
        self.vertex_plot = VertexPlot()
        self.by_busy = QCheckBox("Colour by busy")
        self.by_busy.setToolTip("Tint each vertex by the share of its subtasks' time spent "
                                "running over the last seconds")
        header = QHBoxLayout()
        header.addWidget(QLabel("Job"))
        header.addWidget(self.jobs, 2)
        header.addWidget(self.status)
        header.addWidget(self.progress, 3)
        header.addWidget(self.by_busy)
        graph_area = QWidget()
        graph_layout = QVBoxLayout(graph_area)
        graph_layout.setContentsMargins(0, 0, 0, 0)
        graph_layout.addWidget(self.graph, 1)
        graph_layout.addWidget(self.replay)
        self.spark = SparkWorkView()
        self.details = QTabWidget()
        self.details.addTab(self.vertex_plot, "Numbers")
        self.details.addTab(self.spark, "Spark jobs")
        below = QSplitter(Qt.Orientation.Horizontal)
        below.addWidget(self.attempts)
        below.addWidget(self.details)
        below.setSizes([500, 400])
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(graph_area)
        splitter.addWidget(below)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([600, 400])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(header)
        layout.addWidget(StateLegend())
        layout.addWidget(self.root_cause)
        layout.addWidget(splitter, 1)
        self.jobs.currentIndexChanged.connect(self._on_choice)
        self.graph.subtask_clicked.connect(self._refresh_attempts)
        self.graph.subtask_clicked.connect(lambda *_: self._open_script())
        self.graph.subtask_clicked.connect(lambda *_: self.refresh_numbers())
        self.replay.moved.connect(self._on_replay)
        self.by_busy.toggled.connect(lambda _on: self.refresh_numbers())
        # Rates fall to zero when a job stops reporting: redrawn now and then, not only
        # when numbers arrive.
        self._numbers_timer = QTimer(self)
        self._numbers_timer.timeout.connect(self.refresh_numbers)
        self._numbers_timer.start(2000)

    @property
    def current_job(self) -> str | None:
        data = self.jobs.currentData()
        return str(data) if data is not None else None

    def set_job(self, job_id: str, snapshot: JobGraphSnapshot) -> None:
        """A new snapshot of one job (bridge, coalesced). Redraws it if it is shown. A new
        job is shown at once unless the job on screen is still going."""
        self.snapshots[job_id] = snapshot
        label = f"{snapshot.name} ({job_id}) \u2014 {snapshot.status}"
        index = self.jobs.findData(job_id)
        if index < 0:
            shown = self.snapshots.get(self.current_job or "")
            self.jobs.addItem(label, job_id)
            if shown is None or shown.status.is_terminal:
                self.jobs.setCurrentIndex(self.jobs.count() - 1)
            return
        self.jobs.setItemText(index, label)
        if job_id == self.current_job:
            self.replay.set_span(*job_span(snapshot))
            if not self.replay.replaying:
                self._draw(snapshot)

    def apply_events(self, events: list[Any]) -> None:
        """Execution events (bridge, per tick): recolour the shown job's cells at once,
        ahead of its next snapshot. Not while replaying."""
        job_id = self.current_job
        if job_id is None or self.replay.replaying:
            return
        for event in events:
            if getattr(event, "job_id", None) == job_id and hasattr(event, "attempt_id"):
                self.graph.apply_event(event.vertex_id, event.subtask, event.attempt,
                                       event.new)

    def show_metrics(self, changed: set[str]) -> None:
        """New live numbers arrived for the jobs ``changed`` (the window, per tick)."""
        if self.current_job in changed:
            self.refresh_numbers()

    def refresh_numbers(self) -> None:
        """The shown job's numbers on its graph, its selected vertex's in the plot."""
        job_id = self.current_job
        snapshot = self.snapshots.get(job_id or "")
        if job_id is None or snapshot is None:
            return
        self.metrics.set_parallelism(job_id, {v.id: v.parallelism for v in snapshot.vertices})
        self.graph.set_numbers(self.metrics.vertices(job_id, time.time()),
                               self.by_busy.isChecked())
        selected = self.graph.selected
        vertex = snapshot.vertex(selected[0]) if selected is not None else None
        if vertex is None:
            self.vertex_plot.clear()
            return
        self.vertex_plot.show_rates(f"{vertex.name}: records/s and busy share",
                                    self.metrics.rates(job_id, vertex.id))

    def history(self) -> JobHistory | None:
        """The shown job's history (its snapshot and recorded events), cached until either
        changes."""
        job_id = self.current_job
        snapshot = self.snapshots.get(job_id or "")
        if job_id is None or snapshot is None:
            return None
        key = (job_id, id(snapshot), self.recorder.count(job_id))
        if self._history is None or self._history[0] != key:
            self._history = (key, JobHistory(snapshot, self.recorder.events(job_id)))
        return self._history[1]

    def select_job(self, job_id: str) -> None:
        index = self.jobs.findData(job_id)
        if index >= 0:
            self.jobs.setCurrentIndex(index)

    def clear(self) -> None:
        self.snapshots.clear()
        self._history = None
        self.replay.reset()
        self.jobs.clear()
        self.graph.clear(NO_JOBS)
        self.attempts.clear()
        self.vertex_plot.clear()
        self.status.clear()
        self.status.setStyleSheet("")
        self.progress.clear()
        self.root_cause.hide()

    def _on_choice(self, _index: int) -> None:
        job_id = self.current_job
        if job_id is None:
            return
        was_replaying = self.replay.replaying
        self.replay.reset()
        self.attempts.clear()
        snapshot = self.snapshots[job_id]
        self.replay.set_span(*job_span(snapshot))
        self._draw(snapshot)
        self.refresh_numbers()
        self._open_script()
        if was_replaying:
            self.replay_changed.emit(None, None)
        self.job_chosen.emit(job_id)

    def _on_replay(self, moment: float | None) -> None:
        job_id = self.current_job
        if job_id is None:
            return
        if moment is None:
            self._draw(self.snapshots[job_id])
            self.replay_changed.emit(None, None)
            return
        history = self.history()
        if history is None:
            return
        snapshot = history.at(moment)
        self._draw(snapshot)
        self.replay_changed.emit(snapshot, moment)

    def _draw(self, snapshot: JobGraphSnapshot) -> None:
        self.graph.show_snapshot(snapshot)
        status = snapshot.status
        if status != self.status.text():
            colour = JOB_STATUS_COLOURS.get(status)
            self.status.setText(str(status))
            self.status.setStyleSheet(
                f"background: {colour.name()}; color: {text_colour_on(colour).name()}; "
                "border-radius: 3px; padding: 2px 6px; font-weight: bold;" if colour else "")
        self.progress.set_progress(snapshot.progress.finished, snapshot.progress.total,
                                   progress_text(snapshot))
        self.spark.show_work(snapshot.spark[-1] if snapshot.spark else None)
        cause = snapshot.root_cause
        if cause is not None:
            where = f"{subtask_id(cause.vertex_id, cause.subtask)} attempt " \
                    f"{cause.attempt} on {cause.taskmanager_id or '?'}"
            self.root_cause.setText(f"Root cause: {cause.exception_type}: "
                                    f"{cause.message} ({where})")
            self.root_cause.show()
        else:
            self.root_cause.hide()
        if self.graph.selected is not None:
            self._refresh_attempts(*self.graph.selected)

    def _open_script(self) -> None:
        """A PySpark script's vertex opens into its Spark jobs and stages."""
        snapshot = self.graph.snapshot
        if snapshot is not None and snapshot.kind is JobKind.PYSPARK_SCRIPT:
            self.details.setCurrentWidget(self.spark)

    def _refresh_attempts(self, vertex_id: str, subtask: int) -> None:
        snapshot = self.graph.snapshot
        vertex = snapshot.vertex(vertex_id) if snapshot is not None else None
        if vertex is not None and 0 <= subtask < len(vertex.subtasks):
            self.attempts.show_subtask(vertex, vertex.subtasks[subtask])


def progress_text(snapshot: JobGraphSnapshot) -> str | None:
    """The bar says what the JobMaster counted; None: the strip's own subtask text."""
    progress = snapshot.progress
    return f"{progress.finished} / {progress.total} Spark stages done" \
        if progress.spark_stages else None
