"""The replay bar under the ExecutionGraph: a time slider over the shown job's life.

The slider covers the job from its first recorded moment to its end (or to now while it
runs). At its right end the views are live; anywhere else they show the job as it was
then (gui/models/replay.py renders that). ``moved`` says which: a time, or None for live.
Dragging back to the end, or the Live button, returns to live. GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSlider, QWidget

from clusterdeck.gui.models.formatting import clock_tenths

STEPS = 1000


class ReplayBar(QWidget):
    """``set_span(start, end)`` as the job goes on; the user moves the slider."""

    moved = Signal(object)
    """The moment to show (seconds since the epoch), or None for live."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.start = self.end = 0.0
        self.moment: float | None = None
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, STEPS)
        self.slider.setValue(STEPS)
        self.slider.setPageStep(STEPS // 20)
        self.slider.setToolTip("Drag to replay the job: the graph and the slots show that "
                               "moment. The right end is live.")
        self.label = QLabel("live")
        self.label.setMinimumWidth(190)
        self.live = QPushButton("Live")
        self.live.setToolTip("Back to the present")
        self.live.setEnabled(False)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("Replay"))
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.label)
        layout.addWidget(self.live)
        self.slider.valueChanged.connect(self._on_value)
        self.live.clicked.connect(self.go_live)
        self.setEnabled(False)

    @property
    def replaying(self) -> bool:
        return self.moment is not None

    def set_span(self, start: float, end: float) -> None:
        """The job's life so far; a replayed moment stays where it is in time."""
        self.start, self.end = start, max(end, start)
        self.setEnabled(self.end > self.start)
        if self.moment is None:
            self._label()
            return
        self.slider.blockSignals(True)
        self.slider.setValue(self._value_of(self.moment))
        self.slider.blockSignals(False)
        self._label()

    def show_moment(self, t: float) -> None:
        """Move the slider to ``t`` (clamped to the span), as a user would."""
        value = self._value_of(t)
        if value == self.slider.value():
            self._on_value(value)
        else:
            self.slider.setValue(value)

    def go_live(self) -> None:
        if self.slider.value() == STEPS:
            self._on_value(STEPS)
        else:
            self.slider.setValue(STEPS)

    def reset(self) -> None:
        """A different job: live, nothing known."""
        self.slider.blockSignals(True)
        self.slider.setValue(STEPS)
        self.slider.blockSignals(False)
        self.moment = None
        self.start = self.end = 0.0
        self.live.setEnabled(False)
        self.setEnabled(False)
        self._label()

    def _value_of(self, t: float) -> int:
        span = self.end - self.start
        if span <= 0:
            return STEPS
        return max(0, min(STEPS, round((t - self.start) / span * STEPS)))

    def _on_value(self, value: int) -> None:
        self.moment = None if value >= STEPS else self.start + (self.end - self.start) * (
            value / STEPS)
        self.live.setEnabled(self.moment is not None)
        self._label()
        self.moved.emit(self.moment)

    def _label(self) -> None:
        if self.moment is None:
            self.label.setText("live")
            self.label.setStyleSheet("")
            return
        self.label.setText(f"{clock_tenths(self.moment)}  (+{self.moment - self.start:.1f} s)")
        self.label.setStyleSheet("color: #9b59b6; font-weight: bold;")
