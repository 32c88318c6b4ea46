"""The ExecutionGraph view: a job's DAG, one box per job vertex, one cell per subtask.

Drawn from the ``JobGraphSnapshot`` that ``ExecutionGraph.snapshot()`` renders (see
gui/jobfeed.py for how it arrives). Vertices are laid out left to right in layers
(gui/models/graphlayout.py); each box shows the vertex's name, parallelism and operator
chain, and one cell per subtask filled with the colour of its current attempt's state;
edges carry their ship strategy. The items are created once per job shape: a new
snapshot of the same job only recolours cells and rewrites counts, so a job with many
subtasks redraws cheaply.
A streaming job's boxes have two lines more: records/s in and out, its backpressure band
(the highest share of its subtasks, coloured as Flink's: OK, LOW, HIGH) and its watermark
(the smallest of its subtasks', as event time); the live numbers come at the bridge's
ticks (``set_numbers``), never per message.
Between two snapshots (the JobMaster sends at most ten a second) ``apply_event`` recolours
one cell from an ExecutionStateEvent, so a state change shows at the bridge's next tick.

Wheel zooms around the mouse, dragging the background pans, clicking a cell selects the
subtask and emits ``subtask_clicked(vertex_id, subtask)``; ``focus`` does the same from
code (the failures view) and centres the cell. Double-clicking a vertex, or its context
menu's "Flame graph of this vertex's workers", emits ``vertex_profile_wanted(vertex_id)``
(docs/profiling.md). GUI thread only.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QContextMenuEvent,
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
    QMenu,
    QWidget,
)

from clusterdeck.core.protocol.jobgraph import JobEdge, JobKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, SubtaskSnapshot, VertexSnapshot
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.gui.models.formatting import format_bytes, format_watermark
from clusterdeck.gui.models.graphlayout import snapshot_layers, structure_key
from clusterdeck.gui.models.metrics import VertexNumbers
from clusterdeck.gui.models.palette import (
    BACKPRESSURE_COLOURS,
    JOB_STATUS_COLOURS,
    execution_colour,
)

BOX_WIDTH = 236.0
_PADDING = 10.0
_HEADER = 78.0
_STREAM_LINES = 36.0  # a streaming vertex's backpressure and watermark lines
CELL = 18.0
_CELL_GAP = 4.0
_CELLS_PER_ROW = 10
_LAYER_GAP = 100.0
_ROW_GAP = 46.0
_EDGE_COLOUR = QColor("#55606e")
MAX_FIT_SCALE = 1.2
_STATE_RANK = {ExecutionState.CREATED: 0, ExecutionState.SCHEDULED: 1,
               ExecutionState.DEPLOYING: 2, ExecutionState.RUNNING: 3,
               ExecutionState.CANCELING: 4, ExecutionState.FINISHED: 5,
               ExecutionState.CANCELED: 5, ExecutionState.FAILED: 5}


_BRUSHES: dict[str, QBrush] = {}


def _brush(state: str) -> QBrush:
    """One brush per state, made once (a cell's fill changes thousands of times)."""
    brush = _BRUSHES.get(state)
    if brush is None:
        brush = _BRUSHES[state] = QBrush(execution_colour(state))
    return brush


class SubtaskCell(QGraphicsRectItem):
    """One subtask; its fill is its current attempt's ExecutionState."""

    def __init__(self, vertex_id: str, subtask: int, parent: QGraphicsItem) -> None:
        super().__init__(0, 0, CELL, CELL, parent)
        self.vertex_id = vertex_id
        self.subtask = subtask
        self.state: ExecutionState | str = ""  # "" until a snapshot or an event says
        self.attempt = 0
        self._key: tuple[Any, ...] | None = None
        self.setPen(QPen(QColor("#5b6470"), 0.8))
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def set_subtask(self, data: SubtaskSnapshot) -> None:
        """Take a snapshot's subtask; a cell whose state, attempt and slot are what it
        shows already costs one comparison (a snapshot has every subtask in it)."""
        current = data.current
        slot = current.slot if current is not None else None
        key = (data.state, current.attempt if current is not None else None, slot)
        if key == self._key:
            return
        self._key = key
        self.attempt = current.attempt if current is not None else 0
        self.set_state(data.state)
        where = f"\n{slot.taskmanager_id}, slot {slot.slot_index}" if slot else ""
        self.setToolTip(f"{data.id}: {self.state}\nattempt {self.attempt}{where}")

    def set_state(self, state: ExecutionState) -> None:
        if state != self.state:
            self.state = state
            self.setBrush(_brush(state))

    def advance(self, attempt: int, state: ExecutionState) -> bool:
        """An event says attempt ``attempt`` entered ``state``: take it when it is news (a
        later attempt, or a later state of this one); an event older than the snapshot
        already drawn is ignored."""
        if attempt < self.attempt or (attempt == self.attempt and _STATE_RANK.get(
                state, 0) <= _STATE_RANK.get(self.state, -1)):
            return False
        self.attempt = attempt
        self.set_state(state)
        self._key = None  # the next snapshot rewrites the tooltip
        return True


class PressureBadge(QGraphicsRectItem):
    """A streaming vertex's backpressure: its band and share, white on the band's colour."""

    def __init__(self, parent: QGraphicsItem, font: QFont) -> None:
        super().__init__(parent)
        self.setPen(QPen(Qt.PenStyle.NoPen))
        self.band = ""
        self._text = QGraphicsSimpleTextItem(self)
        bold = QFont(font)
        bold.setBold(True)
        self._text.setFont(bold)
        self._text.setBrush(QBrush(QColor("#ffffff")))
        self._text.setPos(4, 0)

    def text(self) -> str:
        return self._text.text()

    def show_share(self, band: str, share: float) -> None:
        self.band = band
        self._text.setText(f"{band} {share:.0%}")
        box = self._text.boundingRect()
        self.setRect(0, 0, box.width() + 8, box.height())
        self.setBrush(QBrush(BACKPRESSURE_COLOURS[band]))


class VertexBox(QGraphicsRectItem):
    """One job vertex: header text, then its subtask cells in rows of ten. ``streaming``:
    its live numbers are rates, its backpressure and its watermark."""

    def __init__(self, vertex: VertexSnapshot, streaming: bool = False) -> None:
        self.vertex_id = vertex.id
        self.streaming = streaming
        parallelism = vertex.parallelism
        rows = max(1, -(-parallelism // _CELLS_PER_ROW))
        header = _HEADER + (_STREAM_LINES if streaming else 0.0)
        height = header + rows * (CELL + _CELL_GAP) + _PADDING
        super().__init__(0, 0, BOX_WIDTH, height)
        self.setBrush(QBrush(QColor("#ffffff")))
        self.setPen(QPen(QColor("#8a94a3"), 1.2))
        title_font = QFont()
        title_font.setBold(True)
        title_font.setPointSizeF(11.0)
        self._title = self._text(title_font, _PADDING, 6)
        name = vertex.name
        self._title.setText(_elide(name, title_font, BOX_WIDTH - 2 * _PADDING))
        small = QFont()
        small.setPointSizeF(9.0)
        chain = " \u2192 ".join(op.kind for op in vertex.operators)
        self._about = f"{name} ({self.vertex_id})\n" + "\n".join(
            f"  {op.name} [{op.kind}]" for op in vertex.operators)
        self.setToolTip(self._about)
        self._chain = self._text(small, _PADDING, 25)
        self._chain.setText(_elide(f"p={parallelism}  {chain}", small, BOX_WIDTH - 2 * _PADDING))
        self._counts = self._text(small, _PADDING, 41)
        self._counts.setBrush(QBrush(QColor("#4a5360")))
        self._numbers = self._text(small, _PADDING, 57)
        self._numbers.setBrush(QBrush(QColor("#1f4e79")))
        self.pressure: PressureBadge | None = None
        self.watermark: QGraphicsSimpleTextItem | None = None
        if streaming:
            label = self._text(small, _PADDING, 74)
            label.setText("backpressure")
            label.setBrush(QBrush(QColor("#4a5360")))
            self.pressure = PressureBadge(self, small)
            self.pressure.setPos(_PADDING + label.boundingRect().width() + 6, 74)
            self.pressure.setVisible(False)
            self.watermark = self._text(small, _PADDING, 92)
            self.watermark.setBrush(QBrush(QColor("#4a5360")))
        self.cells: list[SubtaskCell] = []
        self._failed = False
        for index in range(parallelism):
            cell = SubtaskCell(self.vertex_id, index, self)
            row, column = divmod(index, _CELLS_PER_ROW)
            cell.setPos(_PADDING + column * (CELL + _CELL_GAP),
                        header + row * (CELL + _CELL_GAP))
            self.cells.append(cell)
        self.update_from(vertex)

    def _text(self, font: QFont, x: float, y: float) -> QGraphicsSimpleTextItem:
        item = QGraphicsSimpleTextItem(self)
        item.setFont(font)
        item.setPos(x, y)
        return item

    def update_from(self, vertex: VertexSnapshot) -> None:
        for cell, subtask in zip(self.cells, vertex.subtasks, strict=False):
            cell.set_subtask(subtask)
        counts = vertex.state_counts
        text = "  ".join(f"{state.lower()} {count}" for state, count in counts.items())
        if text != self._counts.text():
            self._counts.setText(text)
        failed = bool(counts.get(ExecutionState.FAILED))
        if failed != self._failed:
            self._failed = failed
            self.setPen(QPen(QColor("#d64541") if failed else QColor("#8a94a3"),
                             2.0 if failed else 1.2))


    def set_numbers(self, numbers: VertexNumbers | None, by_busy: bool) -> None:
        """Its live numbers under the counts (a streaming vertex's: rates, backpressure,
        watermark); the box tinted by its busy share when asked; the spread over its
        subtasks in the tooltip."""
        line = stream_line if self.streaming else numbers_line
        self._numbers.setText(line(numbers) if numbers is not None else "")
        share = numbers.busy_share if numbers is not None and by_busy else 0.0
        self.setBrush(QBrush(busy_colour(share)))
        about = numbers_tooltip(numbers, self.streaming) if numbers is not None else ""
        self.setToolTip(self._about + (f"\n\n{about}" if about else ""))
        if self.pressure is not None and self.watermark is not None:
            self.pressure.setVisible(numbers is not None)
            if numbers is not None:
                self.pressure.show_share(numbers.backpressure_band, numbers.backpressure)
            self.watermark.setText(watermark_text(numbers.watermark)
                                   if numbers is not None else "")


def busy_colour(share: float) -> QColor:
    """White when idle to orange when every subtask is busy (Flink's busy colouring)."""
    share = max(0.0, min(1.0, share))
    return QColor(255, round(255 - 95 * share), round(255 - 200 * share))


def numbers_line(numbers: VertexNumbers) -> str:
    return (f"in {compact(numbers.records_in)}  out {compact(numbers.records_out)} "
            f"({compact(numbers.rate_out)}/s)  busy {numbers.busy_share:.0%}")


def stream_line(numbers: VertexNumbers) -> str:
    """A streaming vertex's: its rates now (its totals grow for ever; the tooltip has them)."""
    return (f"in {compact(numbers.rate_in)}/s  out {compact(numbers.rate_out)}/s  "
            f"busy {numbers.busy_share:.0%}")


def numbers_tooltip(numbers: VertexNumbers, streaming: bool = False) -> str:
    lines = [f"records in {numbers.records_in:,} ({numbers.rate_in:,.0f}/s), "
             f"out {numbers.records_out:,} ({numbers.rate_out:,.0f}/s)",
             f"bytes read {format_bytes(numbers.bytes_in)}, "
             f"written {format_bytes(numbers.bytes_out)}",
             f"busy {numbers.busy:,.1f} s in all, {numbers.busy_share:.0%} now"]
    if numbers.spread is not None:
        low, median, high, busiest = numbers.spread
        lines.append(f"records out per subtask ({numbers.subtasks} reported): min {low:,}, "
                     f"median {median:,.0f}, max {high:,} (subtask {busiest})")
    if streaming:
        most = numbers.backpressured_subtask
        lines.append(f"backpressure {numbers.backpressure_band}: "
                     f"{numbers.backpressure:.0%} of the time"
                     + (f" (subtask {most}, the highest)" if most is not None else ""))
        lines.append(f"{watermark_text(numbers.watermark)} (the smallest of its "
                     f"subtasks')")
    return "\n".join(lines)


def watermark_text(watermark: float | None) -> str:
    """"watermark 12:00:03.250", or "no watermark"."""
    text = format_watermark(watermark)
    return text if watermark is None else f"watermark {text}"


def compact(value: float) -> str:
    """12, 3.4k, 5.6M: short enough for a box."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:.0f}"


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
    vertex_profile_wanted = Signal(str)  # a vertex id: its workers' flame graph

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
        self.snapshot: JobGraphSnapshot | None = None
        self.selected: tuple[str, int] | None = None
        self.numbers: dict[str, VertexNumbers] = {}
        self.by_busy = False
        self._shape: tuple[Any, ...] | None = None
        self._placeholder = "No job to show."
        self._framed: str | None = None
        self._highlight = QGraphicsRectItem(-3, -3, CELL + 6, CELL + 6)
        self._highlight.setPen(QPen(QColor("#111111"), 2.2))
        self._highlight.setZValue(10)

    # -- content ------------------------------------------------------------------------------

    def show_snapshot(self, snapshot: JobGraphSnapshot) -> None:
        """Draw ``snapshot``: rebuild when the job's shape changed, else recolour."""
        self.snapshot = snapshot
        shape = structure_key(snapshot)
        if shape != self._shape:
            self._rebuild(snapshot)
            self._shape = shape
            self.fit()
        else:
            for vertex in snapshot.vertices:
                box = self.boxes.get(vertex.id)
                if box is not None:
                    box.update_from(vertex)
        self._frame(snapshot.status)

    def set_numbers(self, numbers: dict[str, VertexNumbers], by_busy: bool = False) -> None:
        """Live numbers per vertex (gui/models/metrics.py); vertices without any show none."""
        self.numbers, self.by_busy = numbers, by_busy
        for vertex_id, box in self.boxes.items():
            box.set_numbers(numbers.get(vertex_id), by_busy)

    def clear(self, placeholder: str = "No job to show.") -> None:
        self._placeholder = placeholder
        self._take_highlight()
        self.scene().clear()
        self.boxes.clear()
        self.edges.clear()
        self.snapshot = None
        self.selected = None
        self.numbers = {}
        self._shape = None
        self._frame("")
        self.viewport().update()

    def cell(self, vertex_id: str, subtask: int) -> SubtaskCell:
        return self.boxes[vertex_id].cells[subtask]

    def cells(self) -> list[SubtaskCell]:
        return [cell for box in self.boxes.values() for cell in box.cells]

    def apply_event(self, vertex_id: str, subtask: int, attempt: int,
                    state: ExecutionState) -> bool:
        """Recolour one cell from an ExecutionStateEvent; True when it changed."""
        box = self.boxes.get(vertex_id)
        if box is None or not 0 <= subtask < len(box.cells):
            return False
        return box.cells[subtask].advance(attempt, state)

    def focus(self, vertex_id: str, subtask: int) -> None:
        """Select a subtask (as a click does) and bring its cell to the middle."""
        self.select(vertex_id, subtask)
        if self.selected == (vertex_id, subtask):
            self.centerOn(self.boxes[vertex_id].cells[subtask])

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

    def _rebuild(self, snapshot: JobGraphSnapshot) -> None:
        selected = self.selected
        self._take_highlight()
        scene = self.scene()
        scene.clear()
        self.boxes.clear()
        self.edges.clear()
        vertices = {v.id: v for v in snapshot.vertices}
        x = 0.0
        streaming = snapshot.kind == JobKind.STREAMING
        for layer in snapshot_layers(snapshot):
            boxes = [VertexBox(vertices[vertex_id], streaming) for vertex_id in layer]
            height = sum(b.rect().height() for b in boxes) + _ROW_GAP * (len(boxes) - 1)
            y = -height / 2
            for box in boxes:
                box.setPos(x, y)
                scene.addItem(box)
                self.boxes[box.vertex_id] = box
                y += box.rect().height() + _ROW_GAP
            x += BOX_WIDTH + _LAYER_GAP
        inputs: dict[str, int] = {}
        edge: JobEdge
        for edge in snapshot.edges:
            inputs[edge.target] = inputs.get(edge.target, 0) + 1
        for edge in snapshot.edges:
            source, target = self.boxes.get(edge.source), self.boxes.get(edge.target)
            if source is None or target is None:
                continue
            item = EdgeItem(source, target, str(edge.ship_strategy), edge.input_index,
                            inputs[target.vertex_id])
            scene.addItem(item)
            self.edges.append(item)
        scene.setSceneRect(scene.itemsBoundingRect().adjusted(-24, -24, 24, 24))
        self.selected = None
        if self._shape is None or self._shape[0] != snapshot.job_id:
            selected = None  # another job: its vertex ids mean other vertices
            self.numbers = {}
        self.set_numbers(self.numbers, self.by_busy)
        box = self.boxes.get(selected[0]) if selected is not None else None
        if selected is not None and box is not None and selected[1] < len(box.cells):
            self._highlight.setParentItem(box.cells[selected[1]])
            self._highlight.setVisible(True)
            self.selected = selected

    def _frame(self, status: str) -> None:
        """A border in the job status's colour; a style sheet costs a re-polish, so it is
        set when the status changes only."""
        if status == self._framed:
            return
        self._framed = status
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

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        vertex_id = self.vertex_at(event.position().toPoint())
        if event.button() == Qt.MouseButton.LeftButton and vertex_id is not None:
            self.vertex_profile_wanted.emit(vertex_id)
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        vertex_id = self.vertex_at(event.pos())
        if vertex_id is None:
            super().contextMenuEvent(event)
            return
        menu = self.vertex_menu(vertex_id)
        menu.exec(event.globalPos())

    def vertex_menu(self, vertex_id: str) -> QMenu:
        """What can be done with one vertex from the graph."""
        menu = QMenu(self)
        profile = menu.addAction("Flame graph of this vertex's workers")
        profile.triggered.connect(lambda: self.vertex_profile_wanted.emit(vertex_id))
        return menu

    def vertex_at(self, point: Any) -> str | None:
        """The vertex whose box (or one of its cells) is under ``point`` (view
        coordinates)."""
        for item in self.items(point):
            while item is not None and not isinstance(item, VertexBox):
                item = item.parentItem()
            if isinstance(item, VertexBox):
                return item.vertex_id
        return None

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
