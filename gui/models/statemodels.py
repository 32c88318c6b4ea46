"""The State view's tables (gui/views/stateview.py): a snapshot's sizes per subtask, a
page of a vertex's keys (or its biggest keys), a page of a diff. Each holds the rows of
one answer of the state reader (gui/models/statereading.py), a page at most, so memory
stays bounded whatever the state's size; vertices are shown by the name the job's graph
gives them. GUI thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor

from clusterdeck.gui.models.formatting import NONE, format_bytes
from clusterdeck.gui.models.statereading import ChangeRow, KeyRow, SizeRow
from clusterdeck.gui.models.tablemodel import FixedColumnsModel, Index

_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
CHANGE_COLOURS = {"added": QColor("#e3f4e1"), "removed": QColor("#f9dedc"),
                  "changed": QColor("#fdf3d7")}


def vertex_label(vertex_id: str, names: Mapping[str, str]) -> str:
    """``sum per user (v3)``: the graph's name and the id the checkpoint knows it by."""
    name = names.get(vertex_id, "")
    return f"{name} ({vertex_id})" if name and name != vertex_id else vertex_id


class RowsModel(FixedColumnsModel):
    """Rows of one answer, replaced whole by ``show``."""

    def __init__(self, names: Mapping[str, str], parent: Any = None) -> None:
        super().__init__(parent)
        self.names = names
        self._rows: list[Any] = []

    def show(self, rows: Sequence[Any]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def rows(self) -> list[Any]:
        return list(self._rows)

    def row_count(self) -> int:
        return len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row = self._rows[index.row()]
        column = self.column_titles[index.column()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return self.cell(row, column)
        if role == Qt.ItemDataRole.TextAlignmentRole and column in ("Keys", "Bytes"):
            return _RIGHT
        return self.decoration(row, role)

    def cell(self, row: Any, column: str) -> str:
        raise NotImplementedError

    def decoration(self, _row: Any, _role: int) -> Any:
        return None


class SizesModel(RowsModel):
    """Keys and bytes (of keys and values) per subtask that keeps keyed state; of a
    recording, the bytes of each subtask's snapshot files, its keys unknown (-1)."""

    column_titles = ("Vertex", "Subtask", "Keys", "Bytes")

    def cell(self, row: SizeRow, column: str) -> str:
        return {"Vertex": vertex_label(row.vertex, self.names), "Subtask": row.subtask,
                "Keys": f"{row.keys:,}" if row.keys >= 0 else NONE,
                "Bytes": format_bytes(row.bytes)}[column]


class KeysModel(RowsModel):
    """One page of a vertex's keys, or its biggest keys."""

    column_titles = ("Subtask", "Key", "Value", "Bytes")

    def cell(self, row: KeyRow, column: str) -> str:
        return {"Subtask": row.subtask, "Key": row.key, "Value": row.value,
                "Bytes": f"{row.bytes:,}"}[column]


class ChangesModel(RowsModel):
    """One page of a diff, each change on its colour."""

    column_titles = ("Change", "Subtask", "Key", "Before", "After")

    def cell(self, row: ChangeRow, column: str) -> str:
        return {"Change": row.kind, "Subtask": row.subtask, "Key": row.key,
                "Before": row.before, "After": row.after}[column]

    def decoration(self, row: ChangeRow, role: int) -> Any:
        if role == Qt.ItemDataRole.BackgroundRole:
            return QBrush(CHANGE_COLOURS[row.kind])
        return None
