"""The checkpoints table's model: the selected streaming job's checkpoints, newest first.

Each job's snapshot carries its checkpoint summary (``JobGraphSnapshot.checkpoints``: the
counts, the latest completed checkpoint, the one the job was restored from and the newest
checkpoints, see core/protocol/checkpointstats.py); a batch job's carries none. The model
keeps the latest summary of every job it heard of and shows the one of the job chosen in
the window: one row per checkpoint, and for the line above the table ``summary()`` and,
when there are no rows, ``empty_text()`` saying why. A new checkpoint is inserted at the
top and the oldest removed at the bottom rather than the table reset, so a selected row
stays selected while the job runs. Fed by the bridge's signals; GUI thread only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont

from clusterdeck.core.protocol.checkpointstats import (
    CheckpointStats,
    CheckpointStatsSnapshot,
    CheckpointStatus,
    RestoredCheckpointStats,
)
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, Truncation
from clusterdeck.gui.models.formatting import NONE, clock, format_bytes, format_duration
from clusterdeck.gui.models.tablemodel import FixedColumnsModel, Index

COLUMNS = ("ID", "Type", "Status", "Triggered", "Duration", "Size", "Acknowledged",
           "Alignment", "Details")
STATS_ROLE = Qt.ItemDataRole.UserRole + 1
"""The row's ``CheckpointStats``."""

STATUS_WORDS = {CheckpointStatus.COMPLETED: "completed", CheckpointStatus.FAILED: "FAILED",
                CheckpointStatus.IN_PROGRESS: "in progress",
                CheckpointStatus.ABORTED: "aborted"}
STATUS_COLOURS = {CheckpointStatus.COMPLETED: QColor("#3fa34d"),
                  CheckpointStatus.FAILED: QColor("#d64541"),
                  CheckpointStatus.IN_PROGRESS: QColor("#2f6fd6"),
                  CheckpointStatus.ABORTED: QColor("#7f7f7f")}
FAILED_ROW = QColor("#f9dedc")
"""Background of a failed checkpoint's row."""
_RIGHT = ("ID", "Duration", "Size", "Acknowledged", "Alignment")

NO_JOB = "Select a job to see its checkpoints."
BATCH_JOB = ("No checkpoints: this is a batch job. Only streaming jobs take checkpoints "
             "(docs/streaming.md).")
NO_SUMMARY = ("This job's snapshot carries no checkpoints (its JobManager is older than "
              "the checkpoints view).")
NONE_YET = ("No checkpoint yet: the first is triggered an interval after every task of "
            "the job runs.")
HISTORY_LEFT_OUT = ("The checkpoint history was left out of this job's snapshot to fit "
                    "rpc.framesize; the counts above are complete.")


def restored_text(restored: RestoredCheckpointStats) -> str:
    """``restored from checkpoint 7 (12:03:41)``: the checkpoint and when it was restored."""
    return f"restored from checkpoint {restored.checkpoint_id} ({clock(restored.restored)})"


def summary_text(stats: CheckpointStatsSnapshot) -> str:
    """The line above the table: counts, the latest completed checkpoint, the restore."""
    parts = [f"Completed {stats.completed} \u00b7 failed {stats.failed} \u00b7 aborted "
             f"{stats.aborted} \u00b7 in progress {stats.in_progress}"]
    latest = stats.latest
    if latest is not None:
        ended = latest.ended
        parts.append(f"latest: checkpoint {latest.checkpoint_id}"
                     + (f" at {clock(ended)}" if ended is not None else "")
                     + f", {format_duration(latest.duration)}, {format_bytes(latest.size)}")
    else:
        parts.append("none completed yet")
    if stats.restored is not None:
        parts.append(restored_text(stats.restored))
    return " \u2014 ".join(parts)


@dataclass(frozen=True)
class JobCheckpoints:
    """What one job's latest snapshot said of its checkpoints."""

    streaming: bool
    stats: CheckpointStatsSnapshot | None
    history_left_out: bool


class CheckpointsModel(FixedColumnsModel):
    """One row per checkpoint of the chosen job, newest first."""

    column_titles = COLUMNS
    summary_changed = Signal()
    """The chosen job or its summary changed (after the rows did): redraw the summary."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._jobs: dict[str, JobCheckpoints] = {}
        self.job_id: str | None = None
        self._rows: list[CheckpointStats] = []
        self._savepoints: dict[str, str] = {}
        """Job id -> what came of the latest savepoint or stop of it asked for here."""

    # -- feeding (GUI thread, from the bridge and the window) ---------------------------------

    def set_snapshot(self, job_id: str, snapshot: JobGraphSnapshot) -> None:
        stats = snapshot.checkpoints
        job = JobCheckpoints(snapshot.kind is JobKind.STREAMING or stats is not None, stats,
                             snapshot.truncated is not Truncation.NONE and stats is not None
                             and not stats.history)
        if self._jobs.get(job_id) == job:
            return
        self._jobs[job_id] = job
        if job_id == self.job_id:
            self._show(job)

    def show_job(self, job_id: str | None) -> None:
        """Show ``job_id``'s checkpoints (the job chosen in the window)."""
        if job_id == self.job_id:
            return
        self.job_id = job_id
        self.beginResetModel()
        self._rows = []
        self.endResetModel()
        self._show(self._jobs.get(job_id or ""))

    def set_savepoint(self, job_id: str, line: str) -> None:
        """What came of the latest savepoint or stop of ``job_id`` asked for in this window
        (its folder, or why not): the summary's second line, to select and copy. Every
        savepoint, also one taken elsewhere (clusterdeck savepoint), is a row of its own."""
        self._savepoints[job_id] = line
        if job_id == self.job_id:
            self.summary_changed.emit()

    def clear(self) -> None:
        self._jobs.clear()
        self._savepoints.clear()
        self.job_id = None
        self.beginResetModel()
        self._rows = []
        self.endResetModel()
        self.summary_changed.emit()

    # -- reading (the view, tests) ------------------------------------------------------------

    def row_at(self, row: int) -> CheckpointStats | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def job(self) -> JobCheckpoints | None:
        return self._jobs.get(self.job_id or "")

    def summary(self) -> str:
        """The line above the table, then the latest savepoint asked for here; empty when
        the chosen job has neither."""
        job = self.job()
        lines = [summary_text(job.stats)] if job is not None and job.stats is not None else []
        if self.job_id in self._savepoints:
            lines.append(self._savepoints[self.job_id])
        return "\n".join(lines)

    def empty_text(self) -> str:
        """Why the table is empty; empty when it has rows."""
        if self._rows:
            return ""
        job = self.job()
        if job is None:
            return NO_JOB
        if not job.streaming:
            return BATCH_JOB
        if job.stats is None:
            return NO_SUMMARY
        return HISTORY_LEFT_OUT if job.history_left_out else NONE_YET

    # -- rows ---------------------------------------------------------------------------------

    def _show(self, job: JobCheckpoints | None) -> None:
        rows = list(job.stats.history) if job is not None and job.stats is not None else []
        self._update_rows(rows)
        self.summary_changed.emit()

    def _update_rows(self, rows: list[CheckpointStats]) -> None:
        """Newer checkpoints come in at the top and the oldest leave at the bottom: only
        those rows are inserted and removed; anything else resets the table."""
        old_ids = [r.checkpoint_id for r in self._rows]
        new_ids = [r.checkpoint_id for r in rows]
        if old_ids and new_ids and old_ids[0] in new_ids:
            added = new_ids.index(old_ids[0])
            kept = len(new_ids) - added
            if new_ids[added:] == old_ids[:kept]:
                if kept < len(old_ids):
                    self.beginRemoveRows(QModelIndex(), kept, len(old_ids) - 1)
                    del self._rows[kept:]
                    self.endRemoveRows()
                if added:
                    self.beginInsertRows(QModelIndex(), 0, added - 1)
                    self._rows[:0] = rows[:added]
                    self.endInsertRows()
                changed = [i for i in range(added, len(rows)) if self._rows[i] != rows[i]]
                self._rows = rows
                if changed:
                    self.dataChanged.emit(self.index(min(changed), 0),
                                          self.index(max(changed), len(COLUMNS) - 1))
                return
        self.beginResetModel()
        self._rows = rows
        self.endResetModel()

    # -- QAbstractTableModel ------------------------------------------------------------------

    def row_count(self) -> int:
        return len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        row = self.row_at(index.row())
        if row is None or not index.isValid():
            return None
        column = COLUMNS[index.column()]
        failed = row.status is CheckpointStatus.FAILED
        if role == Qt.ItemDataRole.DisplayRole:
            return cell_text(row, column)
        if role == STATS_ROLE:
            return row
        if role == Qt.ItemDataRole.BackgroundRole and failed:
            return QBrush(FAILED_ROW)
        if role == Qt.ItemDataRole.ForegroundRole and column == "Status":
            return QBrush(STATUS_COLOURS[row.status])
        if role == Qt.ItemDataRole.FontRole and (column == "Status" or
                                                 (failed and column == "Details")):
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and column in _RIGHT:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and (row.failure or row.path):
            return f"{type_text(row)} {row.checkpoint_id} {STATUS_WORDS[row.status]}: " \
                f"{details_text(row)}"
        return None


def cell_text(row: CheckpointStats, column: str) -> str:
    if column == "ID":
        return str(row.checkpoint_id)
    if column == "Type":
        return type_text(row)
    if column == "Status":
        return STATUS_WORDS[row.status]
    if column == "Triggered":
        return clock(row.triggered)
    if column == "Duration":
        return format_duration(row.duration)
    if column == "Size":
        return format_bytes(row.size) if row.status is not CheckpointStatus.IN_PROGRESS \
            or row.size else NONE
    if column == "Acknowledged":
        return f"{row.acknowledged}/{row.expected}" if row.expected else NONE
    if column == "Alignment":
        return format_duration(row.alignment)
    if column == "Details":
        return details_text(row)
    return ""


def type_text(row: CheckpointStats) -> str:
    """``checkpoint``, ``savepoint``, or either with ``(stop)`` when the job stopped at it."""
    kind = "savepoint" if row.savepoint else "checkpoint"
    return f"{kind} (stop)" if row.stop else kind


def details_text(row: CheckpointStats) -> str:
    """Why it failed or was aborted; a written savepoint's folder."""
    return row.failure or (f"written to {row.path}" if row.path else "")
