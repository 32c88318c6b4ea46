"""The Logs view: every process's log as one, from the cluster's flight recording (the
live one, a quarter of a second behind, or a recording opened offline), filtered by
process, level and text. Searches run on the window's worker thread; GUI thread only
otherwise."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.recorder.logsearch import LEVELS, log_row, processes, search
from clusterdeck.core.recorder.store import LogLine, connect

ALL = "all processes"
ANY_LEVEL = "any level"
SHOWN = 2000  # lines shown per search
PROCESS_WIDTH = 14  # fixed, so that lines keep their columns as later searches add some
REFRESH_MS = 2000  # how often a live cluster's search runs again while "Follow" is on

Runner = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]],
                  None]


# An attempt id in a log line: <job-id>/<vertex-id>#<subtask>/[e<epoch>]a<attempt>
ATTEMPT_IN_LINE = re.compile(r"\b([0-9a-f]{8,32})/([\w.-]+)#(\d+)/(?:e\d+)?a\d+\b")


def subtask_in(line: str) -> tuple[str, str, int] | None:
    """(job id, vertex id, subtask) of the first attempt a log line names."""
    match = ATTEMPT_IN_LINE.search(line)
    return (match.group(1), match.group(2), int(match.group(3))) if match else None


class LogSearchView(QWidget):
    subtask_named = Signal(str, str, int)
    """``(job_id, vertex_id, subtask)`` of the attempt named in a double-clicked line."""

    def __init__(self, run: Runner, parent: QWidget | None = None) -> None:
        """``run(work, done, failed)``: ``work`` on a worker thread, the outcome on the GUI
        thread (the window's JobWorker)."""
        super().__init__(parent)
        self._run = run
        self.path: Path | None = None
        self.lines: list[LogLine] = []
        self._busy = False
        self._again = False  # filters changed while a search ran: search once more
        self.process = QComboBox(self)
        self.process.addItem(ALL)
        self.level = QComboBox(self)
        self.level.addItems([ANY_LEVEL, *LEVELS])
        self.text = QLineEdit(self)
        self.text.setPlaceholderText("text: a job id, an attempt, an exception")
        self.follow = QCheckBox("Follow", self)
        self.follow.setChecked(True)
        search_button = QPushButton("Search", self)
        self.status = QLabel("no recording", self)
        self.output = QPlainTextEdit(self)
        self.output.setReadOnly(True)
        self.output.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.output.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        bar = QHBoxLayout()
        for widget in (self.process, self.level):
            bar.addWidget(widget)
        bar.addWidget(self.text, 1)
        for widget in (search_button, self.follow, self.status):
            bar.addWidget(widget)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(bar)
        layout.addWidget(self.output, 1)
        search_button.clicked.connect(self.search)
        self.text.returnPressed.connect(self.search)
        self.process.currentIndexChanged.connect(lambda _: self.search())
        self.level.currentIndexChanged.connect(lambda _: self.search())
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._refresh)
        self.output.viewport().installEventFilter(self)
        self.output.setToolTip("Double-click a line that names an attempt to find its "
                               "subtask in the ExecutionGraph")

    def show_lines_of(self, text: str) -> None:
        """Every process's lines that name ``text`` (an attempt id): the TaskManager's where
        it ran, the JobManager's that scheduled and failed it."""
        self.follow.setChecked(False)
        self.process.setCurrentIndex(0)
        self.level.setCurrentIndex(0)
        self.text.setText(text)
        self.search()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.output.viewport() and \
                event.type() == QEvent.Type.MouseButtonDblClick:
            cursor = self.output.cursorForPosition(event.position().toPoint())
            found = subtask_in(cursor.block().text())
            if found is not None:
                self.subtask_named.emit(*found)
                return True
        return super().eventFilter(watched, event)

    def show_recording(self, path: Path | None, live: bool) -> None:
        """Search ``path`` (None: nothing to search); ``live``: it is still being written."""
        self.path = path
        self.output.clear()
        self.lines = []
        self._again = self._busy  # a search of the previous recording may still run
        if live:
            self._timer.start(REFRESH_MS)
        else:
            self._timer.stop()
        self.status.setText("no recording" if path is None else "")
        self.search()

    def search(self) -> None:
        path = self.path
        if path is None:
            return
        if self._busy:
            self._again = True
            return
        self._busy = True
        process = self.process.currentText()
        level = self.level.currentText()
        query = {"processes": [] if process == ALL else [process], "text": self.text.text(),
                 "level": None if level == ANY_LEVEL else level, "limit": SHOWN}
        self._run(lambda: _read(path, query), self._found, self._failed)

    def _refresh(self) -> None:
        if self.follow.isChecked() and self.isVisible():
            self.search()

    def _found(self, outcome: tuple[list[str], list[LogLine]]) -> None:
        self._busy = False
        if self._again:  # what was found answers filters that changed since
            self._again = False
            self.search()
            return
        names, lines = outcome
        self._offer_processes(names)
        if lines == self.lines:
            return
        self.lines = lines
        self.output.setPlainText("\n".join(log_row(x, PROCESS_WIDTH) for x in lines))
        self.status.setText(f"{len(lines):,} lines" + (" (the first shown)"
                                                        if len(lines) >= SHOWN else ""))
        if self.follow.isChecked():
            self.output.verticalScrollBar().setValue(self.output.verticalScrollBar().maximum())

    def _failed(self, error: BaseException) -> None:
        self._busy = False
        if self._again:
            self._again = False
            self.search()
            return
        self.status.setText(f"cannot read the recording: {error}")

    def _offer_processes(self, names: list[str]) -> None:
        known = {self.process.itemText(i) for i in range(self.process.count())}
        for name in names:
            if name not in known:
                self.process.addItem(name)


def _read(path: Path, query: dict[str, Any]) -> tuple[list[str], list[LogLine]]:
    """The worker thread: the processes known and the lines found."""
    with closing(connect(path, readonly=True)) as db:
        return processes(db), search(db, **query)

