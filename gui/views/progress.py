"""Progress as ``finished / total`` subtasks, drawn by the style like a QProgressBar.

QProgressBar repaints itself synchronously on every ``setValue`` that changes its text,
which for a job that finishes subtasks many times a second is a full repaint per snapshot
on the GUI thread. ``ProgressStrip`` draws the same bar and only schedules an update;
``draw_progress`` is shared with the job list's delegate. GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionProgressBar, QWidget


def draw_progress(painter: QPainter, rect: QRect, finished: int, total: int, text: str,
                  widget: QWidget | None, state: QStyle.StateFlag | None = None) -> None:
    bar = QStyleOptionProgressBar()
    bar.rect = QRect(rect)
    bar.minimum = 0
    bar.maximum = max(1, int(total))
    bar.progress = max(0, min(int(finished), bar.maximum))
    bar.text = text
    bar.textVisible = bool(text)
    bar.textAlignment = Qt.AlignmentFlag.AlignCenter
    flags = QStyle.StateFlag.State_Enabled | QStyle.StateFlag.State_Horizontal
    bar.state = flags if state is None else state | QStyle.StateFlag.State_Horizontal
    if widget is not None:
        bar.palette = widget.palette()
        bar.fontMetrics = widget.fontMetrics()
    style = widget.style() if widget is not None else QApplication.style()
    style.drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter, widget)


class ProgressStrip(QWidget):
    """A progress bar for ``finished`` of ``total`` subtasks that repaints lazily."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._finished = 0
        self._total = 0
        self._text = ""

    def set_progress(self, finished: int, total: int, text: str | None = None) -> None:
        text = f"{finished} / {total} subtasks finished" if text is None else text
        if (finished, total, text) != (self._finished, self._total, self._text):
            self._finished, self._total, self._text = finished, total, text
            self.update()

    def clear(self) -> None:
        self.set_progress(0, 0, "")

    def value(self) -> int:
        return self._finished

    def maximum(self) -> int:
        return max(1, self._total)

    def text(self) -> str:
        return self._text

    def sizeHint(self) -> QSize:
        return QSize(200, max(20, self.fontMetrics().height() + 6))

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        draw_progress(painter, self.rect(), self._finished, self._total, self._text, self)
