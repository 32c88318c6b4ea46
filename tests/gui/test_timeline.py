"""The task timeline's rows: the slots of the overview's TaskManagers."""

from __future__ import annotations

from dataclasses import replace

from clusterdeck.core.protocol import messages as p
from clusterdeck.gui.views.timeline import SlotTimeline
from tests.gui.overviews import overview, taskmanager


def labels(timeline: SlotTimeline) -> list[str]:
    axis = timeline.getPlotItem().getAxis("left")
    return axis.tickStrings([float(i) for i in range(len(timeline.rows()))], 1.0, 1.0)


def test_taskmanagers_started_and_stopped_on_demand_are_marked_on_their_rows(qtbot):
    timeline = SlotTimeline(interval_ms=60_000)
    qtbot.addWidget(timeline)
    timeline.show()
    stopped = replace(taskmanager("taskmanager-3", slots=1, lost=True), lost_cause=(
        "TaskManager taskmanager-3 lost: stopped by the ResourceManager: idle for 30 s"))
    plain = overview(taskmanager("taskmanager-1", slots=1), taskmanager("taskmanager-2", slots=1),
                     stopped)
    timeline.set_overview(plain)
    timeline.refresh()
    assert labels(timeline)[:2] == ["taskmanager-1 / 0", "taskmanager-2 / 0"]
    demand = p.TaskManagerDemand("1:ab", starts=(), stops=(), min_taskmanagers=1,
                                 max_taskmanagers=3, started=("taskmanager-2",))
    timeline.set_overview(replace(plain, elastic=demand))
    timeline.refresh()
    assert labels(timeline) == ["taskmanager-1 / 0", "taskmanager-2 (on demand) / 0",
                                "taskmanager-3 (idle) / 0"]
