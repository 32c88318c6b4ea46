"""Two runs of a job side by side (core/client/comparison.py), in a window of its own: per
vertex its time, records and failed attempts, the change from the first run to the
second, red where the second is slower or failed more, green where it is faster."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.client.comparison import ComparisonRow, RunSummary, compare

_WORSE = QColor("#f6d5d3")
_BETTER = QColor("#d7f0dc")
COLUMNS = ("", "", "first run", "second run", "change")


class ComparisonWindow(QWidget):
    def __init__(self, first: RunSummary, second: RunSummary,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle(f"Compare {first.name}: {first.job_id} and {second.job_id}")
        self.rows = compare(first, second)
        note = ("\nA snapshot left out subtasks: vertex times are of the subtasks it kept."
                if first.partial or second.partial else "")
        self.header = QLabel(f"<b>{first.name}</b> ({first.job_id}, {first.status}) and "
                             f"<b>{second.name}</b> ({second.job_id}, {second.status}){note}")
        self.table = QTableWidget(len(self.rows), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for index, row in enumerate(self.rows):
            self._fill(index, row)
        self.table.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.table, 1)
        self.resize(820, 560)

    def _fill(self, index: int, row: ComparisonRow) -> None:
        cells = (row.what, row.measure, row.first, row.second, row.change)
        for column, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if column >= 2:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                      | Qt.AlignmentFlag.AlignVCenter)
            if row.worse is not None and column >= 3:
                item.setBackground(QBrush(_WORSE if row.worse else _BETTER))
            self.table.setItem(index, column, item)
