"""The Qt boilerplate shared by the window's flat tables with fixed column titles."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

Index = QModelIndex | QPersistentModelIndex


class FixedColumnsModel(QAbstractTableModel):
    """A table whose columns are ``column_titles``; a subclass says how many rows it has
    (``row_count``) and what a cell shows (``data``). GUI thread only."""

    column_titles: tuple[str, ...] = ()

    def row_count(self) -> int:
        raise NotImplementedError

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self.row_count()

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.column_titles)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.column_titles[section]
        return None
