"""The status bar's words for what the bridge reports: TaskManagers, slots, the broker,
cluster events and savepoints in progress. Pure functions, any thread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clusterdeck.core.protocol import messages as p
from clusterdeck.gui.controllers.jobcalls import SavepointAsk
from clusterdeck.gui.models.formatting import NONE

LOST_SHOWN_MS = 8000
REGISTERED_SHOWN_MS = 5000


def taskmanagers_text(overview: p.ClusterOverview | None) -> str:
    if overview is None:
        return f"TaskManagers: {NONE}"
    live = sum(tm.state is p.TaskManagerState.REGISTERED for tm in overview.taskmanagers)
    lost = len(overview.taskmanagers) - live
    return f"TaskManagers: {live} registered" + (f", {lost} lost" if lost else "")


def slots_text(overview: p.ClusterOverview | None) -> str:
    if overview is None:
        return f"slots: {NONE}"
    used = overview.slots_total - overview.slots_free
    return f"slots: {used}/{overview.slots_total} used"


def broker_text(state: str, kind: str) -> str:
    """``state``: the bridge's ``none``, ``connected`` or ``disconnected``."""
    if state == "connected":
        return f"broker: connected ({kind})"
    if state == "disconnected":
        return f"broker: DISCONNECTED ({kind})"
    return f"broker: {NONE}"


def broker_style(state: str) -> str:
    """A lost broker stands out in red."""
    return "color: #b03a36; font-weight: bold;" if state == "disconnected" else ""


def cluster_event_notice(event: Any) -> tuple[str, int] | None:
    """The status bar's line for a cluster event, and for how many ms; None: not shown."""
    if isinstance(event, p.TaskManagerLost):
        return f"{event.cause} ({event.detected_by})", LOST_SHOWN_MS
    if isinstance(event, p.LeadershipChanged):
        did = "leads" if event.leading else "stopped leading"
        return (f"JobManager pid {event.pid} on {event.host} {did} (epoch {event.epoch}): "
                f"{event.cause}", LOST_SHOWN_MS)
    if isinstance(event, p.TaskManagerRegistered):
        return (f"TaskManager {event.info.id} registered ({event.info.slots_total} slots)",
                REGISTERED_SHOWN_MS)
    return None


def savepoints_text(waiting: Sequence[SavepointAsk]) -> str:
    """The savepoints asked for here that are still in progress (at least one)."""
    if len(waiting) == 1:
        return f"{waiting[0].doing} of {waiting[0].job} in progress\u2026"
    return f"{len(waiting)} savepoints in progress\u2026"
