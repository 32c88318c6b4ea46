"""The messages view: the cluster's control plane, live.

Every rpc, reply and heartbeat message of the cluster, as the GUI's client taps it
(``MqttRpcService.tap``): time, channel, sender, receiver, kind (tell, ask, reply,
heartbeat), message type and size. The bridge delivers them in one batch per tick
(``add``); they reach the table at most four times a second, which keeps the last 20,000
(gui/models/trafficmodel.py). Filters narrow it to one message type, one endpoint, or leave
heartbeats out. Pause freezes the table: what
arrives meanwhile is held (bounded like the table) and added on resume. While the view is
off screen (its dock's tab is behind another: ``set_on_screen``) messages are held the
same way, so a busy control plane costs no table updates nobody sees. Selecting a row
shows the message's decoded payload as JSON. GUI thread only.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable

from PySide6.QtCore import QItemSelection, Qt, QTimer
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.rpc import to_data
from clusterdeck.core.rpc.mqtt import Traffic
from clusterdeck.gui.models.formatting import clock_millis
from clusterdeck.gui.models.trafficmodel import COLUMNS, TRAFFIC_ROLE, TrafficFilter, TrafficModel

ALL_TYPES = "all types"
BATCH_MS = 250


def payload_text(record: Traffic) -> str:
    """A header line, then the decoded message as pretty JSON (or why there is none)."""
    when = clock_millis(record.at)
    head = (f"{record.type_name}  ({record.channel}, {record.kind})\n"
            f"from {record.sender} to {record.receiver} at {when}, {record.size:,} bytes\n")
    if record.error:
        head += f"\n{record.error}\n"
    if record.message is None:
        return head
    try:
        body = json.dumps(to_data(record.message), indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError) as error:
        body = f"(cannot show the payload: {error})\n{record.message!r}"
    return f"{head}\n{body}\n"


class MessagesView(QWidget):
    """Filter bar, the table, the selected message's payload."""

    def __init__(self, model: TrafficModel | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model or TrafficModel(parent=self)
        self.proxy = TrafficFilter(self)
        self.proxy.setSourceModel(self.model)
        self._held: deque[Traffic] = deque(maxlen=self.model.capacity)
        self._incoming: deque[Traffic] = deque(maxlen=self.model.capacity)
        self._batch = QTimer(self)
        self._batch.setSingleShot(True)
        self._batch.setInterval(BATCH_MS)
        self._batch.timeout.connect(self._take_incoming)
        self.on_screen = True
        self.types = QComboBox()
        self.types.addItem(ALL_TYPES)
        self.types.setMinimumContentsLength(22)
        self.endpoint = QLineEdit()
        self.endpoint.setPlaceholderText("endpoint (sender or receiver)")
        self.endpoint.setClearButtonEnabled(True)
        self.endpoint.setAcceptDrops(False)  # a file dropped here goes to the window
        self.heartbeats = QCheckBox("Heartbeats")
        self.heartbeats.setChecked(True)
        self.pause = QPushButton("Pause")
        self.pause.setCheckable(True)
        self.clear_button = QPushButton("Clear")
        self.count = QLabel()
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.verticalHeader().setDefaultSectionSize(20)
        header = self.table.horizontalHeader()
        header.setStretchLastSection(True)
        for column, width in (("Time", 96), ("Channel", 66), ("Sender", 150),
                              ("Receiver", 170), ("Kind", 52), ("Type", 190)):
            self.table.setColumnWidth(COLUMNS.index(column), width)
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.detail.setPlaceholderText("Select a message to see its payload.")
        bar = QHBoxLayout()
        bar.addWidget(self.types)
        bar.addWidget(self.endpoint, 1)
        bar.addWidget(self.heartbeats)
        bar.addWidget(self.pause)
        bar.addWidget(self.clear_button)
        bar.addWidget(self.count)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.table)
        splitter.addWidget(self.detail)
        splitter.setSizes([900, 360])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addWidget(splitter, 1)
        self.types.currentTextChanged.connect(
            lambda text: self._filter(type_name="" if text == ALL_TYPES else text))
        self.endpoint.textChanged.connect(lambda text: self._filter(endpoint=text))
        self.heartbeats.toggled.connect(lambda on: self._filter(heartbeats=on))
        self.pause.toggled.connect(self._paused)
        self.clear_button.clicked.connect(self.clear)
        self.table.selectionModel().selectionChanged.connect(self._on_selection)
        self.proxy.rowsInserted.connect(self._count)
        self.proxy.rowsRemoved.connect(self._count)
        self.proxy.modelReset.connect(self._count)
        self.proxy.layoutChanged.connect(self._count)
        self._count()

    @property
    def paused(self) -> bool:
        return self.pause.isChecked()

    def add(self, records: Iterable[Traffic]) -> None:
        """A tick's worth of messages (bridge); held while paused or off screen. The table
        takes them at once after a quiet spell, then at most four times a second: each
        insert lays out the view, and nobody reads thirty updates a second."""
        if self.paused or not self.on_screen:
            self._held.extend(records)
            if self.paused:
                self._count()
            return
        self._incoming.extend(records)
        if not self._batch.isActive():
            self._take_incoming()

    def _take_incoming(self) -> None:
        """The batch timer (or a first ``add``): append what came since the last batch."""
        if not self._incoming:
            return
        batch = list(self._incoming)
        self._incoming.clear()
        self._append(batch)
        self._batch.start()

    def _append(self, records: list[Traffic]) -> None:
        scrollbar = self.table.verticalScrollBar()
        at_end = scrollbar.value() >= scrollbar.maximum() - 2
        self.model.append(records)
        self._new_types()
        if at_end:  # after the view laid out the new rows; never once the table is gone
            QTimer.singleShot(0, self.table, self.table.scrollToBottom)

    def set_on_screen(self, on_screen: bool) -> None:
        """The dock's tab came to the top (True) or went behind another (False)."""
        self.on_screen = on_screen
        self._release()

    def select_row(self, row: int) -> None:
        """Select the ``row``-th message shown (the filter applied)."""
        index = self.proxy.index(row, 0)
        if index.isValid():
            self.table.setCurrentIndex(index)

    def select_type(self, type_name: str) -> None:
        index = self.types.findText(type_name)
        if index >= 0:
            self.types.setCurrentIndex(index)

    def clear(self) -> None:
        self._held.clear()
        self._incoming.clear()
        self.model.clear()
        self.detail.clear()
        self.types.blockSignals(True)
        current = self.types.currentText()
        self.types.clear()
        self.types.addItem(ALL_TYPES)
        if current != ALL_TYPES:
            self.types.addItem(current)
        self.types.setCurrentText(current)
        self.types.blockSignals(False)

    def _filter(self, **change: object) -> None:
        """Apply a filter change; the selected message stays in sight if it still shows."""
        self.proxy.set_filter(**change)  # type: ignore[arg-type]
        QTimer.singleShot(0, self, self._show_current)

    def _show_current(self) -> None:
        current = self.table.currentIndex()
        if current.isValid():
            self.table.scrollTo(current, QAbstractItemView.ScrollHint.PositionAtCenter)

    def _new_types(self) -> None:
        known = {self.types.itemText(i) for i in range(self.types.count())}
        for type_name in sorted(self.model.types - known):
            position = 1
            while position < self.types.count() and self.types.itemText(position) < type_name:
                position += 1
            self.types.insertItem(position, type_name)

    def _paused(self, paused: bool) -> None:
        self.pause.setText("Resume" if paused else "Pause")
        self._release()
        self._count()

    def _release(self) -> None:
        """Add what was held, once the view is live and on screen again."""
        if self._held and self.on_screen and not self.paused:
            held = [*self._incoming, *self._held][-self.model.capacity:]
            self._held.clear()
            self._incoming.clear()
            self._append(held)

    def _count(self, *_: object) -> None:
        shown, kept = self.proxy.rowCount(), self.model.rowCount()
        text = f"{shown:,} of {kept:,} shown"
        if self.paused:
            text += f" \u2014 paused, {len(self._held):,} waiting"
        self.count.setText(text)

    def _on_selection(self, selected: QItemSelection, _deselected: QItemSelection) -> None:
        indexes = selected.indexes()
        if not indexes:
            return
        record = indexes[0].data(TRAFFIC_ROLE)
        if isinstance(record, Traffic):
            self.detail.setPlainText(payload_text(record))
