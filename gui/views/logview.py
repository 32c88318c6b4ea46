"""A live tail of one process's log file.

The supervisor writes each process's stdout and stderr to a log file; this widget shows
its end and follows it. Reading a few new kilobytes of a local file is cheap, so it is
done on the GUI thread from a QTimer (every 250 ms), never per line. A rotated or
truncated file (smaller than what was read) is read again from its start.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

_INITIAL_BYTES = 64 * 1024
_MAX_READ = 256 * 1024
_MAX_LINES = 5000


class LogTail(QWidget):
    """Shows the end of ``path`` and appends what is written to it."""

    def __init__(self, path: Path, parent: QWidget | None = None,
                 interval_ms: int = 250) -> None:
        super().__init__(parent)
        self.path = Path(path)
        self._offset = 0
        self._text = QPlainTextEdit(self)
        self._text.setReadOnly(True)
        self._text.setMaximumBlockCount(_MAX_LINES)
        self._text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self._text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._follow = QCheckBox("Follow", self)
        self._follow.setChecked(True)
        header = QHBoxLayout()
        header.addWidget(QLabel(str(self.path), self), 1)
        header.addWidget(self._follow)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(header)
        layout.addWidget(self._text)
        self._start_near_end()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.poll)
        self._timer.start(interval_ms)

    def text(self) -> str:
        return self._text.toPlainText()

    def _start_near_end(self) -> None:
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        self._offset = max(0, size - _INITIAL_BYTES)
        self.poll()

    def poll(self) -> None:
        """Append what was written since the last poll (GUI thread, timer)."""
        try:
            size = self.path.stat().st_size
            if size < self._offset:
                self._offset = 0
            if size == self._offset:
                return
            with self.path.open("rb") as file:
                file.seek(self._offset)
                data = file.read(_MAX_READ)
        except OSError:
            return
        cut = data.rfind(b"\n") + 1  # only whole lines; the rest comes with the next poll
        if cut == 0 and len(data) < _MAX_READ:
            return
        chunk = data[:cut] if cut else data
        self._offset += len(chunk)
        self._append(chunk.decode("utf-8", errors="replace").rstrip("\n"))

    def _append(self, text: str) -> None:
        bar = self._text.verticalScrollBar()
        self._text.appendPlainText(text)
        if self._follow.isChecked():
            self._text.moveCursor(QTextCursor.MoveOperation.End)
            bar.setValue(bar.maximum())
