"""The control-plane traffic as a table: a bounded ring of tapped messages, and a filter.

``TrafficModel`` keeps the last ``capacity`` messages (20,000 by default). The bridge
hands it a batch per tick (``append``): one insert of the new rows and, when the ring is
full, one removal of the oldest, so a busy cluster costs two model signals a tick, never
one per message. Cell texts are formatted once, on arrival.

``TrafficFilter`` (a QSortFilterProxyModel) shows the rows of one message type and/or of
one endpoint (as sender or receiver), with or without heartbeats. GUI thread only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QSortFilterProxyModel,
    Qt,
)

from clusterdeck.core.rpc.mqtt import Traffic
from clusterdeck.gui.models.formatting import clock_millis
from clusterdeck.gui.models.tablemodel import FixedColumnsModel, Index

COLUMNS = ("Time", "Channel", "Sender", "Receiver", "Kind", "Type", "Size")
CAPACITY = 20_000
TRAFFIC_ROLE = Qt.ItemDataRole.UserRole + 1


def _texts(record: Traffic) -> tuple[str, ...]:
    stamp = clock_millis(record.at)
    return (stamp, record.channel, record.sender, record.receiver, record.kind,
            record.type_name, f"{record.size:,}")


class TrafficModel(FixedColumnsModel):
    """The newest ``capacity`` messages, oldest first."""

    column_titles = COLUMNS

    def __init__(self, capacity: int = CAPACITY, parent: Any = None) -> None:
        super().__init__(parent)
        self.capacity = capacity
        self._records: list[Traffic] = []
        self._texts: list[tuple[str, ...]] = []
        self.types: set[str] = set()
        self.endpoints: set[str] = set()
        self.dropped = 0
        """Messages that left the ring since the last clear."""

    def append(self, records: Iterable[Traffic]) -> None:
        batch = list(records)[-self.capacity:]
        if not batch:
            return
        overflow = len(self._records) + len(batch) - self.capacity
        if overflow > 0:
            self.beginRemoveRows(QModelIndex(), 0, overflow - 1)
            del self._records[:overflow]
            del self._texts[:overflow]
            self.endRemoveRows()
            self.dropped += overflow
        first = len(self._records)
        self.beginInsertRows(QModelIndex(), first, first + len(batch) - 1)
        self._records.extend(batch)
        self._texts.extend(_texts(record) for record in batch)
        self.endInsertRows()
        for record in batch:
            self.types.add(record.type_name)
            self.endpoints.update((record.sender, record.receiver))

    def clear(self) -> None:
        self.beginResetModel()
        self._records = []
        self._texts = []
        self.types.clear()
        self.endpoints.clear()
        self.dropped = 0
        self.endResetModel()

    def record(self, row: int) -> Traffic:
        return self._records[row]

    def records(self) -> list[Traffic]:
        return list(self._records)

    def row_count(self) -> int:
        return len(self._records)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self._texts[index.row()][index.column()]
        if role == TRAFFIC_ROLE:
            return self._records[index.row()]
        if role == Qt.ItemDataRole.TextAlignmentRole and COLUMNS[index.column()] == "Size":
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and self._records[index.row()].error:
            return self._records[index.row()].error
        return None


class TrafficFilter(QSortFilterProxyModel):
    """Rows of one type and/or one endpoint; heartbeats optional."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.type_name = ""
        self.endpoint = ""
        self.heartbeats = True

    def set_filter(self, type_name: str | None = None, endpoint: str | None = None,
                   heartbeats: bool | None = None) -> None:
        """Change any of the three; unchanged ones keep their value. '' means any."""
        self.beginFilterChange()
        if type_name is not None:
            self.type_name = type_name
        if endpoint is not None:
            self.endpoint = endpoint.strip().lower()
        if heartbeats is not None:
            self.heartbeats = heartbeats
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        model = self.sourceModel()
        if not isinstance(model, TrafficModel):
            return True
        record = model.record(source_row)
        if not self.heartbeats and record.channel == "heartbeat":
            return False
        if self.type_name and record.type_name != self.type_name:
            return False
        return not self.endpoint or self.endpoint in record.sender.lower() \
            or self.endpoint in record.receiver.lower()
