"""ClusterOverviews as the ResourceManager publishes them, for the view tests."""

from __future__ import annotations

from clusterdeck.core.protocol import messages as p


def taskmanager(resource_id: str, *, slots: int = 2, free: int = 2, lost: bool = False,
                pid: int = 4242, heartbeat: float | None = 0.3) -> p.TaskManagerInfo:
    return p.TaskManagerInfo(
        id=resource_id,
        state=p.TaskManagerState.LOST if lost else p.TaskManagerState.REGISTERED,
        host="localhost", pid=pid, slots_total=slots, slots_free=0 if lost else free,
        heartbeat_age_s=heartbeat, registered_at=1000.0,
        lost_cause=f"TaskManager {resource_id} lost: process exited (last will)" if lost
        else "")


def overview(*taskmanagers: p.TaskManagerInfo, jobmanager_pid: int = 4000) -> p.ClusterOverview:
    live = [tm for tm in taskmanagers if tm.state is p.TaskManagerState.REGISTERED]
    return p.ClusterOverview(
        cluster_id="test", taskmanagers=tuple(taskmanagers),
        slots_total=sum(tm.slots_total for tm in live),
        slots_free=sum(tm.slots_free for tm in live), jobmanager_pid=jobmanager_pid,
        taken_at=1000.0)
