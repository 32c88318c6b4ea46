"""The chain of causes' model: one job's failover events as a tree, each with its evidence.

The JobMaster links the events (core/executiongraph/causes.py) and its snapshot carries
them (``JobGraphSnapshot.causes``, core/protocol/causes.py), live and in a recording
alike. Each event is a row whose children are first its evidence (the message that
brought it, the log lines of the processes involved), then the events it caused. A chain
that breaks its bounds or links is refused with one row saying why, never drawn half.
Rebuilt whole when the chain changes (it holds at most a few dozen events); GUI thread
only.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QStandardItem, QStandardItemModel

from clusterdeck.core.protocol.causes import (
    CauseChain,
    CauseEvent,
    CauseKind,
    check_cause_chain,
)
from clusterdeck.gui.models.formatting import clock_millis

COLUMNS = ("Event", "Where", "When")
EVENT_ROLE = Qt.ItemDataRole.UserRole + 1
"""An event row's ``CauseEvent``; None on an evidence row."""
EVIDENCE_COLOUR = QColor("#6b6b6b")
ROOT_COLOUR = QColor("#b03a36")

KIND_WORDS = {CauseKind.TASKMANAGER_LOST: "TaskManager lost",
              CauseKind.ATTEMPT_FAILED: "Attempt failed",
              CauseKind.REGION_RESTARTED: "Region restarted",
              CauseKind.JOB_RESTARTED: "Job restarted",
              CauseKind.CHECKPOINT_ABORTED: "Checkpoint aborted",
              CauseKind.RESTORED: "Restored",
              CauseKind.JOB_FAILED: "Job failed",
              CauseKind.TASKMANAGER_BLOCKED: "TaskManager blocked",
              CauseKind.JOB_RESCALED: "Job rescaled"}
NO_CHAIN = "No failover yet: nothing to link."


class CauseChainModel(QStandardItemModel):
    def __init__(self) -> None:
        super().__init__()
        self.setHorizontalHeaderLabels(COLUMNS)
        self.chain: CauseChain | None = None

    def set_chain(self, chain: CauseChain | None, vertex_names: dict[str, str]) -> None:
        """Show ``chain`` (None: the job had no failover), roots oldest first."""
        self.chain = chain
        self.removeRows(0, self.rowCount())
        if chain is None:
            return
        try:
            check_cause_chain(chain)
        except ValueError as error:
            self.appendRow(_evidence(f"The chain of causes was refused: {error}"))
            return
        if chain.dropped:
            self.appendRow(_evidence(f"{chain.dropped} older event(s) left out to keep the "
                                     "chain bounded"))
        for root in chain.roots():
            self.appendRow(self._rows(chain, root, vertex_names, root=True))

    def event_rows(self) -> list[tuple[int, str]]:
        """(depth, event text) of every event row, depth first: for tests and the view."""
        found: list[tuple[int, str]] = []

        def walk(parent: QStandardItem, depth: int) -> None:
            for row in range(parent.rowCount()):
                item = parent.child(row, 0)
                if item.data(EVENT_ROLE) is not None:
                    found.append((depth, item.text()))
                    walk(item, depth + 1)
        walk(self.invisibleRootItem(), 0)
        return found

    def _rows(self, chain: CauseChain, event: CauseEvent, names: dict[str, str],
              root: bool = False) -> list[QStandardItem]:
        more = f" (and {event.more} more like it)" if event.more else ""
        first = QStandardItem(f"{KIND_WORDS[event.kind]}: {event.summary}{more}")
        first.setData(event, EVENT_ROLE)
        first.setToolTip(event.summary)
        first.setEditable(False)
        if root:
            bold = QFont()
            bold.setBold(True)
            first.setFont(bold)
            first.setForeground(QBrush(ROOT_COLOUR))
        carried = event.carried_by
        if carried is not None:
            first.appendRow(_evidence(f"message {carried.type} from {carried.sender}",
                                      clock_millis(carried.at)))
        else:
            first.appendRow(_evidence("decided by the JobMaster, no message"))
        for line in event.log_lines:
            first.appendRow(_evidence(f"log {line.process}: {line.line}",
                                      clock_millis(line.at) if line.at else ""))
        for child in chain.children(event.id):
            first.appendRow(self._rows(chain, child, names))
        return [first, _plain(_where(event, names)), _plain(clock_millis(event.at))]


def _where(event: CauseEvent, names: dict[str, str]) -> str:
    if event.attempt_id or event.subtask >= 0:
        vertex = names.get(event.vertex_id, event.vertex_id)
        place = f"#{event.subtask} {vertex}"
        return f"{place} on {event.taskmanager_id}" if event.taskmanager_id else place
    if event.taskmanager_id:
        return event.taskmanager_id
    return f"checkpoint {event.checkpoint_id}" if event.checkpoint_id else ""


def _plain(text: str) -> QStandardItem:
    item = QStandardItem(text)
    item.setEditable(False)
    return item


def _evidence(text: str, when: str = "") -> list[QStandardItem]:
    first = _plain(text)
    first.setToolTip(text)
    first.setForeground(QBrush(EVIDENCE_COLOUR))
    italic = QFont()
    italic.setItalic(True)
    first.setFont(italic)
    return [first, _plain(""), _plain(when)]
