"""A process looked into (core/profiling/pyspy.py): its flame graph, its hottest frames
and its threads, in a window of their own (docs/profiling.md).

The flame graph is drawn as Brendan Gregg draws it: the process at the bottom, each frame
a box as wide as its share of the samples, what it called stacked on top. Frames
narrower than half a pixel are left out, so a deep profile stays a few thousand items;
hover a box for its frame, samples and share. GUI thread only.
"""

from __future__ import annotations

import zlib

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPen
from PySide6.QtWidgets import (
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QLabel,
    QPlainTextEdit,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.profiling.pyspy import (
    FlameGraph,
    FlameNode,
    ThreadStack,
    hottest_lines,
    thread_lines,
)

WIDTH = 1200.0
ROW = 18.0
MIN_WIDTH = 0.5
MAX_ITEMS = 6000


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
    """One look into one process: a flame graph and its hottest frames, or its threads,
    or why it could not be done."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle(title)
        self.header = QLabel(title)
        self.header.setWordWrap(True)
        self.flame = FlameGraphView()
        self.hottest = QPlainTextEdit(readOnly=True)
        self.threads = QPlainTextEdit(readOnly=True)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.flame, "Flame graph")
        self.tabs.addTab(self.hottest, "Hottest frames")
        self.tabs.addTab(self.threads, "Threads")
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.tabs, 1)
        self.resize(1300, 700)

    def show_flame_graph(self, graph: FlameGraph) -> None:
        cut = f"; only the first {graph.stacks:,} distinct stacks" if graph.cut else ""
        self.header.setText(f"{self.windowTitle()}: {graph.root.samples:,} samples over "
                            f"{graph.seconds:g} s at {graph.rate} Hz{cut}")
        self.flame.draw(graph.root)
        self.hottest.setPlainText("\n".join(hottest_lines(graph.root, 40)) or "no samples")
        self.tabs.setCurrentWidget(self.flame)

    def show_threads(self, threads: list[ThreadStack]) -> None:
        self.header.setText(f"{self.windowTitle()}: {len(threads)} threads")
        self.threads.setPlainText("\n\n".join("\n".join(thread_lines(t)) for t in threads))
        self.tabs.setCurrentWidget(self.threads)

    def show_error(self, error: str) -> None:
        self.header.setText(f"{self.windowTitle()}: {error}")
        self.header.setStyleSheet("color: #b03a36;")
