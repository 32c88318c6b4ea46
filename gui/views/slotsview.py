"""The slots view: a slot grid per TaskManager, the task timeline per slot and the slot
utilisation over time.

The ClusterOverview says how many slots each TaskManager has and how many are free; it
does not say whose the busy ones are. The job snapshots do (the slot of every deploying
or running attempt), so a busy slot a job snapshot names is coloured by that job, and a
busy slot no snapshot names is drawn in the generic busy colour. The overview's count
wins when the two disagree for a moment.

The plot follows pyqtgraph's scrolling-plot recipe: the curves are created once, fed
from a preallocated ring buffer, and redrawn by a timer; overview messages only replace
the latest value. During a replay (``set_replay``) the grid shows the replayed job's slots
as they were, from its replayed snapshot alone, and the timeline marks the moment.
Everything here runs on the GUI thread.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QLabel, QScrollArea, QSplitter, QTabWidget, QVBoxLayout, QWidget

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.gui.jobfeed import busy_slots
from clusterdeck.gui.models.formatting import clock
from clusterdeck.gui.models.palette import SLOT_BUSY, SLOT_FREE, SLOT_LOST, SLOT_OUTLINE, job_colour
from clusterdeck.gui.views.timeline import SlotTimeline

_CELL = 30
_GAP = 4
_LABEL_WIDTH = 190
_ROW_HEIGHT = _CELL + 12
_MIN_SPAN = 60.0  # seconds the plot's time axis shows at least


class SlotGrid(QWidget):
    """One row per TaskManager: its name and state, then one cell per slot."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._overview: p.ClusterOverview | None = None
        self._owners: dict[tuple[str, int], tuple[str, str]] = {}
        self._job_names: dict[str, str] = {}
        self.replaying = False
        self.setMouseTracking(True)
        # Job snapshots arrive up to ten times a second per job; the grid repaints at most
        # four times a second (its data is current at once, only the paint waits).
        self._repaint = QTimer(self)
        self._repaint.setSingleShot(True)
        self._repaint.setInterval(250)
        self._repaint.timeout.connect(self.update)

    def set_overview(self, overview: p.ClusterOverview | None) -> None:
        self._overview = overview
        self.updateGeometry()
        self.update()

    def set_jobs(self, snapshots: dict[str, JobGraphSnapshot], replaying: bool = False) -> None:
        """Whose the busy slots are. ``replaying``: the snapshots are the truth (a past
        moment), not the overview's busy counts."""
        owners = busy_slots(snapshots)
        self._job_names = {job_id: s.name for job_id, s in snapshots.items()}
        if owners != self._owners or replaying != self.replaying:
            self._owners = owners
            self.replaying = replaying
            if not self._repaint.isActive():
                self._repaint.start()

    def cells(self) -> list[tuple[str, int, str]]:
        """``(taskmanager_id, slot_index, what)`` for every cell drawn; ``what`` is
        ``free``, ``busy``, ``lost`` or a job id. For tests and tooltips."""
        result = []
        for tm in self._taskmanagers():
            result += [(tm.id, index, what) for index, what in enumerate(self._slot_owners(tm))]
        return result

    def _taskmanagers(self) -> list[p.TaskManagerInfo]:
        return sorted(self._overview.taskmanagers, key=lambda tm: tm.id) if self._overview else []

    def _slot_owners(self, tm: p.TaskManagerInfo) -> list[str]:
        """The overview's busy count is the truth (it comes from the TaskManager's slot
        report); the job snapshots only say whose the busy slots are."""
        if self.replaying:
            return [self._owners.get((tm.id, index), ("free", ""))[0]
                    for index in range(tm.slots_total)]
        if tm.state is p.TaskManagerState.LOST:
            return ["lost"] * max(tm.slots_total, 1)
        busy = tm.slots_total - tm.slots_free
        owners = ["free"] * tm.slots_total
        for index in range(tm.slots_total):
            job_id = self._owners.get((tm.id, index), ("", ""))[0]
            if job_id and busy > 0:
                owners[index] = job_id
                busy -= 1
        for index in range(tm.slots_total):
            if busy > 0 and owners[index] == "free":
                owners[index] = "busy"
                busy -= 1
        return owners

    def sizeHint(self) -> QSize:
        tms = self._taskmanagers()
        widest = max((len(self._slot_owners(tm)) for tm in tms), default=4)
        return QSize(_LABEL_WIDTH + widest * (_CELL + _GAP) + 8,
                     max(1, len(tms)) * _ROW_HEIGHT + 8)

    def minimumSizeHint(self) -> QSize:
        return QSize(_LABEL_WIDTH + 4 * (_CELL + _GAP), _ROW_HEIGHT + 8)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), self.palette().base())
        tms = self._taskmanagers()
        if not tms:
            painter.setPen(self.palette().placeholderText().color())
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter,
                             "No TaskManagers: start or attach to a cluster")
            return
        metrics = painter.fontMetrics()
        for row, tm in enumerate(tms):
            top = 4 + row * _ROW_HEIGHT
            live = tm.state is p.TaskManagerState.REGISTERED
            owners = self._slot_owners(tm)
            painter.setPen(self.palette().text().color() if live else QColor("#d64541"))
            busy = sum(owner not in ("free", "lost") for owner in owners) if self.replaying \
                else tm.slots_total - tm.slots_free
            label = f"{tm.id}  {busy}/{tm.slots_total}" if live or self.replaying \
                else f"{tm.id}  lost"
            painter.drawText(QRectF(6, top, _LABEL_WIDTH - 10, _CELL),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                             metrics.elidedText(label, Qt.TextElideMode.ElideRight,
                                                _LABEL_WIDTH - 10))
            for index, owner in enumerate(owners):
                rect = QRectF(_LABEL_WIDTH + index * (_CELL + _GAP), top, _CELL, _CELL)
                painter.setPen(QPen(SLOT_OUTLINE, 1))
                painter.setBrush(self._fill(owner))
                painter.drawRoundedRect(rect, 4, 4)
                if owner == "lost":
                    painter.drawLine(rect.topLeft(), rect.bottomRight())

    def _fill(self, owner: str) -> QColor:
        return {"free": SLOT_FREE, "busy": SLOT_BUSY, "lost": SLOT_LOST}.get(
            owner) or job_colour(owner)

    def event(self, event: Any) -> bool:
        if event.type() == event.Type.ToolTip:
            self.setToolTip(self._tooltip_at(event.pos().x(), event.pos().y()))
        return super().event(event)

    def _tooltip_at(self, x: float, y: float) -> str:
        tms = self._taskmanagers()
        row = int((y - 4) // _ROW_HEIGHT)
        if not 0 <= row < len(tms) or x < _LABEL_WIDTH:
            return ""
        tm = tms[row]
        index = int((x - _LABEL_WIDTH) // (_CELL + _GAP))
        owners = self._slot_owners(tm)
        if not 0 <= index < len(owners):
            return ""
        owner = owners[index]
        where = f"{tm.id}, slot {index}"
        if owner in ("free", "busy", "lost"):
            return f"{where}: {owner}"
        subtask = self._owners.get((tm.id, index), ("", ""))[1]
        return f"{where}: {self._job_names.get(owner, owner)} ({subtask})"


class UtilisationPlot(pg.PlotWidget):
    """Busy and total slots over the last ``history`` samples, one sample per tick."""

    def __init__(self, parent: QWidget | None = None, history: int = 600,
                 interval_ms: int = 1000) -> None:
        super().__init__(parent, background="w")
        self._interval = interval_ms / 1000.0
        self._busy = np.zeros(history)
        self._total = np.zeros(history)
        self._times = np.zeros(history)
        self._count = 0
        self._latest: p.ClusterOverview | None = None
        self.setLabel("left", "slots")
        self.setLabel("bottom", "seconds ago")
        self.showGrid(x=True, y=True, alpha=0.25)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.addLegend(offset=(8, 8))
        self._total_curve = self.plot(pen=pg.mkPen("#6b6b6b", width=2,
                                                   style=Qt.PenStyle.DashLine), name="total")
        self._busy_curve = self.plot(pen=pg.mkPen("#e07b39", width=2),
                                     brush=pg.mkBrush(224, 123, 57, 70), fillLevel=0,
                                     name="busy")
        self.setXRange(-_MIN_SPAN, 0, padding=0)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.sample)
        self._timer.start(interval_ms)

    def set_overview(self, overview: p.ClusterOverview | None) -> None:
        """Only keeps the latest; the timer samples it."""
        self._latest = overview

    def sample(self) -> None:
        """Timer: shift in one sample of the latest overview and redraw; without a
        cluster there is nothing to sample."""
        overview = self._latest
        if overview is None:
            return
        total = overview.slots_total
        busy = overview.slots_total - overview.slots_free
        self._busy[:-1] = self._busy[1:]
        self._total[:-1] = self._total[1:]
        self._times[:-1] = self._times[1:]
        self._busy[-1], self._total[-1], self._times[-1] = busy, total, time.monotonic()
        self._count = min(self._count + 1, len(self._busy))
        self._redraw()

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """(busy, total) of the samples taken so far, oldest first."""
        start = len(self._busy) - self._count  # not -count: -0 would be everything
        return self._busy[start:].copy(), self._total[start:].copy()

    def clear_history(self) -> None:
        self._count = 0
        self._redraw()

    def _redraw(self) -> None:
        if self._count == 0:
            self._busy_curve.setData([], [])
            self._total_curve.setData([], [])
            return
        x = self._times[-self._count:] - self._times[-1]
        self._busy_curve.setData(x, self._busy[-self._count:])
        self._total_curve.setData(x, self._total[-self._count:])
        self.setXRange(-max(_MIN_SPAN, float(-x[0])), 0, padding=0)
        self.setYRange(0, max(1.0, float(self._total[-self._count:].max())) * 1.15,
                       padding=0)


class SlotsView(QWidget):
    """The dock's content: a one-line summary, the grid, then the task timeline and the
    utilisation plot as tabs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = SlotGrid()
        self.plot = UtilisationPlot()
        self.timeline = SlotTimeline()
        self.summary = QLabel("no cluster")
        self._jobs: dict[str, JobGraphSnapshot] = {}
        self._overview: p.ClusterOverview | None = None
        self.replay: tuple[JobGraphSnapshot, float] | None = None
        scroll = QScrollArea()
        scroll.setWidget(self.grid)
        scroll.setWidgetResizable(True)
        scroll.setMinimumHeight(2 * _ROW_HEIGHT + 12)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.timeline, "Task timeline")
        self.tabs.addTab(self.plot, "Utilisation")
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(scroll)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        layout.addWidget(splitter, 1)

    def set_overview(self, overview: p.ClusterOverview | None) -> None:
        self._overview = overview
        self.grid.set_overview(overview)
        self.plot.set_overview(overview)
        self.timeline.set_overview(overview)
        self._summarise()

    def set_job(self, job_id: str, snapshot: JobGraphSnapshot) -> None:
        self._jobs[job_id] = snapshot
        self.timeline.set_jobs(self._jobs)
        if self.replay is None:
            self.grid.set_jobs(self._jobs)

    def set_replay(self, snapshot: JobGraphSnapshot | None, moment: float | None) -> None:
        """Show one job's slots as they were at ``moment`` (its replayed snapshot); None
        returns to live."""
        if snapshot is None or moment is None:
            self.replay = None
            self.grid.set_jobs(self._jobs)
            self.timeline.set_moment(None)
        else:
            self.replay = (snapshot, moment)
            self.grid.set_jobs({snapshot.job_id: snapshot}, replaying=True)
            self.timeline.set_moment(moment)
        self._summarise()

    def clear(self) -> None:
        self._jobs.clear()
        self.replay = None
        self.grid.set_jobs({})
        self.timeline.clear_all()
        self.set_overview(None)
        self.plot.clear_history()

    def _summarise(self) -> None:
        overview = self._overview
        if overview is None:
            self.summary.setText("no cluster")
            return
        if self.replay is not None:
            snapshot, moment = self.replay
            busy = sum(1 for *_, what in self.grid.cells() if what not in ("free", "lost"))
            self.summary.setText(
                f"replay at {clock(moment)}: "
                f"{snapshot.name} held {busy} slot{'s' if busy != 1 else ''}")
            self.summary.setStyleSheet("color: #9b59b6; font-weight: bold;")
            return
        self.summary.setStyleSheet("")
        live = sum(tm.state is p.TaskManagerState.REGISTERED for tm in overview.taskmanagers)
        busy = overview.slots_total - overview.slots_free
        self.summary.setText(f"{busy} of {overview.slots_total} slots busy on {live} "
                             f"TaskManager{'s' if live != 1 else ''}")
