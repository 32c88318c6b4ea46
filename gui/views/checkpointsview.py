"""The checkpoints view: the chosen streaming job's checkpoints, a summary line above a
table of the newest (gui/models/checkpointsmodel.py), failed ones on a red ground with
their reason. A batch job, or a job not chosen yet, shows why there is nothing instead of
an empty table. "Inspect State…" (a button, and the table's context menu) asks for the
State view of the selected completed checkpoint or savepoint (``state_wanted``). The view
only draws: its model is fed by the window from the bridge's job snapshots. GUI thread
only.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.protocol.checkpointstats import CheckpointStats, CheckpointStatus
from clusterdeck.gui.models.checkpointsmodel import COLUMNS, CheckpointsModel

_WIDTHS = {"ID": 50, "Type": 110, "Status": 90, "Triggered": 80, "Duration": 75, "Size": 80,
           "Acknowledged": 95, "Alignment": 75}


class CheckpointsView(QWidget):
    """A summary line, then the table or the reason it is empty."""

    state_wanted = Signal(str)
    """The State view of the chosen job at the selected row: a checkpoint id, or a
    savepoint's folder."""

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
        self.inspect = QPushButton("Inspect State\u2026")
        self.inspect.setToolTip("The keyed state of the selected completed checkpoint or "
                                "savepoint (clusterdeck state)")
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.inspect, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.stack, 1)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.selectionModel().selectionChanged.connect(self._enable)
        model.modelReset.connect(self._enable)
        self.inspect.clicked.connect(self.inspect_selected)
        model.summary_changed.connect(self._redraw)
        self._redraw()
        self._enable()

    def selected(self) -> CheckpointStats | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.row_at(rows[0].row()) if rows else None

    def savepoints(self) -> list[str]:
        """The folders of the chosen job's written savepoints, newest first."""
        rows = (self.model.row_at(row) for row in range(self.model.rowCount()))
        return [row.path for row in rows if row is not None and row.savepoint and row.path]

    def inspect_selected(self) -> None:
        which = inspectable(self.selected())
        if which:
            self.state_wanted.emit(which)

    def _enable(self, *_: object) -> None:
        self.inspect.setEnabled(bool(inspectable(self.selected())))

    def _context_menu(self, position: QPoint) -> None:
        index = self.table.indexAt(position)
        if not index.isValid():
            return
        self.table.selectRow(index.row())
        menu = QMenu(self)
        action = menu.addAction("Inspect State\u2026", self.inspect_selected)
        action.setEnabled(bool(inspectable(self.selected())))
        menu.popup(self.table.viewport().mapToGlobal(position))

    def _redraw(self) -> None:
        """The model's summary and, without rows, why there are none."""
        summary = self.model.summary()
        self.summary.setText(summary)
        self.summary.setVisible(bool(summary))
        empty = self.model.empty_text()
        self.empty.setText(empty)
        self.stack.setCurrentWidget(self.empty if empty else self.table)


def inspectable(row: CheckpointStats | None) -> str:
    """What the State view reads of ``row``: a savepoint's folder, a completed
    checkpoint's id; empty for one that holds no state to read."""
    if row is None or row.status is not CheckpointStatus.COMPLETED:
        return ""
    if row.savepoint:
        return row.path
    return str(row.checkpoint_id)
