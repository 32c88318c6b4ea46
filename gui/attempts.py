"""The side panel of the ExecutionGraph view: every attempt of the selected subtask.

A subtask that failed and ran again has several attempts; this panel lists them with
their state, slot, times and failure, and shows the chosen attempt's failure in full
(exception, message, traceback, the task's last log lines). It reads the same snapshot
dict the graph view draws. GUI thread only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

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

from gui.palette import execution_colour

_COLUMNS = ("#", "State", "Slot", "Started", "Ended", "Duration", "Failure")


def _clock(timestamp: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(timestamp)) if timestamp else ""


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


def failure_text(failure: Mapping[str, Any] | None) -> str:
    """A failure dict (FailureRecord/TaskFailure.to_dict()) as a reader wants it."""
    if not failure:
        return ""
    lines = [f"{failure.get('exception_type', 'Failure')}: {failure.get('message', '')}"]
    if failure.get("traceback"):
        lines += ["", str(failure["traceback"]).rstrip()]
    if failure.get("log_excerpt"):
        lines += ["", "log excerpt:", *map(str, failure["log_excerpt"])]
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
        self._attempts: list[Mapping[str, Any]] = []
        self.subtask: tuple[str, int] | None = None
        self.table.itemSelectionChanged.connect(self._show_selected_failure)

    def show_subtask(self, vertex: Mapping[str, Any], subtask: Mapping[str, Any]) -> None:
        """Fill the panel from one vertex dict and one of its subtask dicts."""
        self.subtask = (str(vertex.get("id", "")), int(subtask.get("subtask", 0)))
        attempts = list(subtask.get("attempts") or ())
        keep = self.table.currentRow()
        same_rows = len(attempts) == len(self._attempts)
        self._attempts = attempts
        state = str(subtask.get("state", ""))
        self.title.setText(f"<b>{vertex.get('name', vertex.get('id'))}</b> subtask "
                           f"{self.subtask[1] + 1}/{vertex.get('parallelism', '?')} "
                           f"({subtask.get('id', '')}): <b>{state}</b>, "
                           f"{len(attempts)} attempt{'s' if len(attempts) != 1 else ''}")
        self.table.setRowCount(len(attempts))
        for row, attempt in enumerate(attempts):
            self._fill_row(row, attempt)
        if same_rows and keep >= 0:
            self.table.selectRow(keep)
        else:
            failed = [i for i, a in enumerate(attempts) if a.get("failure")]
            self.table.selectRow(failed[-1] if failed else len(attempts) - 1)
        self._show_selected_failure()

    def clear(self) -> None:
        self.subtask = None
        self._attempts = []
        self.table.setRowCount(0)
        self.detail.clear()
        self.title.setText("Click a subtask to see its attempts.")

    def _fill_row(self, row: int, attempt: Mapping[str, Any]) -> None:
        slot = attempt.get("slot") or {}
        failure = attempt.get("failure") or {}
        state = str(attempt.get("state", ""))
        values = (str(attempt.get("attempt", row)), state,
                  f"{slot['taskmanager_id']}/{slot['slot_index']}" if slot else "",
                  _clock(attempt.get("start_time")), _clock(attempt.get("end_time")),
                  _duration(attempt.get("start_time"), attempt.get("end_time")),
                  str(failure.get("exception_type", "")))
        for column, value in enumerate(values):
            item = QTableWidgetItem(value)
            if column == 1:
                item.setIcon(state_icon(state))
            if column == len(values) - 1 and failure:
                item.setToolTip(str(failure.get("message", "")))
            self.table.setItem(row, column, item)

    def _show_selected_failure(self) -> None:
        row = self.table.currentRow()
        attempt = self._attempts[row] if 0 <= row < len(self._attempts) else {}
        self.detail.setPlainText(failure_text(attempt.get("failure")))
