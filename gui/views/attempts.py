"""The side panel of the ExecutionGraph view: every attempt of the selected subtask.

A subtask that failed and ran again has several attempts; this panel lists them with
their state, slot, times and failure, and shows the chosen attempt's failure in full
(exception, message, traceback, the task's last log lines). It reads the same
``JobGraphSnapshot`` the graph view draws. GUI thread only.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFontDatabase, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.snapshots import AttemptSnapshot, SubtaskSnapshot, VertexSnapshot
from clusterdeck.gui.models.formatting import clock
from clusterdeck.gui.models.palette import execution_colour

_COLUMNS = ("#", "State", "Slot", "Started", "Ended", "Duration", "Failure")


def _duration(start: float | None, end: float | None) -> str:
    if start is None:
        return ""
    return f"{(end if end is not None else time.time()) - start:.1f} s"


def state_icon(state: str) -> QIcon:
    """A small square in the state's colour: it stays visible in a selected row."""
    pixmap = QPixmap(12, 12)
    pixmap.fill(QColor(0, 0, 0, 0))
    painter = QPainter(pixmap)
    painter.setPen(QColor("#5b6470"))
    painter.setBrush(execution_colour(state))
    painter.drawRect(0, 0, 11, 11)
    painter.end()
    return QIcon(pixmap)


def failure_text(failure: FailureRecord | None) -> str:
    """A failure record as a reader wants it."""
    if failure is None:
        return ""
    lines = [f"{failure.exception_type}: {failure.message}"]
    if failure.traceback:
        lines += ["", failure.traceback.rstrip()]
    if failure.log_excerpt:
        lines += ["", "log excerpt:", *failure.log_excerpt]
    return "\n".join(lines)


class AttemptsPanel(QWidget):
    """Attempts of one subtask, newest last; selecting one shows its failure."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("Click a subtask to see its attempts.")
        self.title.setWordWrap(True)
        self.table = QTableWidget(0, len(_COLUMNS))
        self.table.setHorizontalHeaderLabels(_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.detail.setPlaceholderText("The selected attempt's failure, if it failed.")
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.table)
        splitter.addWidget(self.detail)
        splitter.setSizes([500, 400])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addWidget(splitter, 1)
        self._attempts: tuple[AttemptSnapshot, ...] = ()
        self.subtask: tuple[str, int] | None = None
        self.table.itemSelectionChanged.connect(self._show_selected_failure)

    def show_subtask(self, vertex: VertexSnapshot, subtask: SubtaskSnapshot) -> None:
        """Fill the panel from one vertex and one of its subtasks."""
        self.subtask = (vertex.id, subtask.subtask)
        attempts = subtask.attempts
        keep = self.table.currentRow()
        same_rows = len(attempts) == len(self._attempts)
        self._attempts = attempts
        self.title.setText(f"<b>{vertex.name}</b> subtask "
                           f"{self.subtask[1] + 1}/{vertex.parallelism} "
                           f"({subtask.id}): <b>{subtask.state}</b>, "
                           f"{len(attempts)} attempt{'s' if len(attempts) != 1 else ''}")
        self.table.setRowCount(len(attempts))
        for row, attempt in enumerate(attempts):
            self._fill_row(row, attempt)
        if same_rows and keep >= 0:
            self.table.selectRow(keep)
        else:
            failed = [i for i, a in enumerate(attempts) if a.failure is not None]
            self.table.selectRow(failed[-1] if failed else len(attempts) - 1)
        self._show_selected_failure()

    def clear(self) -> None:
        self.subtask = None
        self._attempts = ()
        self.table.setRowCount(0)
        self.detail.clear()
        self.title.setText("Click a subtask to see its attempts.")

    def _fill_row(self, row: int, attempt: AttemptSnapshot) -> None:
        slot, failure = attempt.slot, attempt.failure
        values = (str(attempt.attempt), str(attempt.state),
                  f"{slot.taskmanager_id}/{slot.slot_index}" if slot else "",
                  clock(attempt.start_time), clock(attempt.end_time),
                  _duration(attempt.start_time, attempt.end_time),
                  failure.exception_type if failure else "")
        for column, value in enumerate(values):
            item = QTableWidgetItem(value)
            if column == 1:
                item.setIcon(state_icon(attempt.state))
            if column == len(values) - 1 and failure:
                item.setToolTip(failure.message)
            self.table.setItem(row, column, item)

    def _show_selected_failure(self) -> None:
        row = self.table.currentRow()
        attempt = self._attempts[row] if 0 <= row < len(self._attempts) else None
        self.detail.setPlainText(failure_text(attempt.failure if attempt else None))
