"""Small plots over time (pyqtgraph): a job vertex's records/s and busy share, and a
process's CPU, memory and Spark JVM heap (gui/models/metrics.py holds the series).

Each plot makes its curves once and feeds them arrays (pyqtgraph's way to redraw
cheaply). A process's x axis is wall-clock time (its life is long); a vertex's is seconds
from its first point (a job lasts seconds). GUI thread only.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from clusterdeck.gui.models.metrics import ProcessSeries

_MB = 1024 * 1024


def _plot(left: str, clock: bool = True) -> pg.PlotWidget:
    """``clock``: wall-clock times on the x axis; else seconds (from the first point)."""
    axes = {"bottom": pg.DateAxisItem(orientation="bottom")} if clock else {}
    plot = pg.PlotWidget(axisItems=axes)
    plot.setBackground("#ffffff")
    plot.showGrid(x=True, y=True, alpha=0.25)
    plot.setLabel("left", left)
    plot.addLegend(offset=(8, 4))
    plot.setMouseEnabled(x=True, y=False)
    plot.setMinimumHeight(120)
    return plot


def _curve(plot: pg.PlotWidget, name: str, colour: str, dashed: bool = False
           ) -> pg.PlotDataItem:
    pen = pg.mkPen(colour, width=2, style=pg.QtCore.Qt.PenStyle.DashLine if dashed else
                   pg.QtCore.Qt.PenStyle.SolidLine)
    return plot.plot([], [], pen=pen, name=name)


class VertexPlot(QWidget):
    """Records/s in and out and the busy share of the selected job vertex."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("Click a subtask to plot its vertex's numbers.")
        self.rates = _plot("records/s", clock=False)
        self.rates.setLabel("bottom", "seconds")
        self.rate_in = _curve(self.rates, "in", "#2e86c1")
        self.rate_out = _curve(self.rates, "out", "#27ae60")
        self.busy = _plot("busy %", clock=False)
        self.busy.setYRange(0, 100)
        self.busy_share = _curve(self.busy, "busy", "#e67e22")
        self.busy.setXLink(self.rates)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.rates, 2)
        layout.addWidget(self.busy, 1)

    def show_rates(self, title: str,
                   points: Sequence[tuple[float, float, float, float]]) -> None:
        self.title.setText(title)
        start = points[0][0] if points else 0.0  # a job lasts seconds: time from its start
        times = [point[0] - start for point in points]
        self.rate_in.setData(times, [point[1] for point in points])
        self.rate_out.setData(times, [point[2] for point in points])
        self.busy_share.setData(times, [100 * point[3] for point in points])

    def clear(self) -> None:
        self.show_rates("Click a subtask to plot its vertex's numbers.", [])


class ProcessPlot(QWidget):
    """CPU and memory of the selected process; a TaskManager's Spark JVM heap too."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("Select a process to plot its CPU and memory.")
        self.cpu_plot = _plot("CPU %")
        self.cpu = _curve(self.cpu_plot, "CPU", "#8e44ad")
        self.memory_plot = _plot("MB")
        self.memory = _curve(self.memory_plot, "resident", "#2e86c1")
        self.heap = _curve(self.memory_plot, "JVM heap used", "#e67e22")
        self.heap_max = _curve(self.memory_plot, "JVM heap max", "#e67e22", dashed=True)
        self.memory_plot.setXLink(self.cpu_plot)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.cpu_plot, 1)
        layout.addWidget(self.memory_plot, 1)

    def show_process(self, name: str, series: ProcessSeries | None) -> None:
        self.title.setText(f"{name}: CPU, memory" + (
            " and Spark JVM heap" if series is not None and series.heap else ""))
        series = series or ProcessSeries()
        self.cpu.setData([t for t, _ in series.cpu], [c for _, c in series.cpu])
        self.memory.setData([t for t, _ in series.memory], [m / _MB for _, m in series.memory])
        self.heap.setData([t for t, _, _ in series.heap], [u / _MB for _, u, _ in series.heap])
        self.heap_max.setData([t for t, _, _ in series.heap],
                              [m / _MB for _, _, m in series.heap])
