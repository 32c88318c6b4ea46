"""The active ResourceManager's decisions: which TaskManagers to start for slot requests
beyond the free slots, and which idle ones to stop (Flink's ActiveResourceManager with
its pending-worker bookkeeping, docs/elastic.md).

Pure: times (``time.monotonic()``) are passed in, the decisions come out as names; the
ResourceManager publishes them as a ``TaskManagerDemand`` and a resource provider carries
them out. Owned by the ResourceManager's main thread.

A TaskManager asked for is *starting* until it registers, fails (the provider says so,
with its log) or has not registered within ``start_timeout``. A failed start pauses every
start for a back-off that doubles with each failure in a row, so a command that always
fails costs one start per pause, never a loop. Only TaskManagers this ResourceManager
started are ever stopped; those started by hand count towards the limits but stay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from clusterdeck.broker.credentials import TASKMANAGER_LOGINS, taskmanager_name
from clusterdeck.core.protocol.elastic import STOPPED_BY_DEMAND


@dataclass(frozen=True)
class ElasticLimits:
    min_taskmanagers: int
    max_taskmanagers: int
    slots_per_taskmanager: int
    idle_timeout: float
    start_timeout: float
    start_backoff: float
    max_start_backoff: float

    @classmethod
    def from_config(cls, config: Any) -> ElasticLimits:
        return cls(config["elastic.min-taskmanagers"], config["elastic.max-taskmanagers"],
                   config["taskmanager.slots"], config["elastic.idle-timeout"],
                   config["elastic.start-timeout"], config["elastic.start-backoff"],
                   config["elastic.max-start-backoff"])

    @property
    def max_slots(self) -> int:
        return self.max_taskmanagers * self.slots_per_taskmanager


@dataclass(frozen=True)
class TaskManagerLoad:
    """A registered TaskManager as the slot pool sees it."""

    resource_id: str
    slots_total: int
    slots_free: int

    @property
    def idle(self) -> bool:
        return self.slots_free >= self.slots_total


@dataclass(frozen=True)
class Decision:
    """What changed in one ``decide``: TaskManagers to start (new names), to stop (idle
    past the timeout: the ResourceManager takes their slots out of the pool at once), and
    starts that timed out."""

    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    timed_out: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.start or self.stop or self.timed_out)


@dataclass
class ElasticPlanner:
    limits: ElasticLimits
    starting: dict[str, float] = field(default_factory=dict)  # name -> asked at
    stopping: dict[str, str] = field(default_factory=dict)    # name -> why it is stopped
    owned: set[str] = field(default_factory=set)  # registered, started by us
    idle_since: dict[str, float] = field(default_factory=dict)
    failed_names: set[str] = field(default_factory=set)  # tried last when a name is chosen
    released: set[str] = field(default_factory=set)  # stopped by us: free to use again
    failed_starts: int = 0
    failures_in_row: int = 0
    retry_at: float = 0.0
    last_failure: str = ""

    def __post_init__(self) -> None:
        if self.limits.min_taskmanagers > self.limits.max_taskmanagers:
            raise ValueError(f"elastic.min-taskmanagers ({self.limits.min_taskmanagers}) "
                             f"exceeds elastic.max-taskmanagers "
                             f"({self.limits.max_taskmanagers})")

    # -- events ----------------------------------------------------------------------------

    def registered(self, resource_id: str) -> None:
        """A TaskManager registered; one we asked for is ours from now on."""
        if self.starting.pop(resource_id, None) is not None:
            self.owned.add(resource_id)
            self.failures_in_row = 0
            self.failed_names.discard(resource_id)

    def lost(self, resource_id: str) -> str | None:
        """A TaskManager left; the reason we stopped it, when we did."""
        self.owned.discard(resource_id)
        self.idle_since.pop(resource_id, None)
        self.starting.pop(resource_id, None)
        reason = self.stopping.pop(resource_id, None)
        if reason is not None:
            self.released.add(resource_id)
        return reason

    def start_failed(self, resource_id: str, cause: str, now: float) -> bool:
        """A start we asked for failed; False for a TaskManager we are not starting (a
        report that came late, or twice)."""
        if self.starting.pop(resource_id, None) is None:
            return False
        self.failed_starts += 1
        self.failures_in_row += 1
        self.failed_names.add(resource_id)
        pause = min(self.limits.start_backoff * 2.0 ** min(self.failures_in_row - 1, 32),
                    self.limits.max_start_backoff)
        self.retry_at = now + pause
        self.last_failure = f"{resource_id}: {cause}"
        return True

    # -- the decision ----------------------------------------------------------------------

    def decide(self, now: float, pending: int, live: list[TaskManagerLoad],
               taken: set[str]) -> Decision:
        """``pending``: slot requests no free slot could answer; ``live``: the registered
        TaskManagers whose slots are in the pool; ``taken``: every name the
        ResourceManager knows (registered or lost), which a new TaskManager must not use
        unless we stopped it ourselves."""
        timed_out = tuple(name for name, asked in self.starting.items()
                          if now - asked >= self.limits.start_timeout)
        for name in timed_out:
            self.start_failed(name, f"did not register within "
                              f"{self.limits.start_timeout:g} s", now)
        self._track_idle(now, live, pending)
        count = len(live) + len(self.starting)
        start = self._starts(now, pending, count, taken)
        stop = self._stops(now, pending, count + len(start))
        return Decision(start, stop, timed_out)

    def _starts(self, now: float, pending: int, count: int, taken: set[str]) -> tuple[str, ...]:
        if now < self.retry_at:
            return ()
        coming = len(self.starting) * self.limits.slots_per_taskmanager
        wanted = math.ceil(max(0, pending - coming) / self.limits.slots_per_taskmanager)
        wanted = max(wanted, self.limits.min_taskmanagers - count)
        wanted = min(wanted, self.limits.max_taskmanagers - count)
        if wanted <= 0:
            return ()
        names = self._free_names(taken)[:wanted]
        for name in names:
            self.starting[name] = now
            self.released.discard(name)
        return tuple(names)

    def _stops(self, now: float, pending: int, count: int) -> tuple[str, ...]:
        if pending:
            return ()
        overdue = sorted((since, name) for name, since in self.idle_since.items()
                         if now - since >= self.limits.idle_timeout)
        room = count - self.limits.min_taskmanagers
        stop = tuple(name for _, name in overdue[:max(0, room)])
        for name in stop:
            self.stopping[name] = (f"{STOPPED_BY_DEMAND}: idle for "
                                   f"{now - self.idle_since.pop(name):.0f} s")
            self.owned.discard(name)
        return stop

    def _track_idle(self, now: float, live: list[TaskManagerLoad], pending: int) -> None:
        for load in live:
            if load.resource_id not in self.owned:
                continue
            if load.idle and not pending:
                self.idle_since.setdefault(load.resource_id, now)
            else:
                self.idle_since.pop(load.resource_id, None)

    def _free_names(self, taken: set[str]) -> list[str]:
        """Pool logins nobody uses, those whose start never failed first."""
        busy = (taken - self.released) | set(self.starting) | set(self.stopping)
        free = [taskmanager_name(n) for n in range(1, TASKMANAGER_LOGINS + 1)
                if taskmanager_name(n) not in busy]
        return sorted(free, key=lambda name: name in self.failed_names)
