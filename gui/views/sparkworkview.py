"""A PySpark script's Spark work, opened from its vertex: its Spark jobs as columns, their
stages as nodes with a progress bar each (retried stages marked, stages with failed tasks
red), joined in stage order as Spark runs them, and its last failed tasks in red below.

It draws the ``SparkWork`` of the job's snapshot (``JobGraphSnapshot.spark``, newest
attempt), redrawn with each snapshot the jobs view draws; bounded by what a report holds
(``core/protocol/sparkwork.py``). GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen
from PySide6.QtWidgets import (
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
        name = QGraphicsSimpleTextItem(stage.name[:38], self)
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
        job's parent stages first), each joined to the next; a stage shared by two jobs is
        drawn in the first."""
        by_job: dict[int, list[SparkStage]] = {job.job_id: [] for job in work.jobs}
        for stage in work.stages:
            by_job.setdefault(stage.job_id, []).append(stage)
        for column, (job_id, stages) in enumerate(sorted(by_job.items())):
            x = column * (NODE_WIDTH + COLUMN_GAP)
            job = next((j for j in work.jobs if j.job_id == job_id), None)
            header = self.scene.addSimpleText(
                f"Spark job {job_id}: {job.status if job else ''}\n"
                f"{(job.name if job else '')[:34]}")
            header.setPos(x, -40)
            previous: StageNode | None = None
            for row, stage in enumerate(stages):
                node = StageNode(stage, x, row * (NODE_HEIGHT + ROW_GAP))
                self.scene.addItem(node)
                self.nodes[(stage.stage_id, stage.attempt)] = node
                if previous is not None:
                    top = previous.pos().y() + NODE_HEIGHT
                    self.scene.addLine(x + NODE_WIDTH / 2, top, x + NODE_WIDTH / 2,
                                       top + ROW_GAP, QPen(QColor("#6b6b6b")))
                previous = node
        self.scene.setSceneRect(self.scene.itemsBoundingRect().adjusted(-8, -8, 8, 8))
        self.canvas.ensureVisible(QRectF(0, -40, 10, 10))
