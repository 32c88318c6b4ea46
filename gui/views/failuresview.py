"""The failures view: what broke in the selected job, root cause first, then the history.

A running job's failures come from its snapshots (``failures``, ``root_cause``); an ended
job's from its ``JobResult`` (``failure_history``, ``root_cause``, flat dicts read back as
``FailureRecord``s), which wins. Each
failure shows its exception and message, where it ran (TaskManager, slot, input splits,
attempt), when, the traceback with the user's frames marked (gui/views/failuretext.py) and
the task's last log lines. A streaming job that resumed from a checkpoint after a
failover says which, and when (from its snapshot's checkpoint summary). Clicking a
failure emits ``failure_selected(vertex_id, subtask)``, which the window uses to select
and centre that subtask in the ExecutionGraph. Above the failures, the chain of causes
(gui/models/causesmodel.py) draws the job's failover events as a tree, each with its
evidence; clicking an attempt's failure there selects it below.
While the view is off screen (another tab of its dock area is on top: ``set_on_screen``)
it only keeps the data and redraws when it is back, so a job failing many times costs
nothing there. GUI thread only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QTreeView,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.causes import CauseChain
from clusterdeck.core.protocol.checkpointstats import RestoredCheckpointStats
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.sparkwork import SparkWork
from clusterdeck.gui.models.causesmodel import EVENT_ROLE, NO_CHAIN, CauseChainModel
from clusterdeck.gui.models.checkpointsmodel import restored_text
from clusterdeck.gui.models.formatting import clock_millis
from clusterdeck.gui.views.failuretext import USER_COLOUR, attempt_number, failure_html

FAILURE_ROLE = Qt.ItemDataRole.UserRole + 1
HISTORY_SHOWN = 500
"""The most recent failures listed; a job that failed more often says how many more."""
_COLUMNS = ("Failure", "Subtask", "Attempt", "TaskManager / slot", "Failed at")
_WIDTHS = (220, 170, 60, 130)
NO_FAILURES = "No failures: every attempt of this job ran without an error so far."


@dataclass(frozen=True)
class JobFailures:
    """What one job's failures are, as last heard."""

    root_cause: FailureRecord | None
    history: tuple[FailureRecord, ...]
    vertex_names: dict[str, str]
    final: bool = False  # from the JobResult: later snapshots do not replace it
    restored: RestoredCheckpointStats | None = None  # a streaming job resumed from it
    spark: tuple[SparkWork, ...] = ()  # a script's Spark work, of its last attempts
    causes: CauseChain | None = None  # its failover events linked by cause (snapshots')

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.root_cause.attempt_id if self.root_cause else None,
                tuple(f.attempt_id for f in self.history), self.restored,
                tuple((w.attempt_id, w.failed_tasks) for w in self.spark), self.causes)

    def spark_of(self, attempt_id: str) -> SparkWork | None:
        return next((work for work in self.spark if work.attempt_id == attempt_id), None)


class FailuresView(QWidget):
    """A tree (root cause, then history) beside the selected failure in full."""

    failure_selected = Signal(str, int)
    """``(vertex_id, subtask)`` of a failure the user clicked."""
    logs_wanted = Signal(str, str)
    """``(attempt_id, taskmanager_id)``: show the log lines of the selected failure."""
    reproduce_wanted = Signal(str, str, int, int)
    """``(job_id, vertex_id, subtask, attempt)``: write a folder that runs the selected
    failure's attempt again on this machine (core/reproduce)."""

    def __init__(self, job_files: Mapping[str, Path] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.job_files = job_files if job_files is not None else {}
        self.job_id: str | None = None
        self._jobs: dict[str, JobFailures] = {}
        self._shown_key: tuple[Any, ...] | None = None
        self.on_screen = True
        self.title = QLabel("Select a job to see its failures.")
        self.restored = QLabel()
        self.restored.setVisible(False)
        self.log_button = QPushButton("Show its log lines")
        self.log_button.setToolTip("Every log line of the selected failure's attempt, from "
                                   "every process, in the Logs tab")
        self.log_button.setEnabled(False)
        self.log_button.clicked.connect(self._want_logs)
        self.reproduce_button = QPushButton("Reproduce locally…")
        self.reproduce_button.setToolTip("Write a folder with the job file, this attempt's "
                                         "input, arguments, Spark settings and restored "
                                         "state, to run it again here (docs/reproduce.md)")
        self.reproduce_button.setEnabled(False)
        self.reproduce_button.clicked.connect(self._want_reproduction)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(_COLUMNS))
        self.tree.setHeaderLabels(_COLUMNS)
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(True)
        header = self.tree.header()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        for column, width in enumerate(_WIDTHS):
            self.tree.setColumnWidth(column, width)
        self.causes = CauseChainModel()
        self.chain = QTreeView()
        self.chain.setModel(self.causes)
        self.chain.setUniformRowHeights(True)
        self.chain.header().setStretchLastSection(True)
        self.chain.setColumnWidth(0, 420)
        self.chain_title = QLabel(NO_CHAIN)
        self.detail = QTextBrowser()
        self.detail.setOpenLinks(False)
        self.detail.setPlaceholderText(NO_FAILURES)
        chain_box = QWidget()
        chain_layout = QVBoxLayout(chain_box)
        chain_layout.setContentsMargins(0, 0, 0, 0)
        chain_layout.addWidget(self.chain_title)
        chain_layout.addWidget(self.chain, 1)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(chain_box)
        left.addWidget(self.tree)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(self.detail)
        splitter.setSizes([600, 600])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.log_button)
        top.addWidget(self.reproduce_button)
        layout.addLayout(top)
        layout.addWidget(self.restored)
        layout.addWidget(splitter, 1)
        self.tree.currentItemChanged.connect(self._on_current)
        self.tree.itemClicked.connect(self._on_clicked)
        self.chain.clicked.connect(self._on_chain_clicked)

    # -- inputs (bridge) ----------------------------------------------------------------------

    def set_snapshot(self, job_id: str, snapshot: JobGraphSnapshot) -> None:
        known = self._jobs.get(job_id)
        names = {v.id: v.name for v in snapshot.vertices}
        checkpoints = snapshot.checkpoints
        restored = checkpoints.restored if checkpoints is not None else None
        if known is not None and known.final:
            if not known.vertex_names or known.restored != restored \
                    or known.causes != snapshot.causes:
                self._put(job_id, JobFailures(known.root_cause, known.history,
                                              known.vertex_names or names, True, restored,
                                              known.spark, snapshot.causes))
            return
        self._put(job_id, JobFailures(snapshot.root_cause, snapshot.failures, names,
                                      restored=restored, spark=snapshot.spark,
                                      causes=snapshot.causes))

    def set_result(self, job_id: str, result: p.JobResult) -> None:
        known = self._jobs.get(job_id)
        root = FailureRecord.from_dict(result.root_cause) if result.root_cause else None
        self._put(job_id, JobFailures(
            root, tuple(FailureRecord.from_dict(f) for f in result.failure_history),
            known.vertex_names if known else {}, final=True,
            restored=known.restored if known else None,
            spark=(known.spark if known else ()) or result.spark,
            causes=known.causes if known else None))

    def show_job(self, job_id: str | None) -> None:
        """Show ``job_id``'s failures (the job chosen in the window)."""
        if job_id == self.job_id:
            return
        self.job_id = job_id
        self._shown_key = None
        self._refresh()

    def clear(self) -> None:
        self._jobs.clear()
        self.job_id = None
        self._shown_key = None
        self.tree.clear()
        self._show_chain(None)
        self.detail.clear()
        self.log_button.setEnabled(False)
        self.reproduce_button.setEnabled(False)
        self.title.setText("Select a job to see its failures.")
        self.restored.setVisible(False)

    # -- reading (tests, the window) ----------------------------------------------------------

    def failure_items(self) -> list[QTreeWidgetItem]:
        """The root cause's item first (if any), then the history's, in order."""
        items = []
        for top in range(self.tree.topLevelItemCount()):
            group = self.tree.topLevelItem(top)
            items += [group.child(i) for i in range(group.childCount())]
        return items

    # -- drawing ------------------------------------------------------------------------------

    def _put(self, job_id: str, failures: JobFailures) -> None:
        self._jobs[job_id] = failures
        if job_id == self.job_id and self.on_screen and self.isVisible():
            self._refresh()

    def set_on_screen(self, on_screen: bool) -> None:
        """The dock's tab came to the top (True) or went behind another (False)."""
        self.on_screen = on_screen
        if on_screen:
            self._refresh()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._refresh()

    def _refresh(self) -> None:
        failures = self._jobs.get(self.job_id or "")
        if failures is None:
            self.tree.clear()
            self._show_chain(None)
            self.detail.clear()
            self.log_button.setEnabled(False)
            self.reproduce_button.setEnabled(False)
            self.title.setText("Select a job to see its failures." if self.job_id is None
                               else NO_FAILURES)
            self.restored.setVisible(False)
            return
        if failures.key == self._shown_key:
            return
        selected = self._selected_attempt()
        self._shown_key = failures.key
        self._show_chain(failures)
        count = len(failures.history)
        self.title.setText(f"{count} failure{'s' if count != 1 else ''} in job {self.job_id}"
                           if count else NO_FAILURES)
        if failures.restored is not None:
            self.restored.setText(f"The job resumed after a failover: "
                                  f"{restored_text(failures.restored)}")
        self.restored.setVisible(failures.restored is not None)
        self.tree.blockSignals(True)
        self.tree.clear()
        bold = QFont()
        bold.setBold(True)
        if failures.root_cause:
            group = QTreeWidgetItem(["Root cause"])
            group.setFont(0, bold)
            self.tree.addTopLevelItem(group)
            group.setFirstColumnSpanned(True)
            group.addChild(self._item(failures.root_cause, failures, root=True))
        if failures.history:
            history = sorted(failures.history, key=lambda f: f.timestamp)
            left_out = max(0, len(history) - HISTORY_SHOWN)
            group = QTreeWidgetItem([f"History ({count}, oldest first"
                                     + (f"; the first {left_out} not listed)" if left_out
                                        else ")")])
            group.setFont(0, bold)
            self.tree.addTopLevelItem(group)
            group.setFirstColumnSpanned(True)
            group.addChildren([self._item(failure, failures)
                               for failure in history[left_out:]])
        self.tree.expandAll()
        self.tree.blockSignals(False)
        items = self.failure_items()
        again = next((item for item in items
                      if item.data(0, FAILURE_ROLE)[0].attempt_id == selected), None)
        if items:
            self.tree.blockSignals(True)
            self.tree.setCurrentItem(again or items[0])
            self.tree.blockSignals(False)
            self._show(again or items[0])
        else:
            self.detail.clear()
            self.log_button.setEnabled(False)
            self.reproduce_button.setEnabled(False)

    def _item(self, failure: FailureRecord, failures: JobFailures,
              root: bool = False) -> QTreeWidgetItem:
        slot = failure.slot_index
        vertex_id = failure.vertex_id
        item = QTreeWidgetItem([
            f"{failure.exception_type}: {failure.message}",
            f"#{failure.subtask} {failures.vertex_names.get(vertex_id, vertex_id)}",
            attempt_number(failure),
            f"{failure.taskmanager_id or '?'}" + (f" / {slot}" if slot is not None else ""),
            clock_millis(failure.timestamp)])
        item.setData(0, FAILURE_ROLE, (failure, root))
        item.setToolTip(0, failure.message)
        if root:
            item.setForeground(0, QBrush(QColor(USER_COLOUR)))
        return item

    def _show_chain(self, failures: JobFailures | None) -> None:
        chain = failures.causes if failures is not None else None
        self.causes.set_chain(chain, failures.vertex_names if failures is not None else {})
        self.chain.expandAll()
        roots = len(chain.roots()) if chain is not None else 0
        self.chain_title.setText(
            NO_CHAIN if chain is None else
            f"Chain of causes: {roots} root cause{'s' if roots != 1 else ''}, "
            f"{len(chain.events)} events linked by cause, each with its evidence")

    def _on_chain_clicked(self, index: QModelIndex) -> None:
        """An attempt's failure in the chain: the same failure selected below."""
        event = index.siblingAtColumn(0).data(EVENT_ROLE)
        if event is None or not event.attempt_id:
            return
        item = next((item for item in self.failure_items()
                     if item.data(0, FAILURE_ROLE)[0].attempt_id == event.attempt_id), None)
        if item is not None:
            self.tree.setCurrentItem(item)

    def _selected_attempt(self) -> str | None:
        item = self.tree.currentItem()
        data = item.data(0, FAILURE_ROLE) if item is not None else None
        return data[0].attempt_id if data else None

    def _show(self, item: QTreeWidgetItem) -> None:
        data = item.data(0, FAILURE_ROLE)
        self.log_button.setEnabled(bool(data))
        self.reproduce_button.setEnabled(bool(data) and data[0].attempt >= 0)
        if not data:
            return
        failure, root = data
        failures = self._jobs.get(self.job_id or "")
        self.detail.setHtml(failure_html(
            failure, root_cause=root, job_id=self.job_id or "",
            job_file=self.job_files.get(self.job_id or ""),
            vertex_names=failures.vertex_names if failures else None,
            spark=failures.spark_of(failure.attempt_id) if failures else None))

    def _on_current(self, current: QTreeWidgetItem | None, _previous: Any) -> None:
        """The user moved to another failure (programmatic moves block the signal)."""
        if current is not None:
            self._show(current)
            self._on_clicked(current, 0)

    def _on_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        data = item.data(0, FAILURE_ROLE)
        if data:
            failure = data[0]
            self.failure_selected.emit(failure.vertex_id, failure.subtask)

    def _want_logs(self) -> None:
        item = self.tree.currentItem()
        data = item.data(0, FAILURE_ROLE) if item is not None else None
        if data:
            failure = data[0]
            self.logs_wanted.emit(failure.attempt_id, failure.taskmanager_id or "")

    def _want_reproduction(self) -> None:
        item = self.tree.currentItem()
        data = item.data(0, FAILURE_ROLE) if item is not None else None
        if data and self.job_id:
            failure = data[0]
            self.reproduce_wanted.emit(self.job_id, failure.vertex_id, failure.subtask,
                                       failure.attempt)
