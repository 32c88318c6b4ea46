"""The State view's two paged panels (gui/views/stateview.py): a vertex's keys, searched
and paged, or its biggest keys; and the difference of two snapshots, paged. Each asks
its window for a page (``ask``) and shows the answer it is given; a page is all it holds.
GUI thread only.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.gui.models.statemodels import ChangesModel, KeysModel, RowsModel
from clusterdeck.gui.models.statereading import (
    PAGE,
    TOP,
    DiffQuery,
    DiffRows,
    KeyPageRows,
    KeyQuery,
)

SEARCH_DELAY_MS = 300
"""A search starts this long after the last key typed, not on every key."""


def table_of(model: RowsModel) -> QTableView:
    table = QTableView()
    table.setModel(model)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    header.setStretchLastSection(True)
    return table


def page_text(offset: int, shown: int, total: int, what: str) -> str:
    """``keys 201\u2013400 of 10,000``."""
    if not total:
        return f"no {what}"
    return f"{what} {offset + 1:,}\u2013{offset + shown:,} of {total:,}"


class KeysPanel(QWidget):
    """A vertex's keys, a page at a time; ``ask(query, biggest)`` reads one."""

    def __init__(self, model: KeysModel, ask: Callable[[KeyQuery, bool], None],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.ask = ask
        self.which = ""
        self.shown: KeyPageRows | None = None
        self.vertex = QComboBox()
        self.vertex.setMinimumContentsLength(24)
        self.search = QLineEdit()
        self.search.setPlaceholderText("search keys (text contained)")
        self.search.setClearButtonEnabled(True)
        self.prefix = QCheckBox("as prefix")
        self.prefix.setToolTip("Keys that begin with the text (a key that is not text: "
                               "its Python repr)")
        self.biggest = QCheckBox(f"biggest {TOP}")
        self.biggest.setToolTip(f"The vertex's {TOP} biggest keys (key and value bytes)")
        self.previous = QPushButton("\u25c0 Previous")
        self.next = QPushButton("Next \u25b6")
        self.position = QLabel()
        self.table = table_of(model)
        self.table.setColumnWidth(0, 90)
        self.table.setColumnWidth(1, 220)
        self.table.setColumnWidth(2, 420)
        self._typing = QTimer(self)
        self._typing.setSingleShot(True)
        self._typing.setInterval(SEARCH_DELAY_MS)
        self._typing.timeout.connect(self.first_page)
        bar = QHBoxLayout()
        for widget in (QLabel("Vertex"), self.vertex, self.search, self.prefix, self.biggest):
            bar.addWidget(widget)
        bar.setStretch(2, 1)
        _paged(self, bar, self.table, self.position, self.previous, self.next)
        self.vertex.currentIndexChanged.connect(self.first_page)
        self.search.textChanged.connect(self._typing.start)
        self.search.returnPressed.connect(self.first_page)
        self.prefix.toggled.connect(self.first_page)
        self.biggest.toggled.connect(self.first_page)
        self.previous.clicked.connect(lambda: self._page(-PAGE))
        self.next.clicked.connect(lambda: self._page(PAGE))
        self._buttons()

    def set_vertices(self, which: str, vertices: list[tuple[str, str]]) -> None:
        """``vertices``: (id, label) of those with keyed state in snapshot ``which``."""
        current = self.vertex.currentData()
        self.which = which
        self.vertex.blockSignals(True)
        self.vertex.clear()
        for vertex_id, label in vertices:
            self.vertex.addItem(label, vertex_id)
        index = self.vertex.findData(current)
        self.vertex.setCurrentIndex(max(index, 0))
        self.vertex.blockSignals(False)
        self.first_page()

    def query(self, offset: int = 0) -> KeyQuery | None:
        vertex = self.vertex.currentData()
        if not vertex:
            return None
        text = self.search.text().strip()
        return KeyQuery(self.which, vertex, "" if self.prefix.isChecked() else text,
                        text if self.prefix.isChecked() else "", offset)

    def first_page(self) -> None:
        self._typing.stop()
        query = self.query()
        if query is not None:
            self.position.setText("reading\u2026")
            self.ask(query, self.biggest.isChecked())

    def show_page(self, page: KeyPageRows, biggest: bool) -> None:
        self.shown = page
        self.model.show(page.rows)
        vertex = self.vertex.currentText()
        self.position.setText(f"{page.label}, {vertex}: the {len(page.rows)} biggest keys"
                              if biggest else f"{page.label}, {vertex}: " + page_text(
                                  page.query.offset, len(page.rows), page.matched, "keys"))
        self._buttons()

    def _page(self, step: int) -> None:
        query = self.query(max(0, (self.shown.query.offset if self.shown else 0) + step))
        if query is not None:
            self.ask(query, False)

    def _buttons(self) -> None:
        shown = self.shown
        paged = shown is not None and not self.biggest.isChecked()
        self.previous.setEnabled(paged and shown is not None and shown.query.offset > 0)
        self.next.setEnabled(paged and shown is not None
                             and shown.query.offset + len(shown.rows) < shown.matched)
        self.search.setEnabled(not self.biggest.isChecked())
        self.prefix.setEnabled(not self.biggest.isChecked())


class DiffPanel(QWidget):
    """What changed from one snapshot to another; ``ask(query)`` reads a page."""

    def __init__(self, model: ChangesModel, ask: Callable[[DiffQuery], None],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.ask = ask
        self.shown: DiffRows | None = None
        self.before = QComboBox()
        self.after = QComboBox()
        self.vertex = QComboBox()
        self.compare = QPushButton("Compare")
        self.summary = QLabel()
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.previous = QPushButton("\u25c0 Previous")
        self.next = QPushButton("Next \u25b6")
        self.table = table_of(model)
        self.table.setColumnWidth(0, 70)
        self.table.setColumnWidth(2, 200)
        self.table.setColumnWidth(3, 300)
        bar = QHBoxLayout()
        for widget in (QLabel("From"), self.before, QLabel("to"), self.after,
                       QLabel("vertex"), self.vertex, self.compare):
            bar.addWidget(widget)
        bar.addStretch(1)
        _paged(self, bar, self.table, self.summary, self.previous, self.next)
        self.compare.clicked.connect(lambda: self._ask(0))
        self.previous.clicked.connect(lambda: self._ask(-PAGE, relative=True))
        self.next.clicked.connect(lambda: self._ask(PAGE, relative=True))
        self._buttons()

    def set_choices(self, snapshots: list[tuple[str, str]]) -> None:
        """(value, label) of the snapshots to compare, the oldest first."""
        for combo in (self.before, self.after):
            _fill(combo, snapshots)
        self.before.setCurrentIndex(0)
        self.after.setCurrentIndex(max(0, self.after.count() - 1))
        self.compare.setEnabled(len(snapshots) > 1)

    def set_vertices(self, vertices: list[tuple[str, str]]) -> None:
        """(id, label) of the vertices to narrow the difference to; the one chosen stays."""
        current = self.vertex.currentData()
        _fill(self.vertex, [("", "all vertices"), *vertices])
        self.vertex.setCurrentIndex(max(0, self.vertex.findData(current)))

    def show_page(self, page: DiffRows) -> None:
        self.shown = page
        self.model.show(page.rows)
        counts = page.counts
        self.summary.setText(
            f"{page.label}: {counts.get('added', 0):,} added, {counts.get('removed', 0):,} "
            f"removed, {counts.get('changed', 0):,} changed \u2014 "
            + page_text(page.query.offset, len(page.rows), page.total, "changes"))
        self._buttons()

    def _ask(self, offset: int, relative: bool = False) -> None:
        if relative and self.shown is not None:
            query = self.shown.query
            offset = max(0, query.offset + offset)
        else:
            query = DiffQuery(self.before.currentData(), self.after.currentData(),
                              self.vertex.currentData() or "")
        self.summary.setText("reading\u2026")
        self.ask(DiffQuery(query.before, query.after, query.vertex, offset))

    def _buttons(self) -> None:
        shown = self.shown
        self.previous.setEnabled(shown is not None and shown.query.offset > 0)
        self.next.setEnabled(shown is not None
                             and shown.query.offset + len(shown.rows) < shown.total)


def _paged(panel: QWidget, bar: QHBoxLayout, table: QTableView, where: QLabel,
           previous: QPushButton, following: QPushButton) -> None:
    """A panel's layout: its bar of choices, the table, then where the page is and the
    buttons to the pages before and after it."""
    pages = QHBoxLayout()
    pages.addWidget(where, 1)
    pages.addWidget(previous)
    pages.addWidget(following)
    layout = QVBoxLayout(panel)
    layout.addLayout(bar)
    layout.addWidget(table, 1)
    layout.addLayout(pages)


def _fill(combo: QComboBox, choices: list[tuple[str, str]]) -> None:
    combo.clear()
    for value, label in choices:
        combo.addItem(label, value)
