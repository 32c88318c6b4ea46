"""Colours shared by every view, so a state looks the same in the table, the slot grid
and the ExecutionGraph.

Execution-state colours follow Flink's web UI (running blue, finished green, failed
red), readable on a light background with dark text.
"""

from __future__ import annotations

import hashlib

from PySide6.QtGui import QColor

EXECUTION_STATE_COLOURS: dict[str, QColor] = {
    "CREATED": QColor("#c9ced6"),
    "SCHEDULED": QColor("#a7c5eb"),
    "DEPLOYING": QColor("#6fa8dc"),
    "RUNNING": QColor("#2f6fd6"),
    "FINISHED": QColor("#3fa34d"),
    "CANCELING": QColor("#f2b544"),
    "CANCELED": QColor("#8c8c8c"),
    "FAILED": QColor("#d64541"),
}
"""Fill of a subtask cell, by the current attempt's ExecutionState."""

UNKNOWN_STATE = QColor("#ffffff")

JOB_STATUS_COLOURS: dict[str, QColor] = {
    "CREATED": QColor("#8c8c8c"),
    "RUNNING": QColor("#2f6fd6"),
    "FAILING": QColor("#e07b39"),
    "FAILED": QColor("#d64541"),
    "CANCELLING": QColor("#f2b544"),
    "CANCELED": QColor("#8c8c8c"),
    "FINISHED": QColor("#3fa34d"),
    "RESTARTING": QColor("#9b59b6"),
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

SLOT_FREE = QColor("#e8f0e4")
SLOT_BUSY = QColor("#e07b39")
SLOT_LOST = QColor("#f3c7c5")
SLOT_OUTLINE = QColor("#6b6b6b")

_JOB_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#bcbd22", "#e377c2", "#8c564b",
                "#2ca02c", "#ff7f0e")


def execution_colour(state: str) -> QColor:
    return EXECUTION_STATE_COLOURS.get(state, UNKNOWN_STATE)


def job_colour(job_id: str) -> QColor:
    """A stable colour per job, the same in every view and every session."""
    digest = hashlib.blake2s(job_id.encode("utf-8"), digest_size=2).digest()
    return QColor(_JOB_COLOURS[int.from_bytes(digest, "big") % len(_JOB_COLOURS)])


def text_colour_on(fill: QColor) -> QColor:
    """Black or white, whichever reads better on ``fill``."""
    luminance = 0.299 * fill.red() + 0.587 * fill.green() + 0.114 * fill.blue()
    return QColor("#111111") if luminance > 150 else QColor("#ffffff")
