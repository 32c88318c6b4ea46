"""The ExecutionGraph view: a job's DAG, one box per job vertex, one cell per subtask.

Drawn from the snapshot dict ``ExecutionGraph.snapshot()`` renders (see gui/jobfeed.py
for how it arrives). Vertices are laid out left to right in layers (gui/graphlayout.py);
each box shows the vertex's name, parallelism and operator chain, and one cell per
subtask filled with the colour of its current attempt's state; edges carry their ship
strategy. The items are created once per job shape: a new snapshot of the same job only
recolours cells and rewrites counts, so a job with many subtasks redraws cheaply.

Wheel zooms around the mouse, dragging the background pans, clicking a cell selects the
subtask and emits ``subtask_clicked(vertex_id, subtask)``. GUI thread only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetrics,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPen,
    QPolygonF,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsPolygonItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QWidget,
)

from gui.graphlayout import snapshot_layers, structure_key
from gui.palette import JOB_STATUS_COLOURS, execution_colour

BOX_WIDTH = 236.0
_PADDING = 10.0
_HEADER = 62.0
CELL = 18.0
_CELL_GAP = 4.0
_CELLS_PER_ROW = 10
_LAYER_GAP = 100.0
_ROW_GAP = 46.0
_EDGE_COLOUR = QColor("#55606e")
MAX_FIT_SCALE = 1.2


class SubtaskCell(QGraphicsRectItem):
    """One subtask; its fill is its current attempt's ExecutionState."""

    def __init__(self, vertex_id: str, subtask: int, parent: QGraphicsItem) -> None:
        super().__init__(0, 0, CELL, CELL, parent)
        self.vertex_id = vertex_id
        self.subtask = subtask
        self.state = ""
        self.setPen(QPen(QColor("#5b6470"), 0.8))
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def set_subtask(self, data: Mapping[str, Any]) -> None:
        state = str(data.get("state", ""))
        attempts = data.get("attempts") or ()
        if state != self.state:
            self.state = state
            self.setBrush(QBrush(execution_colour(state)))
        where = ""
        current = attempts[-1] if attempts else {}
        if current.get("slot"):
            slot = current["slot"]
            where = f"\n{slot['taskmanager_id']}, slot {slot['slot_index']}"
        self.setToolTip(f"{data.get('id', f'{self.vertex_id}#{self.subtask}')}: {state}\n"
                        f"attempt {len(attempts) - 1 if attempts else 0}{where}")


class VertexBox(QGraphicsRectItem):
    """One job vertex: header text, then its subtask cells in rows of ten."""

    def __init__(self, vertex: Mapping[str, Any]) -> None:
        self.vertex_id = str(vertex["id"])
        parallelism = int(vertex.get("parallelism", len(vertex.get("subtasks", ()))))
        rows = max(1, -(-parallelism // _CELLS_PER_ROW))
        height = _HEADER + rows * (CELL + _CELL_GAP) + _PADDING
        super().__init__(0, 0, BOX_WIDTH, height)
        self.setBrush(QBrush(QColor("#ffffff")))
        self.setPen(QPen(QColor("#8a94a3"), 1.2))
        title_font = QFont()
        title_font.setBold(True)
        title_font.setPointSizeF(11.0)
        self._title = self._text(title_font, _PADDING, 6)
        name = str(vertex.get("name", self.vertex_id))
        self._title.setText(_elide(name, title_font, BOX_WIDTH - 2 * _PADDING))
        small = QFont()
        small.setPointSizeF(9.0)
        chain = " \u2192 ".join(str(op.get("kind", "")) for op in vertex.get("operators", ()))
        self.setToolTip(f"{name} ({self.vertex_id})\n" + "\n".join(
            f"  {op.get('name', '')} [{op.get('kind', '')}]" for op in vertex.get("operators", ())))
        self._chain = self._text(small, _PADDING, 25)
        self._chain.setText(_elide(f"p={parallelism}  {chain}", small, BOX_WIDTH - 2 * _PADDING))
        self._counts = self._text(small, _PADDING, 41)
        self._counts.setBrush(QBrush(QColor("#4a5360")))
        self.cells: list[SubtaskCell] = []
        for index in range(parallelism):
            cell = SubtaskCell(self.vertex_id, index, self)
            row, column = divmod(index, _CELLS_PER_ROW)
            cell.setPos(_PADDING + column * (CELL + _CELL_GAP),
                        _HEADER + row * (CELL + _CELL_GAP))
            self.cells.append(cell)
        self.update_from(vertex)

    def _text(self, font: QFont, x: float, y: float) -> QGraphicsSimpleTextItem:
        item = QGraphicsSimpleTextItem(self)
        item.setFont(font)
        item.setPos(x, y)
        return item

    def update_from(self, vertex: Mapping[str, Any]) -> None:
        for cell, subtask in zip(self.cells, vertex.get("subtasks", ()), strict=False):
            cell.set_subtask(subtask)
        counts = vertex.get("state_counts") or {}
        self._counts.setText("  ".join(f"{state.lower()} {count}"
                                       for state, count in counts.items()))
        failed = bool(counts.get("FAILED"))
        self.setPen(QPen(QColor("#d64541") if failed else QColor("#8a94a3"),
                         2.0 if failed else 1.2))


class EdgeItem(QGraphicsPathItem):
    """A data exchange: a curve from the producer's right side to the consumer's left,
    an arrowhead, and the ship strategy as a label."""

    def __init__(self, source: VertexBox, target: VertexBox, strategy: str,
                 slot: int, slots: int) -> None:
        super().__init__()
        self.strategy = strategy
        start = source.sceneBoundingRect()
        end = target.sceneBoundingRect()
        a = QPointF(start.right(), start.center().y())
        b = QPointF(end.left(), end.top() + end.height() * (slot + 1) / (slots + 1))
        bend = max(40.0, (b.x() - a.x()) / 2)
        path = QPainterPath(a)
        path.cubicTo(a + QPointF(bend, 0), b - QPointF(bend, 0), b - QPointF(8, 0))
        self.setPath(path)
        self.setPen(QPen(_EDGE_COLOUR, 1.6))
        self.setZValue(-1)
        arrow = QPolygonF([b, b + QPointF(-10, -5), b + QPointF(-10, 5)])
        head = QGraphicsPolygonItem(arrow, self)
        head.setBrush(QBrush(_EDGE_COLOUR))
        head.setPen(QPen(Qt.PenStyle.NoPen))
        label = QGraphicsSimpleTextItem(strategy, self)
        font = QFont()
        font.setPointSizeF(9.0)
        font.setBold(True)
        label.setFont(font)
        label.setBrush(QBrush(QColor("#33404f")))
        middle = path.pointAtPercent(0.5)
        box = label.boundingRect()
        background = QGraphicsRectItem(box.adjusted(-4, -2, 4, 2), self)
        background.setBrush(QBrush(QColor("#eef1f5")))
        background.setPen(QPen(QColor("#c3cad4"), 0.8))
        background.setPos(middle - QPointF(box.width() / 2, box.height() / 2))
        label.setParentItem(background)
        label.setPos(0, 0)
        self.label = label


class ExecutionGraphView(QGraphicsView):
    """Shows one job's snapshot; ``show_snapshot`` again to follow it."""

    subtask_clicked = Signal(str, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHints(QPainter.RenderHint.Antialiasing
                            | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setBackgroundBrush(QBrush(QColor("#f7f8fa")))
        self.boxes: dict[str, VertexBox] = {}
        self.edges: list[EdgeItem] = []
        self.snapshot: dict[str, Any] | None = None
        self.selected: tuple[str, int] | None = None
        self._shape: tuple[Any, ...] | None = None
        self._placeholder = "No job to show."
        self._highlight = QGraphicsRectItem(-3, -3, CELL + 6, CELL + 6)
        self._highlight.setPen(QPen(QColor("#111111"), 2.2))
        self._highlight.setZValue(10)

    # -- content ------------------------------------------------------------------------------

    def show_snapshot(self, snapshot: Mapping[str, Any]) -> None:
        """Draw ``snapshot``: rebuild when the job's shape changed, else recolour."""
        self.snapshot = dict(snapshot)
        shape = structure_key(snapshot)
        if shape != self._shape:
            self._rebuild(snapshot)
            self._shape = shape
            self.fit()
        else:
            for vertex in snapshot.get("vertices", ()):
                box = self.boxes.get(str(vertex["id"]))
                if box is not None:
                    box.update_from(vertex)
        self._frame(str(snapshot.get("status", "")))

    def clear(self, placeholder: str = "No job to show.") -> None:
        self._placeholder = placeholder
        self._take_highlight()
        self.scene().clear()
        self.boxes.clear()
        self.edges.clear()
        self.snapshot = None
        self.selected = None
        self._shape = None
        self.viewport().update()

    def cell(self, vertex_id: str, subtask: int) -> SubtaskCell:
        return self.boxes[vertex_id].cells[subtask]

    def cells(self) -> list[SubtaskCell]:
        return [cell for box in self.boxes.values() for cell in box.cells]

    def select(self, vertex_id: str, subtask: int) -> None:
        """Mark a subtask and announce it, as a click on its cell does."""
        box = self.boxes.get(vertex_id)
        if box is None or not 0 <= subtask < len(box.cells):
            return
        self.selected = (vertex_id, subtask)
        self._highlight.setParentItem(box.cells[subtask])
        self._highlight.setVisible(True)
        self.subtask_clicked.emit(vertex_id, subtask)

    def _take_highlight(self) -> None:
        """Keep the highlight item alive across a scene rebuild."""
        self._highlight.setParentItem(None)
        if self._highlight.scene() is not None:
            self._highlight.scene().removeItem(self._highlight)
        self._highlight.setVisible(False)

    def _rebuild(self, snapshot: Mapping[str, Any]) -> None:
        selected = self.selected
        self._take_highlight()
        scene = self.scene()
        scene.clear()
        self.boxes.clear()
        self.edges.clear()
        vertices = {str(v["id"]): v for v in snapshot.get("vertices", ())}
        x = 0.0
        for layer in snapshot_layers(snapshot):
            boxes = [VertexBox(vertices[vertex_id]) for vertex_id in layer]
            height = sum(b.rect().height() for b in boxes) + _ROW_GAP * (len(boxes) - 1)
            y = -height / 2
            for box in boxes:
                box.setPos(x, y)
                scene.addItem(box)
                self.boxes[box.vertex_id] = box
                y += box.rect().height() + _ROW_GAP
            x += BOX_WIDTH + _LAYER_GAP
        inputs: dict[str, int] = {}
        for edge in snapshot.get("edges", ()):
            inputs[str(edge["target"])] = inputs.get(str(edge["target"]), 0) + 1
        for edge in snapshot.get("edges", ()):
            source, target = self.boxes.get(str(edge["source"])), self.boxes.get(
                str(edge["target"]))
            if source is None or target is None:
                continue
            item = EdgeItem(source, target, str(edge.get("ship_strategy", "")),
                            int(edge.get("input_index", 0)), inputs[target.vertex_id])
            scene.addItem(item)
            self.edges.append(item)
        scene.setSceneRect(scene.itemsBoundingRect().adjusted(-24, -24, 24, 24))
        self.selected = None
        box = self.boxes.get(selected[0]) if selected is not None else None
        if selected is not None and box is not None and selected[1] < len(box.cells):
            self._highlight.setParentItem(box.cells[selected[1]])
            self._highlight.setVisible(True)
            self.selected = selected

    def _frame(self, status: str) -> None:
        colour = JOB_STATUS_COLOURS.get(status)
        self.setStyleSheet(f"QGraphicsView {{ border: 2px solid {colour.name()}; }}"
                           if colour is not None else "")

    # -- zoom and pan -------------------------------------------------------------------------

    def fit(self) -> None:
        """Show the whole graph, magnified at most ``MAX_FIT_SCALE`` times."""
        if not self.boxes:
            return
        self.resetTransform()
        self.fitInView(self.scene().sceneRect(), Qt.AspectRatioMode.KeepAspectRatio)
        if self.transform().m11() > MAX_FIT_SCALE:
            self.resetTransform()
            self.scale(MAX_FIT_SCALE, MAX_FIT_SCALE)
            self.centerOn(self.scene().sceneRect().center())

    def zoom_by(self, factor: float) -> None:
        scale = self.transform().m11() * factor
        if 0.1 <= scale <= 6.0:
            self.scale(factor, factor)

    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom_by(1.15 ** steps)
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            for item in self.items(event.position().toPoint()):
                if isinstance(item, SubtaskCell):
                    self.select(item.vertex_id, item.subtask)
                    event.accept()
                    return
        super().mousePressEvent(event)

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:
        if self.boxes:
            return
        painter.save()
        painter.resetTransform()
        painter.setPen(QColor("#6b7280"))
        painter.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter,
                         self._placeholder)
        painter.restore()


def _elide(text: str, font: QFont, width: float) -> str:
    return QFontMetrics(font).elidedText(text, Qt.TextElideMode.ElideRight, int(width))
