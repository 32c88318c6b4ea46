"""The job list: every job of the cluster, its status, progress and duration.

Rows come from the retained ``JobList`` the Dispatcher publishes: every running job and
the newest ended ones (``jobmanager.job-list.retained``; also those that ended before the
window opened), with the number of all jobs, which the dock shows as "N of M jobs"; an
ended job the list no longer holds leaves the table. A running job's snapshot and its result
refresh its row in between (snapshots arrive up to ten times a second, the list only on a
status change or a finished subtask). Newest jobs are on top. A one-second timer moves
the duration of running jobs on. The Progress column draws a progress bar (a delegate)
from ``PROGRESS_ROLE``: ``(finished, total)`` subtasks.

Model, delegate and view live on the GUI thread, fed by the bridge's signals.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPoint,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QBrush, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QStackedLayout,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.models.formatting import clock, format_duration
from clusterdeck.gui.models.palette import JOB_STATUS_COLOURS, job_colour
from clusterdeck.gui.models.tablemodel import FixedColumnsModel, Index
from clusterdeck.gui.views.progress import draw_progress

COLUMNS = ("Job", "Status", "Progress", "Duration", "Submitted", "Id")
PROGRESS_ROLE = Qt.ItemDataRole.UserRole + 1
JOB_ID_ROLE = Qt.ItemDataRole.UserRole + 2


@dataclass(frozen=True)
class JobRow:
    job_id: str
    name: str
    kind: str = ""
    status: JobStatus = JobStatus.CREATED
    submitted_at: float = 0.0
    finished: int = 0
    total: int = 0
    duration: float | None = None

    @property
    def ended(self) -> bool:
        return JobStatus(self.status).is_terminal

    def shown_duration(self, now: float) -> float | None:
        if self.duration is not None:
            return self.duration
        if self.submitted_at and not self.ended:
            return max(0.0, now - self.submitted_at)
        return None


class JobListModel(FixedColumnsModel):
    """One row per job, newest first. GUI thread only."""

    column_titles = COLUMNS
    counted = Signal(int, int)
    """(rows shown, jobs the cluster has) after each job list."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[JobRow] = []
        self.total = 0  # jobs the cluster has, as its latest job list said
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._tick)
        self._timer.start(1000)

    # -- what the bridge says -----------------------------------------------------------------

    def set_job_list(self, jobs: p.JobList) -> None:
        """The list is the cluster's window of jobs: an ended job it does not hold (deleted
        by retention, or pushed out by newer ones) leaves the table; a running one stays,
        as its snapshot may come before the list names it."""
        for summary in sorted(jobs.jobs, key=lambda s: s.submitted_at):
            self._put(JobRow(summary.job_id, summary.name, summary.kind, summary.status,
                             summary.submitted_at, summary.finished, summary.total,
                             summary.duration), prefer_known_progress=True)
        listed = {summary.job_id for summary in jobs.jobs}
        for index in reversed(range(len(self._rows))):
            if self._rows[index].ended and self._rows[index].job_id not in listed:
                self.beginRemoveRows(QModelIndex(), index, index)
                del self._rows[index]
                self.endRemoveRows()
        self.total = max(jobs.total, len(self._rows))
        self.counted.emit(len(self._rows), self.total)

    def set_snapshot(self, job_id: str, snapshot: JobGraphSnapshot) -> None:
        known = self.row(job_id)
        stamps = snapshot.status_timestamps
        row = JobRow(job_id, snapshot.name, str(snapshot.kind), snapshot.status,
                     known.submitted_at if known else min(stamps.values(), default=0.0),
                     snapshot.progress.finished, snapshot.progress.total,
                     known.duration if known else None)
        self._put(row)

    def set_result(self, job_id: str, result: p.JobResult) -> None:
        known = self.row(job_id)
        base = known or JobRow(job_id, result.name)
        self._put(replace(base, status=result.status, duration=result.duration,
                          finished=result.finished or base.finished,
                          total=result.total or base.total))

    def clear(self) -> None:
        self.beginResetModel()
        self._rows = []
        self.total = 0
        self.endResetModel()
        self.counted.emit(0, 0)

    # -- reading ------------------------------------------------------------------------------

    def rows(self) -> list[JobRow]:
        return list(self._rows)

    def row(self, job_id: str) -> JobRow | None:
        return next((row for row in self._rows if row.job_id == job_id), None)

    def row_of(self, job_id: str) -> int:
        return next((i for i, row in enumerate(self._rows) if row.job_id == job_id), -1)

    def row_count(self) -> int:
        return len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = self._rows[index.row()]
        column = COLUMNS[index.column()]
        if role == JOB_ID_ROLE:
            return row.job_id
        if role == PROGRESS_ROLE:
            return (row.finished, row.total)
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(row, column)
        if role == Qt.ItemDataRole.DecorationRole and column == "Job":
            return job_colour(row.job_id)  # the job's colour in the slot grid and timeline
        if role == Qt.ItemDataRole.ForegroundRole and column == "Status":
            colour = JOB_STATUS_COLOURS.get(row.status)
            return QBrush(colour) if colour is not None else None
        if role == Qt.ItemDataRole.FontRole and column == "Status":
            font = QApplication.font()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{row.name} ({row.kind or 'job'}), id {row.job_id}: {row.status}, " \
                   f"{row.finished}/{row.total} subtasks finished"
        if role == Qt.ItemDataRole.TextAlignmentRole and column in ("Duration", "Progress"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _text(self, row: JobRow, column: str) -> str:
        if column == "Job":
            return row.name
        if column == "Status":
            return str(row.status)
        if column == "Progress":
            return f"{row.finished} / {row.total}"
        if column == "Duration":
            return format_duration(row.shown_duration(time.time()))
        if column == "Submitted":
            return clock(row.submitted_at)
        return row.job_id

    # -- changes ------------------------------------------------------------------------------

    def _put(self, row: JobRow, prefer_known_progress: bool = False) -> None:
        index = self.row_of(row.job_id)
        if index < 0:
            self.beginInsertRows(QModelIndex(), 0, 0)
            self._rows.insert(0, row)
            self.endInsertRows()
            return
        known = self._rows[index]
        if known.ended and not row.ended:
            return  # a late message of a job that already ended
        if prefer_known_progress and not row.ended and known.total and (
                known.finished > row.finished):
            row = replace(row, finished=known.finished, total=known.total)
        if row.duration is None:
            row = replace(row, duration=known.duration)
        if row != known:
            self._rows[index] = row
            self.dataChanged.emit(self.index(index, 0), self.index(index, len(COLUMNS) - 1))

    def _tick(self) -> None:
        column = COLUMNS.index("Duration")
        for index, row in enumerate(self._rows):
            if not row.ended and row.duration is None:
                self.dataChanged.emit(self.index(index, column), self.index(index, column))


class ProgressDelegate(QStyledItemDelegate):
    """Draws ``PROGRESS_ROLE`` as a progress bar with ``finished / total`` on it."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        finished, total = index.data(PROGRESS_ROLE) or (0, 0)
        if option.state & QStyle.StateFlag.State_Selected:
            painter.fillRect(option.rect, option.palette.highlight())
        draw_progress(painter, option.rect.adjusted(3, 3, -3, -3), finished, total,
                      f"{finished} / {total}", option.widget,
                      QStyle.StateFlag.State_Enabled)


class JobListView(QWidget):
    """The jobs dock: Submit and Cancel, then the table; a drop hint while it is empty.
    Right-click a job for ``job_actions`` (cancel, savepoint, stop), the window's own
    actions, enabled for the job the click selected."""

    job_chosen = Signal(str)
    """The user selected a job in the table."""

    def __init__(self, model: JobListModel, submit: Any, cancel: Any, compare: Any = None,
                 parent: QWidget | None = None, job_actions: Sequence[QAction] = ()) -> None:
        super().__init__(parent)
        self.model = model
        self.job_actions = list(job_actions)
        self.table = QTableView()
        self.table.setModel(model)
        self.table.setItemDelegateForColumn(COLUMNS.index("Progress"), ProgressDelegate(self))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        # Two rows at once (Ctrl+click) for Compare Jobs.
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column, width in (("Status", 100), ("Progress", 150), ("Duration", 90),
                              ("Submitted", 80), ("Id", 140)):
            self.table.setColumnWidth(COLUMNS.index(column), width)
        self.hint = QLabel("Drop a job file (.py) anywhere on the window, or use File \u203a "
                           "Submit Job\u2026\n\nA job file defines build(env), or is a "
                           "PySpark script.")
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("QLabel { border: 2px dashed #9aa4b2; border-radius: 8px; "
                                "color: #5b6470; padding: 16px; font-size: 13px; }")
        buttons = QHBoxLayout()
        for action in (submit, cancel, compare):
            if action is None:
                continue
            button = QToolButton()
            button.setDefaultAction(action)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
            buttons.addWidget(button)
        buttons.addStretch(1)
        self.count = QLabel()
        self.count.setStyleSheet("QLabel { color: #5b6470; }")
        buttons.addWidget(self.count)
        self._stack = QStackedLayout()
        self._stack.addWidget(self.hint)
        self._stack.addWidget(self.table)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(buttons)
        layout.addLayout(self._stack, 1)
        model.rowsInserted.connect(self._show_table)
        model.modelReset.connect(self._show_table)
        model.counted.connect(self._show_count)
        self.table.selectionModel().currentRowChanged.connect(self._on_current)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)

    @property
    def selected_job(self) -> str | None:
        index = self.table.currentIndex()
        return str(index.data(JOB_ID_ROLE)) if index.isValid() else None

    @property
    def selected_jobs(self) -> list[str]:
        """The selected jobs, top to bottom."""
        indexes = sorted(self.table.selectionModel().selectedRows(), key=lambda i: i.row())
        return [str(index.data(JOB_ID_ROLE)) for index in indexes]

    def select(self, job_id: str) -> None:
        """Make ``job_id`` the current row (no signal when it already is)."""
        row = self.model.row_of(job_id)
        if row >= 0 and self.selected_job != job_id:
            self.table.selectRow(row)

    def _show_count(self, shown: int, total: int) -> None:
        if not total:
            self.count.clear()
        elif shown < total:
            self.count.setText(f"{shown} of {total} jobs")
        else:
            self.count.setText(f"{total} job{'s' if total != 1 else ''}")

    def _show_table(self, *_: Any) -> None:
        self._stack.setCurrentIndex(1 if self.model.rowCount() else 0)

    def job_menu(self, position: QPoint) -> QMenu | None:
        """The menu of the job under ``position`` (viewport coordinates), which it makes
        the current job first; None off the rows."""
        index = self.table.indexAt(position)
        if not index.isValid() or not self.job_actions:
            return None
        self.select(str(index.data(JOB_ID_ROLE)))
        menu = QMenu(self)
        menu.addActions(self.job_actions)
        return menu

    def _context_menu(self, position: QPoint) -> None:
        menu = self.job_menu(position)
        if menu is not None:
            menu.popup(self.table.viewport().mapToGlobal(position))

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.job_chosen.emit(str(current.data(JOB_ID_ROLE)))
