"""The cluster's health in one word and one line, for the tray icon (gui/controllers/tray.py)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from clusterdeck.core.protocol import messages as p


class Health(StrEnum):
    NONE = "none"   # no cluster followed
    OK = "ok"
    WARN = "warn"   # running, but something is being recovered or missing
    DOWN = "down"   # it cannot run jobs now


@dataclass(frozen=True)
class ClusterHealth:
    level: Health
    text: str


def cluster_health(cluster_id: str, overview: p.ClusterOverview | None, broker: str,
                   process_states: dict[str, str], running_jobs: int = 0) -> ClusterHealth:
    """``broker``: "connected", "disconnected" or "none"; ``process_states``: each
    supervised process's state word (processmodel: running, restarting, crashed...)."""
    if not cluster_id:
        return ClusterHealth(Health.NONE, "no cluster")
    crashed = sorted(name for name, state in process_states.items() if state == "crashed")
    if broker == "disconnected":
        return ClusterHealth(Health.DOWN, f"{cluster_id}: the broker is unreachable")
    if crashed:
        return ClusterHealth(Health.DOWN, f"{cluster_id}: {', '.join(crashed)} crashed "
                             "too often and stays down")
    if overview is None:
        return ClusterHealth(Health.WARN, f"{cluster_id}: waiting for the JobManager")
    lost = sorted(tm.id for tm in overview.taskmanagers
                  if tm.state is not p.TaskManagerState.REGISTERED)
    restarting = sorted(name for name, state in process_states.items()
                        if state in ("restarting", "starting"))
    jobs = f", {running_jobs} job{'s' if running_jobs != 1 else ''} running" \
        if running_jobs else ""
    if not overview.taskmanagers:
        return ClusterHealth(Health.WARN, f"{cluster_id}: no TaskManager{jobs}")
    if lost or restarting:
        what = ", ".join([*(f"{name} lost" for name in lost),
                          *(f"{name} restarting" for name in restarting)])
        return ClusterHealth(Health.WARN, f"{cluster_id}: {what}{jobs}")
    return ClusterHealth(Health.OK, f"{cluster_id}: {len(overview.taskmanagers)} "
                         f"TaskManagers, {overview.slots_free}/{overview.slots_total} slots "
                         f"free{jobs}")
