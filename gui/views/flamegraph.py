"""A process looked into (core/profiling/pyspy.py): its flame graph, its hottest frames
and its threads, in a window of their own (docs/profiling.md).

The flame graph is drawn as Brendan Gregg draws it: the process at the bottom, each frame
a box as wide as its share of the samples, what it called stacked on top. Frames
narrower than half a pixel are left out, so a deep profile stays a few thousand items;
hover a box for its frame, samples and share. A graph can be saved (collapsed stacks) and
compared with one saved before, say of the same vertex in another run: the Compared tab
lists the frames whose share of the samples changed most (core/profiling/flamediff.py,
docs/comparing.md). GUI thread only.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.profiling.flamediff import (
    FrameChange,
    compare_flame_graphs,
    load_flame_graph,
    save_flame_graph,
)
from clusterdeck.core.profiling.pyspy import (
    FlameGraph,
    FlameNode,
    ProfilingError,
    ThreadStack,
    hottest_lines,
    thread_lines,
)
from clusterdeck.core.profiling.vertexprofile import VertexFlameGraph

WIDTH = 1200.0
ROW = 18.0
MIN_WIDTH = 0.5
MAX_ITEMS = 6000
CHANGES = 100  # frames the Compared tab lists
CHANGE_COLUMNS = ("before", "after", "change", "own before", "own after", "frame")
_MORE = QColor("#f6d5d3")   # a frame that took a larger share: where the time went
_LESS = QColor("#d7f0dc")


def frame_colour(name: str) -> QColor:
    """A warm colour that stays the same for the same frame."""
    hue = zlib.crc32(name.encode()) % 50  # red to orange
    return QColor.fromHsv(hue, 140 + zlib.crc32(name[::-1].encode()) % 80, 235)


class FlameGraphView(QGraphicsView):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setBackgroundBrush(QBrush(QColor("#fdfdfd")))
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.boxes: list[QGraphicsRectItem] = []

    def draw(self, root: FlameNode) -> None:
        scene = self.scene()
        scene.clear()
        self.boxes = []
        if root.samples <= 0:
            scene.addText("No samples: the process ran no Python code while it was sampled.")
            return
        font = QFont()
        font.setPointSizeF(8.0)
        pending = [(root, 0.0, 0)]
        while pending and len(self.boxes) < MAX_ITEMS:
            node, x, depth = pending.pop()
            width = WIDTH * node.samples / root.samples
            self._box(node, x, depth, width, root.samples, font)
            for child in sorted(node.children.values(), key=lambda c: c.name):
                child_width = WIDTH * child.samples / root.samples
                if child_width >= MIN_WIDTH:
                    pending.append((child, x, depth + 1))
                x += child_width
        scene.setSceneRect(scene.itemsBoundingRect().adjusted(-8, -8, 8, 8))

    def _box(self, node: FlameNode, x: float, depth: int, width: float, total: int,
             font: QFont) -> None:
        box = QGraphicsRectItem(QRectF(0, 0, width, ROW - 1))
        box.setPos(x, -depth * ROW)
        box.setBrush(QBrush(QColor("#c9d3df") if depth == 0 else frame_colour(node.name)))
        box.setPen(QPen(QColor("#ffffff"), 0.5))
        box.setToolTip(f"{node.name}\n{node.samples:,} samples, {node.samples / total:.1%}")
        if width > 40:
            label = QGraphicsSimpleTextItem(_fit(node.name, width), box)
            label.setFont(font)
            label.setPos(3, 2)
        self.scene().addItem(box)
        self.boxes.append(box)


def _fit(text: str, width: float) -> str:
    most = max(1, int(width / 6))
    return text if len(text) <= most else text[:most - 1] + "\u2026"


class ProfileWindow(QWidget):
    """One look into one process, or into one vertex's workers: a flame graph and its
    hottest frames (to save, or to compare with one saved), or its threads, or why it
    could not be done."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle(title)
        self.root: FlameNode | None = None
        self.header = QLabel(title)
        self.header.setWordWrap(True)
        self.flame = FlameGraphView()
        self.hottest = QPlainTextEdit(readOnly=True)
        self.threads = QPlainTextEdit(readOnly=True)
        self.compared = _changes_table()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.flame, "Flame graph")
        self.tabs.addTab(self.hottest, "Hottest frames")
        self.tabs.addTab(self.threads, "Threads")
        self.tabs.addTab(self.compared, "Compared")
        self.save_button = QPushButton("Save\u2026", enabled=False)
        self.compare_button = QPushButton("Compare with saved\u2026", enabled=False)
        self.save_button.clicked.connect(self._choose_save)
        self.compare_button.clicked.connect(self._choose_compare)
        buttons = QHBoxLayout()
        buttons.addWidget(self.header, 1)
        buttons.addWidget(self.save_button)
        buttons.addWidget(self.compare_button)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(self.tabs, 1)
        self.resize(1300, 700)

    def show_flame_graph(self, graph: FlameGraph) -> None:
        cut = f"; only the first {graph.stacks:,} distinct stacks" if graph.cut else ""
        self.header.setText(f"{self.windowTitle()}: {graph.root.samples:,} samples over "
                            f"{graph.seconds:g} s at {graph.rate} Hz{cut}")
        self._show_root(graph.root)

    def show_vertex_flame_graph(self, graph: VertexFlameGraph) -> None:
        """A vertex's workers' graph, with who was sampled and who could not be."""
        cut = f"; only the first {graph.stacks:,} distinct stacks" if graph.cut else ""
        missed = "".join(f"\nnot sampled: {note}" for note in graph.missed)
        self.header.setText(
            f"{self.windowTitle()}: {graph.root.samples:,} samples over {graph.seconds:g} s "
            f"at {graph.rate} Hz{cut}, of "
            f"{', '.join(worker.label for worker in graph.sampled)}{missed}")
        self._show_root(graph.root)

    def _show_root(self, root: FlameNode) -> None:
        self.root = root
        self.flame.draw(root)
        self.hottest.setPlainText("\n".join(hottest_lines(root, 40)) or "no samples")
        self.tabs.setCurrentWidget(self.flame)
        self.save_button.setEnabled(True)
        self.compare_button.setEnabled(True)

    def show_threads(self, threads: list[ThreadStack]) -> None:
        self.header.setText(f"{self.windowTitle()}: {len(threads)} threads")
        self.threads.setPlainText("\n\n".join("\n".join(thread_lines(t)) for t in threads))
        self.tabs.setCurrentWidget(self.threads)

    def show_error(self, error: str) -> None:
        self.header.setText(f"{self.windowTitle()}: {error}")
        self.header.setStyleSheet("color: #b03a36;")

    def save_to(self, path: Path) -> None:
        """The graph shown, as collapsed stacks (what Compare with saved reads back)."""
        if self.root is None:
            return
        try:
            written = save_flame_graph(self.root, path)
        except OSError as error:
            self.show_error(f"could not save to {path}: {error.strerror or error}")
            return
        self.setToolTip(f"{written:,} stacks saved to {path}")

    def compare_with(self, path: Path) -> None:
        """The frames whose share changed most from the graph saved at ``path`` to this
        one, in the Compared tab."""
        if self.root is None:
            return
        try:
            before = load_flame_graph(path)
        except ProfilingError as error:
            self.show_error(str(error))
            return
        self.show_changes(compare_flame_graphs(before, self.root, CHANGES), path.name)

    def show_changes(self, changes: list[FrameChange], before: str) -> None:
        table = self.compared
        table.setRowCount(len(changes))
        for row, change in enumerate(changes):
            cells = (f"{change.before:.1%}", f"{change.after:.1%}", f"{change.change:+.1%}",
                     f"{change.own_before:.1%}", f"{change.own_after:.1%}", change.frame)
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if abs(change.change) >= 0.05:
                    item.setBackground(QBrush(_MORE if change.change > 0 else _LESS))
                table.setItem(row, column, item)
        table.setToolTip(f"{before} (before) and this graph (after)")
        self.tabs.setTabText(self.tabs.indexOf(table), f"Compared with {before}")
        self.tabs.setCurrentWidget(table)

    def _choose_save(self) -> None:
        name, _ = QFileDialog.getSaveFileName(self, "Save flame graph",
                                              suggested_file(self.windowTitle()),
                                              "Collapsed stacks (*.collapsed *.txt)")
        if name:
            self.save_to(Path(name))

    def _choose_compare(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Compare with a saved flame graph", "",
                                              "Collapsed stacks (*.collapsed *.txt);;"
                                              "All files (*)")
        if name:
            self.compare_with(Path(name))


def suggested_file(title: str) -> str:
    """A file name from the window's title: letters, digits, dashes and dots."""
    words = re.findall(r"[A-Za-z0-9_.]+", title.removeprefix("Flame graph of ")
                       .replace("'s workers", ""))
    return "-".join(words)[:80] + ".collapsed"


def _changes_table() -> QTableWidget:
    table = QTableWidget(0, len(CHANGE_COLUMNS))
    table.setHorizontalHeaderLabels(CHANGE_COLUMNS)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    return table
