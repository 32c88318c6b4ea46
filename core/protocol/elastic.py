"""The active ResourceManager and its resource provider: which TaskManagers to start and
stop, and a start that failed (docs/elastic.md).

The ResourceManager decides; the provider (the supervisor of ``clusterdeck up``, or of the
window) only carries it out. The decision is declarative and retained, so a provider that
connects late, or a broker that restarted, loses nothing: the provider reconciles its
processes with the latest ``TaskManagerDemand`` of the leader.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.rpc import message

START_FAILURE_CHARS = 2000  # of a failed start's cause (its log's last lines), at most
STOPPED_BY_DEMAND = "stopped by the ResourceManager"  # how a stopped one's loss cause begins


@message
@dataclass(frozen=True)
class TaskManagerDemand:
    """ResourceManager -> resource provider, retained on ``state/taskmanager-demand``.

    ``starts``: TaskManagers (by resource id, which is also their login) the
    ResourceManager asked for and that have not registered yet; ``stops``: TaskManagers
    it started that stay idle past ``elastic.idle-timeout``, to be stopped; ``started``:
    those it started that run (for observers: the window marks them).
    ``failed_starts`` counts the failed starts so far: a provider that saw one fail
    starts it again only in a demand that counts that failure (a later decision), never
    in the one it failed under. ``retry_at``: no start before it (back-off); 0 none."""

    fencing_token: str
    starts: tuple[str, ...]
    stops: tuple[str, ...]
    min_taskmanagers: int
    max_taskmanagers: int
    started: tuple[str, ...] = ()
    failed_starts: int = 0
    retry_at: float = 0.0
    last_failure: str = ""
    taken_at: float = 0.0


@message
@dataclass(frozen=True)
class TaskManagerStartFailed:
    """Resource provider -> ResourceManager (tell, fenced), sent with the failed
    TaskManager's own login, so the broker and ``sender_field`` vouch that it speaks for
    that TaskManager only. ``cause``: its exit and its log's last lines."""

    resource_id: str
    cause: str
    exit_code: int | None = None
