"""The task timeline: one row per slot, one bar per attempt that ran in it.

A bar spans an attempt's time in its slot (from DEPLOYING to its end, or to now while it
runs), in its job's colour, red when it failed and grey when it was cancelled, so a
restart shows as a red bar followed by one of the same job on another slot. Rows are the
slots of the overview's TaskManagers, plus any slot an attempt names (a lost TaskManager).

pyqtgraph's recipe: one ``BarGraphItem`` created once and fed arrays; the arrays are
rebuilt by a timer (once a second) only when a snapshot arrived or a bar still grows,
and only while the timeline is on screen, never per message. During a replay a vertical
line marks the replayed moment and bars end there. GUI thread only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QTimer
from PySide6.QtGui import QBrush, QFontMetrics, QShowEvent
from PySide6.QtWidgets import QWidget

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.gui.models.formatting import clock
from clusterdeck.gui.models.palette import EXECUTION_STATE_COLOURS, job_colour
from clusterdeck.gui.models.processmodel import demand_word

MAX_BARS = 5000
"""The most recent bars drawn; older attempts leave the timeline."""
_MIN_SPAN = 30.0
_OWN_COLOUR = frozenset({ExecutionState.FAILED, ExecutionState.CANCELED})
"""Ended attempts drawn in their state's colour rather than their job's."""


@dataclass(frozen=True)
class SlotBar:
    taskmanager_id: str
    slot_index: int
    job_id: str
    job_name: str
    subtask_id: str
    attempt: int
    state: ExecutionState
    start: float
    end: float | None


def slot_bars(snapshots: Mapping[str, JobGraphSnapshot]) -> list[SlotBar]:
    """Every attempt that got a slot, of every job, oldest start first (the latest
    ``MAX_BARS``)."""
    bars = []
    for job_id, snapshot in snapshots.items():
        for vertex in snapshot.vertices:
            for subtask in vertex.subtasks:
                for attempt in subtask.attempts:
                    slot, start = attempt.slot, attempt.start_time
                    if slot is None or start is None:
                        continue
                    bars.append(SlotBar(slot.taskmanager_id, slot.slot_index, job_id,
                                        snapshot.name, subtask.id, attempt.attempt,
                                        attempt.state, start, attempt.end_time))
    bars.sort(key=lambda bar: bar.start)
    return bars[-MAX_BARS:]


class _SlotAxis(pg.AxisItem):
    """Row numbers as ``taskmanager / slot``, a TaskManager the active ResourceManager
    started or stopped marked so (``taskmanager-2 (on demand) / 0``)."""

    def __init__(self) -> None:
        super().__init__("left")
        self.rows: list[tuple[str, int]] = []
        self.marks: dict[str, str] = {}

    def row_label(self, taskmanager: str, slot: int) -> str:
        mark = self.marks.get(taskmanager)
        return f"{taskmanager} ({mark}) / {slot}" if mark else f"{taskmanager} / {slot}"

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[Any]:
        low, high = sorted((minVal, maxVal))  # an inverted axis gives them reversed
        return [(1.0, [float(i) for i in range(len(self.rows)) if low <= i <= high])]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        out = []
        for value in values:
            index = round(value)
            out.append(self.row_label(*self.rows[index]) if 0 <= index < len(self.rows) else "")
        return out


class SlotTimeline(pg.PlotWidget):
    """Feed it overviews and job snapshots; it redraws on its own timer."""

    def __init__(self, parent: QWidget | None = None, interval_ms: int = 1000) -> None:
        self._axis = _SlotAxis()
        super().__init__(parent, background="w",
                         axisItems={"left": self._axis,
                                    "bottom": pg.DateAxisItem(orientation="bottom")})
        self._slots: list[tuple[str, int]] = []
        self._snapshots: Mapping[str, JobGraphSnapshot] = {}
        self._bars: list[SlotBar] = []
        self._dirty = False
        self._relabel = False  # the rows' marks changed: the axis is sized again
        self._brushes: dict[tuple[str, bool], QBrush] = {}
        self.moment: float | None = None
        self.showGrid(x=True, y=False, alpha=0.25)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.setLabel("bottom", "time")
        self.getPlotItem().getViewBox().invertY(True)
        self._item = pg.BarGraphItem(x0=[], x1=[], y=[], height=0.7,
                                     pen=pg.mkPen("#33404f", width=0.6))
        self.addItem(self._item)
        self._cursor = pg.InfiniteLine(angle=90, movable=False,
                                       pen=pg.mkPen("#9b59b6", width=2))
        self._cursor.setVisible(False)
        self.addItem(self._cursor)
        self.scene().sigMouseMoved.connect(self._hover)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.refresh)
        self._timer.start(interval_ms)

    # -- inputs -------------------------------------------------------------------------------

    def set_overview(self, overview: p.ClusterOverview | None) -> None:
        slots = [] if overview is None else [
            (tm.id, index) for tm in sorted(overview.taskmanagers, key=lambda tm: tm.id)
            for index in range(tm.slots_total)]
        marks = {} if overview is None else {
            tm.id: mark for tm in overview.taskmanagers
            if (mark := demand_word(overview, tm.id, tm.lost_cause))}
        if slots != self._slots or marks != self._axis.marks:
            self._slots = slots
            self._relabel = self._relabel or marks != self._axis.marks
            self._axis.marks = marks
            self._dirty = True

    def set_jobs(self, snapshots: Mapping[str, JobGraphSnapshot]) -> None:
        self._snapshots = snapshots
        self._dirty = True

    def set_moment(self, moment: float | None) -> None:
        """Replay: mark ``moment`` and cut bars there; None: live."""
        self.moment = moment
        self._cursor.setVisible(moment is not None)
        if moment is not None:
            self._cursor.setValue(moment)
        self._dirty = True
        self.refresh()

    def clear_all(self) -> None:
        self._slots = []
        self._snapshots = {}
        self.set_moment(None)

    # -- drawing (timer) ----------------------------------------------------------------------

    def bars(self) -> list[SlotBar]:
        """The bars drawn at the last refresh."""
        return list(self._bars)

    def rows(self) -> list[tuple[str, int]]:
        return list(self._axis.rows)

    def refresh(self) -> None:
        """Timer: rebuild the arrays when something changed or a bar still grows; not while
        hidden (another tab is on top): ``showEvent`` catches up."""
        growing = self.moment is None and any(bar.end is None for bar in self._bars)
        if not (self._dirty or growing) or not self.isVisible():
            return
        self._dirty = False
        bars = slot_bars(self._snapshots)
        rows = list(self._slots)
        for bar in bars:
            if (bar.taskmanager_id, bar.slot_index) not in rows:
                rows.append((bar.taskmanager_id, bar.slot_index))
        rows.sort()
        now = self.moment if self.moment is not None else time.time()
        if self.moment is not None:
            bars = [bar for bar in bars if bar.start <= now]
        self._bars = bars
        if rows != self._axis.rows or self._relabel:
            self._relabel = False
            self._axis.rows = rows
            # pyqtgraph drops labels wider than the axis, and grows it only later (if at
            # all): size it for the longest label now.
            metrics = QFontMetrics(self._axis.style["tickFont"] or self.font())
            widest = max((metrics.horizontalAdvance(self._axis.row_label(tm, slot))
                          for tm, slot in rows), default=20)
            self._axis.setWidth(widest + 18)
        row_of = {row: index for index, row in enumerate(rows)}
        starts = np.array([bar.start for bar in bars], dtype=float)
        ends = np.array([min(bar.end, now) if bar.end is not None else now for bar in bars],
                        dtype=float)
        ys = np.array([row_of[(bar.taskmanager_id, bar.slot_index)] for bar in bars],
                      dtype=float)
        brushes = [self._brush(bar, now) for bar in bars]
        self._item.setOpts(x0=starts, x1=np.maximum(ends, starts + 0.05), y=ys, height=0.7,
                           brushes=brushes)
        first = float(starts.min()) if len(bars) else now - _MIN_SPAN
        self.setXRange(min(first, now - _MIN_SPAN), now + 1.0, padding=0.02)
        self.setYRange(-0.6, max(len(rows), 1) - 0.4, padding=0)
        self._axis.picture = None
        self._axis.update()

    def _brush(self, bar: SlotBar, now: float) -> QBrush:
        """Job colour (lighter while it runs), red failed, grey cancelled; one brush per
        kind, made once."""
        ended = bar.end is not None and bar.end <= now
        own = ended and bar.state in _OWN_COLOUR
        key = (bar.state if own else bar.job_id, ended)
        brush = self._brushes.get(key)
        if brush is None:
            if own:
                colour = EXECUTION_STATE_COLOURS[bar.state]
            else:
                colour = job_colour(bar.job_id) if ended else job_colour(bar.job_id).lighter(125)
            brush = self._brushes[key] = QBrush(colour)
        return brush

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.refresh()

    def _hover(self, position: QPointF) -> None:
        point = self.getPlotItem().getViewBox().mapSceneToView(position)
        found = self._bar_at(point.x(), point.y())
        self.setToolTip("" if found is None else
                        f"{found.job_name}: {found.subtask_id} attempt {found.attempt}\n"
                        f"{found.taskmanager_id}, slot {found.slot_index}: {found.state}\n"
                        f"{clock(found.start)}"
                        + (f" \u2013 {found.end - found.start:.1f} s" if found.end else
                           " \u2013 running"))

    def _bar_at(self, x: float, y: float) -> SlotBar | None:
        row = round(y)
        if not 0 <= row < len(self._axis.rows):
            return None
        slot = self._axis.rows[row]
        now = self.moment if self.moment is not None else time.time()
        for bar in reversed(self._bars):
            end = bar.end if bar.end is not None else now
            if (bar.taskmanager_id, bar.slot_index) == slot and bar.start <= x <= end:
                return bar
        return None

