"""The State view: a streaming job's keyed state as its checkpoints and savepoints hold
it (docs/state-inspector.md), in a window of its own. A snapshot to look at (the latest
checkpoint, a retained one, a savepoint), then four tabs: the sizes per subtask, a
vertex's keys (searched, paged) or its biggest keys, the growth from checkpoint to
checkpoint (a plot), and the difference of two snapshots.

Every read runs on the reading thread the window is given (``run``) and comes back here;
an answer to a question asked before the last one is dropped. A read that fails (files
gone, unreadable, on another machine) shows its reason above the tabs, never a hang. Of a
recording whose cluster's folder is not on this machine, the view says so and shows what
the recording holds: the recorded checkpoints' sizes per subtask and their growth. GUI
thread only.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.gui.models.statemodels import ChangesModel, KeysModel, SizesModel, vertex_label
from clusterdeck.gui.models.statereading import (
    LATEST,
    DiffQuery,
    GrowthPoint,
    KeyQuery,
    OpenedState,
    SizeRow,
    read_diff,
    read_growth,
    read_keys,
    read_sizes,
    read_top,
)
from clusterdeck.gui.views.logsearch import Runner
from clusterdeck.gui.views.statepanels import DiffPanel, KeysPanel, table_of

CURVE_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf")
MESSAGE_STYLE = "background: #fdecea; color: #8a1f11; padding: 6px; border-radius: 3px;"


class StateWindow(QWidget):
    """The state of one job; ``opening()`` (run on the reading thread) finds its
    checkpoints, ``savepoints`` are folders to offer beside them, ``which`` the snapshot
    shown first."""

    def __init__(self, title: str, names: Mapping[str, str], run: Runner,
                 opening: Callable[[], OpenedState], savepoints: Sequence[str] = (),
                 which: str = LATEST, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle(f"State of {title}")
        self.title = title
        self.names = dict(names)
        self.run = run
        self.savepoints = list(savepoints)
        self.wanted = which
        self.opened: OpenedState | None = None
        self._asked: dict[str, int] = {}
        """The newest question of each kind: an older one's answer is dropped."""
        self.sizes_model = SizesModel(self.names, self)
        self.keys_model = KeysModel(self.names, self)
        self.changes_model = ChangesModel(self.names, self)
        self.header = QLabel(f"<b>{html.escape(title)}</b>: reading its checkpoints\u2026")
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setStyleSheet(MESSAGE_STYLE)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        self.snapshot = QComboBox()
        self.snapshot.setMinimumContentsLength(28)
        self.reload = QPushButton("Reload")
        self.sizes_line = QLabel()
        self.keys = KeysPanel(self.keys_model, self._ask_keys)
        self.diff = DiffPanel(self.changes_model, self._ask_diff)
        self.growth = pg.PlotWidget()
        self.growth.setBackground("#ffffff")
        self.growth.showGrid(x=True, y=True, alpha=0.25)
        self.growth.setLabel("bottom", "checkpoint")
        self.growth.addLegend(offset=(8, 4))
        self.growth_line = QLabel()
        self.tabs = QTabWidget()
        self.tabs.addTab(self._column(self.sizes_line, table_of(self.sizes_model)), "Vertices")
        self.tabs.addTab(self.keys, "Keys")
        self.tabs.addTab(self._column(self.growth_line, self.growth), "Growth")
        self.tabs.addTab(self.diff, "Diff")
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Snapshot"))
        bar.addWidget(self.snapshot)
        bar.addWidget(self.reload)
        bar.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(bar)
        layout.addWidget(self.message)
        layout.addWidget(self.tabs, 1)
        self.snapshot.currentIndexChanged.connect(self._show_snapshot)
        self.reload.clicked.connect(lambda: self._open(opening))
        self.tabs.setEnabled(False)
        self.resize(980, 640)
        self._open(opening)

    # -- asking (GUI thread; the work on the reading thread) ----------------------------------

    def _ask(self, kind: str, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        """``work`` on the reading thread; ``done`` here with its answer unless a newer
        question of the same kind was asked meanwhile; a failure shown as the message."""
        asked = self._asked[kind] = self._asked.get(kind, 0) + 1

        def answered(outcome: Any) -> None:
            if self._asked.get(kind) == asked:
                done(outcome)

        def failed(error: BaseException) -> None:
            if self._asked.get(kind) == asked:
                self.show_message(str(error) or type(error).__name__)
        self.run(work, answered, failed)

    def _open(self, opening: Callable[[], OpenedState]) -> None:
        self.show_message("")
        self._ask("open", opening, self._opened)

    def _ask_keys(self, query: KeyQuery, biggest: bool) -> None:
        opened = self.opened
        if opened is not None:
            self._ask("keys", (lambda: read_top(opened, query.which, query.vertex)) if biggest
                      else (lambda: read_keys(opened, query)),
                      lambda page: self._keys_read(page, biggest))

    def _ask_diff(self, query: DiffQuery) -> None:
        opened = self.opened
        if opened is not None:
            self._ask("diff", lambda: read_diff(opened, query), self._diff_read)

    # -- answers (GUI thread) -----------------------------------------------------------------

    def show_message(self, text: str) -> None:
        """Why something cannot be shown; empty: nothing to say."""
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def _opened(self, opened: OpenedState) -> None:
        self.opened = opened
        readable = opened.readable
        self.show_message(opened.why_not)
        self.snapshot.blockSignals(True)
        self.snapshot.clear()
        for value, label in self._choices(opened):
            self.snapshot.addItem(label, value)
        index = self.snapshot.findData(self.wanted)
        if index < 0 and readable:
            self.snapshot.addItem(self._label(self.wanted), self.wanted)
            index = self.snapshot.count() - 1
        self.snapshot.setCurrentIndex(max(index, 0))
        self.snapshot.blockSignals(False)
        self.tabs.setEnabled(readable or bool(opened.recorded))
        for tab in (self.keys, self.diff):
            self.tabs.setTabEnabled(self.tabs.indexOf(tab), readable)
        where = "its checkpoint folder" if readable else "what the recording holds"
        self.header.setText(f"<b>{html.escape(self.title)}</b>: {where}")
        self.diff.set_choices([(str(c), f"checkpoint {c}") for c in opened.retained]
                              + [(path, self._label(path)) for path in self.savepoints])
        self._ask("growth", lambda: read_growth(opened), self._growth_read)
        self._show_snapshot()

    def _choices(self, opened: OpenedState) -> list[tuple[str, str]]:
        if not opened.readable:
            return [(str(c.checkpoint_id), f"checkpoint {c.checkpoint_id} (recorded sizes)")
                    for c in reversed(opened.recorded)]
        latest = [(LATEST, f"latest: checkpoint {opened.retained[-1]}")] \
            if opened.retained else []
        return [*latest, *((str(c), f"checkpoint {c}") for c in reversed(opened.retained)),
                *((path, self._label(path)) for path in self.savepoints)]

    @staticmethod
    def _label(which: str) -> str:
        if which == LATEST:
            return "latest checkpoint"
        return f"checkpoint {which}" if which.isdigit() else f"savepoint {Path(which).name}"

    def _show_snapshot(self) -> None:
        opened = self.opened
        which = self.snapshot.currentData()
        if opened is None or which is None:
            return
        self.wanted = which
        if not opened.readable:
            self._recorded_sizes(opened, which)
            return
        self.sizes_line.setText("reading\u2026")
        self._ask("sizes", lambda: read_sizes(opened, which), self._sizes_read)

    def _recorded_sizes(self, opened: OpenedState, which: str) -> None:
        recorded = next((c for c in opened.recorded if str(c.checkpoint_id) == which), None)
        rows = [] if recorded is None else [SizeRow(s.subtask, -1, s.bytes)
                                           for s in recorded.snapshots]
        self.sizes_model.show(rows)
        self.sizes_line.setText("Bytes of each subtask's snapshot files, as its "
                                "acknowledgement of the checkpoint recorded them; the keys "
                                "are in the files, which the recording does not hold.")

    def _sizes_read(self, answer: tuple[str, list[SizeRow]]) -> None:
        label, rows = answer
        self.show_message("")
        self.sizes_model.show(rows)
        total_keys = sum(row.keys for row in rows)
        self.sizes_line.setText(f"{label}: {total_keys:,} keys in {len(rows)} subtasks "
                                "(bytes: of keys and values, as the store keeps them)")
        vertices = sorted({row.vertex for row in rows})
        labelled = [(vertex, vertex_label(vertex, self.names)) for vertex in vertices]
        self.keys.set_vertices(self.wanted, labelled)
        self.diff.set_vertices(labelled)

    def _keys_read(self, page: Any, biggest: bool) -> None:
        self.show_message("")
        self.keys.show_page(page, biggest)

    def _diff_read(self, page: Any) -> None:
        self.show_message("")
        self.diff.show_page(page)

    def _growth_read(self, points: list[GrowthPoint]) -> None:
        self.growth.clear()
        recorded = self.opened is not None and not self.opened.readable
        self.growth.setLabel("left", "snapshot file bytes (recorded)" if recorded
                             else "bytes of keys and values")
        vertices = sorted({vertex for point in points for vertex in point.vertices})
        for number, vertex in enumerate(vertices):
            xs = [point.checkpoint_id for point in points if vertex in point.vertices]
            ys = [point.vertices[vertex][1] for point in points if vertex in point.vertices]
            colour = CURVE_COLOURS[number % len(CURVE_COLOURS)]
            self.growth.plot(xs, ys, pen=pg.mkPen(colour, width=2), symbol="o",
                             symbolSize=6, symbolBrush=colour,
                             name=vertex_label(vertex, self.names))
        if not points:
            self.growth_line.setText("No checkpoint to plot.")
            return
        last = points[-1]
        parts = [f"{vertex_label(vertex, self.names)}: "
                 + (f"{keys:,} keys, " if keys >= 0 else "") + f"{size:,} B"
                 for vertex, (keys, size) in sorted(last.vertices.items())]
        self.growth_line.setText(f"{len(points)} checkpoints; at checkpoint "
                                 f"{last.checkpoint_id}: " + "; ".join(parts))

    @staticmethod
    def _column(line: QLabel, widget: QWidget) -> QWidget:
        holder = QWidget()
        layout = QVBoxLayout(holder)
        layout.addWidget(line)
        layout.addWidget(widget, 1)
        line.setWordWrap(True)
        return holder
