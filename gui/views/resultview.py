"""The result view: what an ended job produced.

The header says how it ended (status, duration, records in and out per vertex); below
are its accumulators (``env.counter``), the paths it wrote, the rows its ``collect()``
sinks gathered, in a table, and a PySpark script's stdout (and stderr). The result is the
retained ``JobResult``; the rows live in files named by it, read on the worker thread
(gui/controllers/jobcalls.py) and handed over with ``show_rows``. GUI thread only.

Rows can be scalars, lists (tuples, Spark rows as lists) or dicts (Spark rows by field),
and may mix: ``RowsTableModel`` makes one column per dict key and per list position, and
a ``value`` column for scalars.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    Qt,
    QUrl,
    Signal,
)
from PySide6.QtGui import QDesktopServices, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.gui.models.formatting import format_duration
from clusterdeck.gui.models.palette import JOB_STATUS_COLOURS
from clusterdeck.gui.models.tablemodel import Index

VALUE = "value"


def row_columns(rows: Sequence[Any]) -> list[Any]:
    """Dict keys in the order first seen, then list positions, then ``value`` for
    scalars."""
    keys: dict[Any, None] = {}
    width = 0
    scalars = False
    for row in rows:
        if isinstance(row, dict):
            keys.update(dict.fromkeys(row))
        elif isinstance(row, list | tuple):
            width = max(width, len(row))
        else:
            scalars = True
    return [*keys, *range(width), *([VALUE] if scalars else [])]


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


class RowsTableModel(QAbstractTableModel):
    """Collected rows as a table. GUI thread only."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[Any] = []
        self._columns: list[Any] = []

    def set_rows(self, rows: Sequence[Any]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self._columns = row_columns(self._rows)
        self.endResetModel()

    def columns(self) -> list[Any]:
        return list(self._columns)

    def value(self, row: int, column: int) -> Any:
        item, key = self._rows[row], self._columns[column]
        if isinstance(item, dict):
            return item.get(key) if isinstance(key, str) else None
        if isinstance(item, list | tuple):
            return item[key] if isinstance(key, int) and key < len(item) else None
        return item if key == VALUE else None

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._columns)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return str(self._columns[section])
        return str(section + 1)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        value = self.value(index.row(), index.column())
        if role == Qt.ItemDataRole.DisplayRole:
            return cell_text(value)
        if role == Qt.ItemDataRole.TextAlignmentRole and isinstance(value, int | float) \
                and not isinstance(value, bool):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class ResultView(QWidget):
    """The selected job's result."""

    rows_wanted = Signal(object)
    """A ``JobResult`` whose collected rows should be read (off the GUI thread)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.job_id: str | None = None
        self.results: dict[str, p.JobResult] = {}
        self._rows: dict[str, tuple[list[Any], int]] = {}
        self._names: dict[str, dict[str, str]] = {}
        self.header = QLabel("Select a job; its result shows here once it ended.")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.accumulators = QTableWidget(0, 2)
        self.accumulators.setHorizontalHeaderLabels(["Accumulator", "Value"])
        self.accumulators.verticalHeader().setVisible(False)
        self.accumulators.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.accumulators.horizontalHeader().setSectionResizeMode(
            0, QHeaderView.ResizeMode.Stretch)
        self.outputs = QListWidget()
        self.outputs.setToolTip("Double-click to open the folder")
        self.rows = RowsTableModel(self)
        self.table = QTableView()
        self.table.setModel(self.rows)
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.stdout = QPlainTextEdit()
        self.stdout.setReadOnly(True)
        self.stdout.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.stdout.setPlaceholderText("A PySpark script's output shows here.")
        self.tabs = QTabWidget()
        self.tabs.addTab(self.table, "Collected rows")
        self.tabs.addTab(self.stdout, "Stdout")
        side = QSplitter(Qt.Orientation.Vertical)
        side.addWidget(_titled("Accumulators", self.accumulators))
        side.addWidget(_titled("Outputs", self.outputs))
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(side)
        splitter.addWidget(self.tabs)
        splitter.setSizes([330, 800])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addWidget(splitter, 1)
        self.outputs.itemDoubleClicked.connect(
            lambda item: QDesktopServices.openUrl(QUrl.fromLocalFile(item.text())))

    def set_result(self, job_id: str, result: p.JobResult) -> None:
        """A job's result arrived (bridge); shown when it is the selected job."""
        known = self.results.get(job_id)
        self.results[job_id] = result
        if known != result:
            self._rows.pop(job_id, None)
        if job_id == self.job_id:
            self._show()

    def set_snapshot(self, job_id: str, snapshot: JobGraphSnapshot) -> None:
        """A job's snapshot (bridge): only its vertex names are kept, for the header."""
        if job_id not in self._names:
            self._names[job_id] = {v.id: v.name for v in snapshot.vertices}
            if job_id == self.job_id and job_id in self.results:
                self.header.setText(_header(self.results[job_id], self._names[job_id]))

    def show_job(self, job_id: str | None) -> None:
        if job_id != self.job_id:
            self.job_id = job_id
            self._show()

    def show_rows(self, job_id: str, rows: list[Any], total: int) -> None:
        """Rows read by the worker for ``job_id``."""
        self._rows[job_id] = (rows, total)
        if job_id == self.job_id:
            self._fill_rows()

    def clear(self) -> None:
        self.results.clear()
        self._rows.clear()
        self._names.clear()
        self.job_id = None
        self._show()

    def _show(self) -> None:
        result = self.results.get(self.job_id or "")
        self.accumulators.setRowCount(0)
        self.outputs.clear()
        self.stdout.clear()
        self.rows.set_rows([])
        self.tabs.setTabText(0, "Collected rows")
        if result is None:
            self.header.setText("Select a job; its result shows here once it ended."
                                if self.job_id is None else
                                f"Job {self.job_id} has not ended yet: its result shows here "
                                "when it does.")
            return
        self.header.setText(_header(result, self._names.get(result.job_id, {})))
        values = sorted(result.accumulators.items())
        self.accumulators.setRowCount(len(values))
        for row, (name, value) in enumerate(values):
            self.accumulators.setItem(row, 0, QTableWidgetItem(str(name)))
            self.accumulators.setItem(row, 1, QTableWidgetItem(cell_text(value)))
        self.outputs.addItems(list(result.outputs))
        if result.outputs_total > len(result.outputs):
            self.outputs.addItem(f"... {result.outputs_total - len(result.outputs)} more, "
                                 f"listed in {result.files_manifest}")
        text = result.stdout
        if result.stderr:
            text += ("\n" if text else "") + "--- stderr ---\n" + result.stderr
        self.stdout.setPlainText(text)
        self.tabs.setTabText(1, "Stdout" + (" \u2022" if text.strip() else ""))
        if self.job_id in self._rows:
            self._fill_rows()
        else:
            self.rows_wanted.emit(result)
        # A PySpark script's output is what it produced; a dataflow job's rows are.
        self.tabs.setCurrentIndex(1 if not result.collected_paths and text.strip() else 0)

    def _fill_rows(self) -> None:
        rows, total = self._rows[self.job_id or ""]
        self.rows.set_rows(rows)
        shown = f"{len(rows):,}" + (f" of {total:,}" if total > len(rows) else "")
        self.tabs.setTabText(0, f"Collected rows ({shown})")
        self.table.resizeColumnsToContents()


def _header(result: p.JobResult, names: dict[str, str]) -> str:
    colour = JOB_STATUS_COLOURS.get(result.status)
    status = f"<b style='color:{colour.name()}'>{result.status}</b>" if colour else \
        f"<b>{result.status}</b>"
    records = "; ".join(f"{names.get(vertex, vertex)}: {counts.get('in', 0):,} in, "
                        f"{counts.get('out', 0):,} out"
                        for vertex, counts in sorted(result.records.items())
                        if isinstance(counts, dict))
    parts = [f"<b>{result.name}</b> ({result.job_id}) {status} in "
             f"{format_duration(result.duration)}",
             f"{result.finished}/{result.total} subtasks finished"]
    if result.failures:
        parts.append(f"{result.failures} failure{'s' if result.failures != 1 else ''}")
    if records:
        parts.append(f"records \u2014 {records}")
    return " \u00b7 ".join(parts)


def _titled(title: str, widget: QWidget) -> QWidget:
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(QLabel(f"<b>{title}</b>"))
    layout.addWidget(widget, 1)
    return box
