"""A PySpark script's Spark work, opened from its vertex: its Spark jobs as columns, their
stages as nodes with a progress bar each (retried stages marked, stages with failed tasks
red), each joined to its parent stages by Spark's edges (``SparkStage.parent_ids``: the
shuffles it reads), and its last failed tasks in red below.

It draws the ``SparkWork`` of the job's snapshot (``JobGraphSnapshot.spark``, newest
attempt), redrawn with each snapshot the jobs view draws; bounded by what a report holds
(``core/protocol/sparkwork.py``). GUI thread only.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (
    QGraphicsPathItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.protocol.sparkwork import SparkStage, SparkStageStatus, SparkWork
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.gui.models.palette import EXECUTION_STATE_COLOURS

NODE_WIDTH, NODE_HEIGHT, BAR_HEIGHT = 220.0, 58.0, 8.0
COLUMN_GAP, ROW_GAP = 40.0, 18.0
FAILED = EXECUTION_STATE_COLOURS[ExecutionState.FAILED]
STAGE_COLOURS: dict[SparkStageStatus, QColor] = {
    SparkStageStatus.PENDING: EXECUTION_STATE_COLOURS[ExecutionState.CREATED],
    SparkStageStatus.ACTIVE: EXECUTION_STATE_COLOURS[ExecutionState.RUNNING],
    SparkStageStatus.COMPLETE: EXECUTION_STATE_COLOURS[ExecutionState.FINISHED],
    SparkStageStatus.SKIPPED: EXECUTION_STATE_COLOURS[ExecutionState.CANCELED],
    SparkStageStatus.FAILED: FAILED,
}
NO_WORK = "No Spark work: this job is not a PySpark script, or it has run no Spark job yet."


def short_call_site(name: str) -> str:
    """A call site as a box has room for it: ``collect at /long/path/pagerank.py:68``
    as ``collect at pagerank.py:68`` (the tooltip keeps the whole)."""
    return _CALL_SITE_FOLDER.sub(" at ", name)


_CALL_SITE_FOLDER = re.compile(r" at \S*/(?=[^/\s]+$)")


class StageNode(QGraphicsRectItem):
    """One attempt of one stage: its name, tasks done of all, and a bar of them."""

    def __init__(self, stage: SparkStage, x: float, y: float) -> None:
        super().__init__(0, 0, NODE_WIDTH, NODE_HEIGHT)
        self.stage = stage
        self.setPos(x, y)
        self.failed = stage.failed > 0 or stage.status is SparkStageStatus.FAILED
        self.setPen(QPen(FAILED if self.failed else QColor("#6b6b6b"),
                         2.5 if self.failed else 1.0))
        self.setBrush(QBrush(QColor("#fbfbfb")))
        retried = f" (retry {stage.attempt})" if stage.attempt else ""
        title = QGraphicsSimpleTextItem(f"Stage {stage.stage_id}{retried}: {stage.status}", self)
        title.setPos(6, 3)
        name = QGraphicsSimpleTextItem(short_call_site(stage.name)[:38], self)
        name.setPos(6, 19)
        failed = f", {stage.failed} failed" if stage.failed else ""
        counts = QGraphicsSimpleTextItem(
            f"({stage.done} + {stage.running}) / {stage.tasks} tasks{failed}", self)
        counts.setPos(6, 34)
        if self.failed:
            counts.setBrush(QBrush(FAILED))
        track = QGraphicsRectItem(6, NODE_HEIGHT - BAR_HEIGHT - 3, NODE_WIDTH - 12, BAR_HEIGHT,
                                  self)
        track.setBrush(QBrush(QColor("#e4e6ea")))
        track.setPen(QPen(Qt.PenStyle.NoPen))
        share = stage.done / stage.tasks if stage.tasks else 0.0
        self.bar = QGraphicsRectItem(6, NODE_HEIGHT - BAR_HEIGHT - 3,
                                     (NODE_WIDTH - 12) * share, BAR_HEIGHT, self)
        self.bar.setBrush(QBrush(STAGE_COLOURS[stage.status]))
        self.bar.setPen(QPen(Qt.PenStyle.NoPen))
        self.setToolTip(f"Stage {stage.stage_id}.{stage.attempt} of Spark job {stage.job_id}\n"
                        f"{stage.name}\ninput {stage.input_bytes:,} B, "
                        f"{stage.input_records:,} records\nshuffle read "
                        f"{stage.shuffle_read_bytes:,} B, write {stage.shuffle_write_bytes:,} B")


class StageEdge(QGraphicsPathItem):
    """From a parent stage to a stage that reads its shuffle output: straight down to the
    node right below it, else around the nodes between them, through the gap on their
    right (same column) or across to the child's column."""

    def __init__(self, parent: StageNode, child: StageNode) -> None:
        super().__init__()
        self.parent_stage, self.child_stage = parent.stage, child.stage
        top, below = parent.pos(), child.pos()
        path = QPainterPath()
        if top.x() == below.x() and below.y() - top.y() <= NODE_HEIGHT + ROW_GAP:
            path.moveTo(top.x() + NODE_WIDTH / 2, top.y() + NODE_HEIGHT)
            path.lineTo(below.x() + NODE_WIDTH / 2, below.y())
        elif top.x() == below.x():  # from right side to right side: the curve bulges
            side = top.x() + NODE_WIDTH  # 0.75 of its control points' offset into the gap
            start = QPointF(side, top.y() + NODE_HEIGHT / 2)
            end = QPointF(side, below.y() + NODE_HEIGHT / 2)
            path.moveTo(start)
            path.cubicTo(QPointF(side + COLUMN_GAP * 0.8, start.y()),
                         QPointF(side + COLUMN_GAP * 0.8, end.y()), end)
        else:
            leftwards = below.x() < top.x()
            start = QPointF(top.x() + (0 if leftwards else NODE_WIDTH), top.y() + NODE_HEIGHT / 2)
            end = QPointF(below.x() + (NODE_WIDTH if leftwards else 0), below.y() + NODE_HEIGHT / 2)
            middle = (start.x() + end.x()) / 2
            path.moveTo(start)
            path.cubicTo(QPointF(middle, start.y()), QPointF(middle, end.y()), end)
        self.setPath(path)
        self.setPen(QPen(QColor("#6b6b6b"), 1.2))
        self.setZValue(-1)  # under the nodes it passes


class SparkWorkView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scene = QGraphicsScene(self)
        self.canvas = QGraphicsView(self.scene)
        self.canvas.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.summary = QLabel(NO_WORK)
        self.summary.setWordWrap(True)
        self.failures = QListWidget()
        self.failures.setMaximumHeight(110)
        self.nodes: dict[tuple[int, int], StageNode] = {}
        self.edges: dict[tuple[int, int], StageEdge] = {}  # by (parent, child) stage id
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.failures)
        self._shown: SparkWork | None = None

    def show_work(self, work: SparkWork | None) -> None:
        """Draw ``work`` (None: the job has none); nothing is redrawn if it did not change."""
        if work == self._shown:
            return
        self._shown = work
        self.scene.clear()
        self.nodes.clear()
        self.edges.clear()
        self.failures.clear()
        if work is None or not (work.jobs or work.stages):
            self.summary.setText(NO_WORK)
            return
        self._draw_stages(work)
        for task in reversed(work.failed_tasks):
            item = QListWidgetItem(
                f"stage {task.stage_id}.{task.stage_attempt} task {task.index}.{task.attempt} "
                f"(TID {task.task_id}) on {task.executor}: {task.summary}")
            item.setForeground(QBrush(FAILED))
            item.setToolTip(task.error)
            self.failures.addItem(item)
        self.failures.setVisible(bool(work.failed_tasks))
        done, total = work.stage_progress()
        earlier = f"; {work.earlier.jobs} earlier Spark jobs not drawn" \
            if work.earlier.jobs else ""
        self.summary.setText(f"{len(work.jobs) + work.earlier.jobs} Spark jobs, {done} of "
                             f"{total} stages done{earlier}")

    def _draw_stages(self, work: SparkWork) -> None:
        """A column per Spark job, its stages top to bottom in id order (Spark numbers a
        job's parent stages first), each joined to its parents; a stage shared by two jobs
        is drawn once, in the job the report gives it."""
        by_job: dict[int, list[SparkStage]] = {job.job_id: [] for job in work.jobs}
        for stage in work.stages:
            by_job.setdefault(stage.job_id, []).append(stage)
        for column, (job_id, stages) in enumerate(sorted(by_job.items())):
            x = column * (NODE_WIDTH + COLUMN_GAP)
            job = next((j for j in work.jobs if j.job_id == job_id), None)
            header = self.scene.addSimpleText(
                f"Spark job {job_id}: {job.status if job else ''}\n"
                f"{short_call_site(job.name if job else '')[:34]}")
            header.setPos(x, -40)
            for row, stage in enumerate(stages):
                node = StageNode(stage, x, row * (NODE_HEIGHT + ROW_GAP))
                self.scene.addItem(node)
                self.nodes[(stage.stage_id, stage.attempt)] = node
        self._draw_edges()
        self.scene.setSceneRect(self.scene.itemsBoundingRect().adjusted(-8, -8, 8, 8))
        self.canvas.ensureVisible(QRectF(0, -40, 10, 10))

    def _draw_edges(self) -> None:
        """Each stage (its every attempt drawn) from the newest attempt of each parent
        drawn; a parent the report does not list is not drawn, nor its edge."""
        newest = {stage_id: node for (stage_id, _), node in sorted(self.nodes.items())}
        for node in self.nodes.values():
            for parent_id in node.stage.parent_ids:
                parent = newest.get(parent_id)
                if parent is not None:
                    edge = StageEdge(parent, node)
                    self.scene.addItem(edge)
                    self.edges[(parent_id, node.stage.stage_id)] = edge
