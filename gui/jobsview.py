"""The jobs view: pick a job, see its status and progress, its ExecutionGraph and, below
it, the attempts of the subtask clicked in it, and the job's root cause when it failed.

It keeps the latest snapshot of every job the bridge delivered (``set_job``) and draws
the chosen one; a click on a subtask cell fills the attempts panel from the same
snapshot, and later snapshots keep it current. GUI thread only.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gui.attempts import AttemptsPanel
from gui.graphview import ExecutionGraphView
from gui.palette import EXECUTION_STATE_COLOURS, JOB_STATUS_COLOURS, text_colour_on

_TERMINAL = ("FINISHED", "FAILED", "CANCELED")
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


class JobsView(QWidget):
    """Job selector and header, then the graph (as wide as the view: DAGs grow to the
    right), then the attempts panel."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.snapshots: dict[str, dict[str, Any]] = {}
        self.jobs = QComboBox()
        self.jobs.setMinimumContentsLength(24)
        self.jobs.setPlaceholderText("no jobs")
        self.status = QLabel()
        self.status.setMinimumWidth(90)
        self.status.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.progress = QProgressBar()
        self.progress.setFormat("")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.root_cause = QLabel()
        self.root_cause.setWordWrap(True)
        self.root_cause.setStyleSheet("color: #b03a36;")
        self.root_cause.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.root_cause.hide()
        self.graph = ExecutionGraphView()
        self.graph.clear(NO_JOBS)
        self.attempts = AttemptsPanel()
        header = QHBoxLayout()
        header.addWidget(QLabel("Job"))
        header.addWidget(self.jobs, 2)
        header.addWidget(self.status)
        header.addWidget(self.progress, 3)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.graph)
        splitter.addWidget(self.attempts)
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

    @property
    def current_job(self) -> str | None:
        data = self.jobs.currentData()
        return str(data) if data is not None else None

    def set_job(self, job_id: str, snapshot: dict[str, Any]) -> None:
        """A new snapshot of one job (bridge, coalesced). Redraws it if it is shown. A new
        job is shown at once unless the job on screen is still going."""
        self.snapshots[job_id] = snapshot
        label = f"{snapshot.get('name', job_id)} ({job_id}) \u2014 {snapshot.get('status', '')}"
        index = self.jobs.findData(job_id)
        if index < 0:
            shown = self.snapshots.get(self.current_job or "")
            self.jobs.addItem(label, job_id)
            if shown is None or shown.get("status") in _TERMINAL:
                self.jobs.setCurrentIndex(self.jobs.count() - 1)
            return
        self.jobs.setItemText(index, label)
        if job_id == self.current_job:
            self._draw(snapshot)

    def select_job(self, job_id: str) -> None:
        index = self.jobs.findData(job_id)
        if index >= 0:
            self.jobs.setCurrentIndex(index)

    def clear(self) -> None:
        self.snapshots.clear()
        self.jobs.clear()
        self.graph.clear(NO_JOBS)
        self.attempts.clear()
        self.status.clear()
        self.status.setStyleSheet("")
        self.progress.setFormat("")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.root_cause.hide()

    def _on_choice(self, _index: int) -> None:
        job_id = self.current_job
        if job_id is None:
            return
        self.attempts.clear()
        self._draw(self.snapshots[job_id])

    def _draw(self, snapshot: dict[str, Any]) -> None:
        self.graph.show_snapshot(snapshot)
        status = str(snapshot.get("status", ""))
        colour = JOB_STATUS_COLOURS.get(status)
        self.status.setText(status)
        self.status.setStyleSheet(
            f"background: {colour.name()}; color: {text_colour_on(colour).name()}; "
            "border-radius: 3px; padding: 2px 6px; font-weight: bold;" if colour else "")
        progress = snapshot.get("progress") or {}
        self.progress.setFormat("%v / %m subtasks finished")
        self.progress.setRange(0, max(1, int(progress.get("total", 0))))
        self.progress.setValue(int(progress.get("finished", 0)))
        cause = snapshot.get("root_cause")
        if cause:
            where = f"{cause.get('vertex_id')}#{cause.get('subtask')} attempt " \
                    f"{cause.get('attempt')} on {cause.get('taskmanager_id') or '?'}"
            self.root_cause.setText(f"Root cause: {cause.get('exception_type')}: "
                                    f"{cause.get('message')} ({where})")
            self.root_cause.show()
        else:
            self.root_cause.hide()
        if self.graph.selected is not None:
            self._refresh_attempts(*self.graph.selected)

    def _refresh_attempts(self, vertex_id: str, subtask: int) -> None:
        snapshot = self.graph.snapshot or {}
        for vertex in snapshot.get("vertices", ()):
            if str(vertex.get("id")) == vertex_id:
                subtasks = vertex.get("subtasks", ())
                if 0 <= subtask < len(subtasks):
                    self.attempts.show_subtask(vertex, subtasks[subtask])
                return
