"""Colours shared by every view, so a state looks the same in the table, the slot grid
and the ExecutionGraph.

Execution-state colours follow Flink's web UI (running blue, finished green, failed
red), readable on a light background with dark text.
"""

from __future__ import annotations

from PySide6.QtGui import QColor

from clusterdeck.core.protocol.states import ExecutionState, JobStatus

EXECUTION_STATE_COLOURS: dict[ExecutionState, QColor] = {
    ExecutionState.CREATED: QColor("#c9ced6"),
    ExecutionState.SCHEDULED: QColor("#a7c5eb"),
    ExecutionState.DEPLOYING: QColor("#6fa8dc"),
    ExecutionState.RUNNING: QColor("#2f6fd6"),
    ExecutionState.FINISHED: QColor("#3fa34d"),
    ExecutionState.CANCELING: QColor("#f2b544"),
    ExecutionState.CANCELED: QColor("#8c8c8c"),
    ExecutionState.FAILED: QColor("#d64541"),
}
"""Fill of a subtask cell, by the current attempt's ExecutionState."""

UNKNOWN_STATE = QColor("#ffffff")

JOB_STATUS_COLOURS: dict[JobStatus, QColor] = {
    JobStatus.CREATED: QColor("#8c8c8c"),
    JobStatus.RUNNING: QColor("#2f6fd6"),
    JobStatus.FAILING: QColor("#e07b39"),
    JobStatus.FAILED: QColor("#d64541"),
    JobStatus.CANCELLING: QColor("#f2b544"),
    JobStatus.CANCELED: QColor("#8c8c8c"),
    JobStatus.FINISHED: QColor("#3fa34d"),
    JobStatus.RESTARTING: QColor("#9b59b6"),
}

PROCESS_STATE_COLOURS: dict[str, QColor] = {
    "starting": QColor("#6fa8dc"),
    "running": QColor("#3fa34d"),
    "restarting": QColor("#e07b39"),
    "crashed": QColor("#d64541"),
    "lost": QColor("#d64541"),
    "stopped": QColor("#8c8c8c"),
}
"""Text colour of a process's state in the process table."""

BACKPRESSURE_COLOURS: dict[str, QColor] = {
    "OK": QColor("#3fa34d"),
    "LOW": QColor("#e0a030"),
    "HIGH": QColor("#d64541"),
}
"""Badge of a streaming vertex's backpressure band, as Flink's web UI colours it."""

SLOT_FREE = QColor("#e8f0e4")
SLOT_BUSY = QColor("#e07b39")
SLOT_LOST = QColor("#f3c7c5")
SLOT_OUTLINE = QColor("#6b6b6b")

_JOB_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#bcbd22", "#e377c2", "#393b79",
                "#8c6d31")
"""No red, green, grey or orange: the timeline draws failed and cancelled attempts red and
grey, the slot grid a busy slot of no known job orange, and green means finished."""


def execution_colour(state: str) -> QColor:
    """``state`` is an ExecutionState, or ``""`` for a cell not drawn yet (a StrEnum
    member and its value are the same key)."""
    return EXECUTION_STATE_COLOURS.get(state, UNKNOWN_STATE)


_ASSIGNED: dict[str, QColor] = {}


def job_colour(job_id: str) -> QColor:
    """A colour per job, the same in every view: jobs take the palette's colours in the
    order they are first seen, so the few jobs on screen together differ (a hash of the id
    gave two of three jobs the same colour). GUI thread only."""
    colour = _ASSIGNED.get(job_id)
    if colour is None:
        colour = _ASSIGNED[job_id] = QColor(_JOB_COLOURS[len(_ASSIGNED) % len(_JOB_COLOURS)])
    return colour


def text_colour_on(fill: QColor) -> QColor:
    """Black or white, whichever reads better on ``fill``."""
    luminance = 0.299 * fill.red() + 0.587 * fill.green() + 0.114 * fill.blue()
    return QColor("#111111") if luminance > 150 else QColor("#ffffff")
