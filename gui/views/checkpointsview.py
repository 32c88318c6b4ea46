"""The checkpoints view: the chosen streaming job's checkpoints, a summary line above a
table of the newest (gui/models/checkpointsmodel.py), failed ones on a red ground with
their reason. A batch job, or a job not chosen yet, shows why there is nothing instead of
an empty table. The view only draws: its model is fed by the window from the bridge's
job snapshots. GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.gui.models.checkpointsmodel import COLUMNS, CheckpointsModel

_WIDTHS = {"ID": 50, "Type": 110, "Status": 90, "Triggered": 80, "Duration": 75, "Size": 80,
           "Acknowledged": 95, "Alignment": 75}


class CheckpointsView(QWidget):
    """A summary line, then the table or the reason it is empty."""

    def __init__(self, model: CheckpointsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableView()
        self.table.setModel(model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        for column, title in enumerate(COLUMNS):
            if title in _WIDTHS:
                self.table.setColumnWidth(column, _WIDTHS[title])
        self.empty = QLabel()
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setStyleSheet("color: #6b6b6b;")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.table)
        self.stack.addWidget(self.empty)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        layout.addWidget(self.stack, 1)
        model.summary_changed.connect(self._redraw)
        self._redraw()

    def _redraw(self) -> None:
        """The model's summary and, without rows, why there are none."""
        summary = self.model.summary()
        self.summary.setText(summary)
        self.summary.setVisible(bool(summary))
        empty = self.model.empty_text()
        self.empty.setText(empty)
        self.stack.setCurrentWidget(self.empty if empty else self.table)
