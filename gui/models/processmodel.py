"""The process table's model: what the supervisor and the ClusterOverview say, one row per
process.

Rows come from two sources joined by name: the supervisor's ``ProcessInfo``s (when the
cluster is ours) and the overview's TaskManagers (whose ids are the supervisor's process
names). Attached to a cluster we do not supervise, the overview alone gives the rows: the
JobManager and every TaskManager. A JobManager's state says whether it leads (and at which
epoch) or stands by (docs/ha.md). Lives on the GUI thread; fed by the bridge's signals.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QFont

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.elastic import STOPPED_BY_DEMAND
from clusterdeck.core.supervisor import ProcessInfo, ProcessStatus
from clusterdeck.gui.models.formatting import format_bytes, format_uptime
from clusterdeck.gui.models.palette import PROCESS_STATE_COLOURS
from clusterdeck.gui.models.tablemodel import FixedColumnsModel, Index
from clusterdeck.gui.sampler import ResourceSample

_STATES = {ProcessStatus.STARTING: "starting", ProcessStatus.RUNNING: "running",
           ProcessStatus.RESTARTING: "restarting", ProcessStatus.FAILED: "crashed",
           ProcessStatus.STOPPED: "stopped"}

NONE = "\u2013"  # an en dash: the cell has no value
COLUMNS = ("Process", "State", "PID", "Uptime", "Restarts", "CPU %", "Memory", "Heartbeat")
"""Heartbeat: a TaskManager's heartbeat age as the JobManager sees it, or ``lost``. The
role is in the tooltip: the process names say it already."""


@dataclass(frozen=True)
class ProcessRow:
    """One row as shown; ``supervised`` rows can be restarted, the others only killed."""

    name: str
    role: str
    state: str
    pid: int | None = None
    started_at: float | None = None
    restarts: int = 0
    last_exit_code: int | None = None
    log_path: Path | None = None
    supervised: bool = False
    host: str = ""
    registration: str = ""
    heartbeat_age: float | None = None
    lost_cause: str = ""
    cpu_percent: float | None = None
    memory_bytes: int | None = None
    leadership: str = ""  # a JobManager's: "leader, epoch N" or "standby"
    leader_cause: str = ""
    demand: str = ""  # a TaskManager's part in the active ResourceManager's demand


def process_state(info: ProcessInfo) -> str:
    """The table's word for a supervisor status (FAILED: it crashed too often)."""
    return _STATES[info.status]


class ProcessTableModel(FixedColumnsModel):
    """Rows in the supervisor's order, then TaskManagers only the overview knows."""

    column_titles = COLUMNS

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._processes: dict[str, ProcessInfo] = {}
        self._overview: p.ClusterOverview | None = None
        self._resources: dict[int, ResourceSample] = {}
        self._rows: list[ProcessRow] = []

    # -- feeding (GUI thread, from the bridge) ------------------------------------------------

    def update_processes(self, infos: list[ProcessInfo]) -> None:
        for info in infos:
            self._processes[info.name] = info
        self._rebuild()

    def set_overview(self, overview: p.ClusterOverview | None) -> None:
        self._overview = overview
        self._rebuild()

    def set_resources(self, samples: dict[int, ResourceSample]) -> None:
        self._resources = samples
        self._rebuild()

    def clear(self) -> None:
        self._processes.clear()
        self._overview = None
        self._resources = {}
        self._rebuild()

    def refresh_uptime(self) -> None:
        """Uptime moves with the clock, not with events: the view calls this each second."""
        if self._rows:
            column = COLUMNS.index("Uptime")
            self.dataChanged.emit(self.index(0, column), self.index(len(self._rows) - 1, column))

    # -- reading ------------------------------------------------------------------------------

    def rows(self) -> list[ProcessRow]:
        return list(self._rows)

    def row_named(self, name: str) -> ProcessRow | None:
        return next((row for row in self._rows if row.name == name), None)

    def row_at(self, index: int) -> ProcessRow | None:
        return self._rows[index] if 0 <= index < len(self._rows) else None

    # -- building rows ------------------------------------------------------------------------

    def _rebuild(self) -> None:
        rows = self._build_rows()
        if [row.name for row in rows] != [row.name for row in self._rows]:
            self.beginResetModel()
            self._rows = rows
            self.endResetModel()
            return
        changed = [i for i, (old, new) in enumerate(zip(self._rows, rows, strict=True))
                   if old != new]
        self._rows = rows
        if changed:
            self.dataChanged.emit(self.index(min(changed), 0),
                                  self.index(max(changed), len(COLUMNS) - 1))

    def _build_rows(self) -> list[ProcessRow]:
        taskmanagers = {tm.id: tm for tm in self._overview.taskmanagers} if self._overview else {}
        rows = [self._supervised_row(info, taskmanagers.pop(info.name, None))
                for info in self._processes.values()]
        if not self._processes and self._overview is not None:
            rows.append(ProcessRow("jobmanager", "jobmanager", "running",
                                   pid=self._overview.jobmanager_pid))
            rows += [ProcessRow(f"jobmanager ({standby})", "jobmanager", "running")
                     for standby in self._overview.standbys]
        rows = [self._with_demand(self._with_leadership(row)) for row in rows]
        rows += [self._with_demand(self._taskmanager_row(tm))
                 for tm in sorted(taskmanagers.values(), key=_by_id)]
        return [self._with_resources(row) for row in rows]

    def _supervised_row(self, info: ProcessInfo, tm: p.TaskManagerInfo | None) -> ProcessRow:
        row = ProcessRow(info.name, info.role, process_state(info), pid=info.pid,
                         started_at=info.started_at if info.pid else None,
                         restarts=info.restarts, last_exit_code=info.last_exit_code,
                         log_path=info.log_path, supervised=True)
        if tm is None:
            return row
        return replace(row, host=tm.host, registration=tm.state.value,
                       heartbeat_age=tm.heartbeat_age_s, lost_cause=tm.lost_cause)

    def _taskmanager_row(self, tm: p.TaskManagerInfo) -> ProcessRow:
        live = tm.state is p.TaskManagerState.REGISTERED
        return ProcessRow(tm.id, "taskmanager", "running" if live else "lost",
                          pid=tm.pid if live else None,
                          started_at=tm.registered_at if live else None, host=tm.host,
                          registration=tm.state.value, heartbeat_age=tm.heartbeat_age_s,
                          lost_cause=tm.lost_cause,
                          cpu_percent=tm.cpu_percent if live else None,
                          memory_bytes=tm.memory_bytes if live else None)

    def _with_leadership(self, row: ProcessRow) -> ProcessRow:
        """The overview names the leader by its pid and the standbys as ``pid N on host H``
        (a standby attached to only through the overview has its identity in its name)."""
        overview = self._overview
        if row.role != "jobmanager" or overview is None or row.state != "running":
            return row
        if overview.leader_epoch == 0 and not overview.standbys:
            return row  # ha.mode none: one JobManager, nothing to lead over
        if row.pid and row.pid == overview.jobmanager_pid:
            return replace(row, leadership=f"leader, epoch {overview.leader_epoch}",
                           leader_cause=overview.leader_cause)
        if any(row.name.endswith(f"({standby})") or (
                row.pid and standby.startswith(f"pid {row.pid} on host "))
                for standby in overview.standbys):
            return replace(row, leadership="standby")
        return row

    def _with_demand(self, row: ProcessRow) -> ProcessRow:
        if self._overview is None or row.role != "taskmanager":
            return row
        return replace(row, demand=demand_word(self._overview, row.name, row.lost_cause))

    def _with_resources(self, row: ProcessRow) -> ProcessRow:
        sample = self._resources.get(row.pid) if row.pid else None
        if sample is None:
            return row
        return replace(row, cpu_percent=sample.cpu_percent, memory_bytes=sample.memory_bytes)

    # -- QAbstractTableModel ------------------------------------------------------------------

    def row_count(self) -> int:
        return len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        row = self.row_at(index.row())
        if row is None:
            return None
        column = COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(row, column)
        if role == Qt.ItemDataRole.ForegroundRole and column in ("State", "Heartbeat"):
            word = row.state if column == "State" else row.registration
            colour = PROCESS_STATE_COLOURS.get(word)
            return QBrush(colour) if colour is not None else None
        if role == Qt.ItemDataRole.FontRole and column == "State":
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (
                "PID", "Uptime", "Restarts", "CPU %", "Memory", "Heartbeat"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(row)
        return None

    def _text(self, row: ProcessRow, column: str) -> str:
        if column == "Process":
            return row.name
        if column == "State":
            detail = row.leadership or row.demand
            return f"{row.state} ({detail})" if detail else row.state
        if column == "PID":
            return str(row.pid) if row.pid else NONE
        if column == "Uptime":
            if row.started_at is None or row.state != "running":
                return NONE
            return format_uptime(time.time() - row.started_at)
        if column == "Restarts":
            return str(row.restarts) if row.supervised else NONE
        if column == "CPU %":
            return NONE if row.cpu_percent is None else f"{row.cpu_percent:.1f}"
        if column == "Memory":
            return NONE if row.memory_bytes is None else format_bytes(row.memory_bytes)
        if column == "Heartbeat":
            if row.registration == p.TaskManagerState.LOST.value:
                return "lost"
            return NONE if row.heartbeat_age is None else f"{row.heartbeat_age:.1f} s ago"
        return ""

    def _tooltip(self, row: ProcessRow) -> str:
        lines = [f"{row.name} ({row.role}) — {row.state}"]
        if row.host:
            lines.append(f"host {row.host}")
        if row.last_exit_code is not None:
            lines.append(f"last exit code {row.last_exit_code}"
                         + (f" (signal {-row.last_exit_code})" if row.last_exit_code < 0 else ""))
        if row.lost_cause:
            lines.append(row.lost_cause)
        if row.leader_cause:
            lines.append(f"leading since: {row.leader_cause}")
        if row.log_path is not None:
            lines.append(f"log: {row.log_path}")
        return "\n".join(lines)


def demand_word(overview: p.ClusterOverview, name: str, lost_cause: str) -> str:
    """A TaskManager's part in the active ResourceManager's demand (docs/elastic.md):
    started or being stopped by it, or stopped as idle; "" for one started by hand."""
    demand = overview.elastic
    if demand is None:
        return ""
    if name in demand.stops:
        return "idle, stopping"
    if name in demand.starts or name in demand.started:
        return "on demand"
    return "idle" if STOPPED_BY_DEMAND in lost_cause else ""


def _by_id(tm: p.TaskManagerInfo) -> str:
    return tm.id
