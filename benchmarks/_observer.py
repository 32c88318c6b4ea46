"""A cluster observer that remembers when each message arrived.

Like tests/integration/clusters.py's ClusterWatcher it follows the retained
``state/cluster`` snapshot and ``events/cluster``, but it stamps each arrival with
``time.monotonic()`` on paho's network thread, so a benchmark can ask "when did the first
snapshot after t0 show taskmanager-1 lost" instead of polling for it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node.service import connect_service
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics

STATE, EVENT, LEADER = "state", "event", "leader"


def registered_ids(overview: p.ClusterOverview | None) -> set[str]:
    if overview is None:
        return set()
    return {t.id for t in overview.taskmanagers if t.state is p.TaskManagerState.REGISTERED}


def taskmanager_in(overview: p.ClusterOverview, resource_id: str) -> p.TaskManagerInfo | None:
    return next((t for t in overview.taskmanagers if t.id == resource_id), None)


class ClusterObserver:
    """Thread model: the callbacks run on paho's network thread and only append to the log
    under the condition; every query runs on the caller's thread."""

    def __init__(self, address: BrokerAddress, cluster_id: str,
                 connect_timeout: float = 30.0) -> None:
        self.connected_at = 0.0
        self._log: list[tuple[float, str, Any]] = []
        self._condition = threading.Condition()
        self.latest: p.ClusterOverview | None = None
        self.service = connect_service(Config({"cluster.id": cluster_id}), "client",
                                       f"bench-observer-{uuid.uuid4().hex[:8]}", address,
                                       connect_timeout=connect_timeout, with_presence=False)
        self.connected_at = time.monotonic()
        self.service.subscribe(topics.CLUSTER_STATE, lambda _t, m: self._record(STATE, m))
        self.service.subscribe(topics.CLUSTER_EVENTS, lambda _t, m: self._record(EVENT, m))
        self.service.subscribe(topics.LEADER, lambda _t, m: self._record(LEADER, m))

    def _record(self, kind: str, message: Any) -> None:
        with self._condition:
            self._log.append((time.monotonic(), kind, message))
            if kind == STATE and isinstance(message, p.ClusterOverview):
                self.latest = message
            self._condition.notify_all()

    def first(self, kind: str, predicate: Callable[[Any], bool], since: float,
              timeout: float, what: str) -> tuple[float, Any]:
        """(arrival time, message) of the first ``kind`` message at or after ``since``
        that satisfies ``predicate``; TimeoutError naming ``what`` at the deadline."""
        deadline = time.monotonic() + timeout
        checked = 0
        with self._condition:
            while True:
                for arrived, found_kind, message in self._log[checked:]:
                    if arrived >= since and found_kind == kind and predicate(message):
                        return arrived, message
                checked = len(self._log)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no {what} within {timeout:g} s")
                self._condition.wait(remaining)

    def wait_registered(self, ids: set[str], timeout: float) -> float:
        """Wait until the latest snapshot has all ``ids`` registered; the arrival time of
        the first snapshot that showed it."""
        return self.first(STATE, lambda o: ids <= registered_ids(o), 0.0, timeout,
                          f"snapshot with {sorted(ids)} registered")[0]

    def wait_registered_now(self, ids: set[str], timeout: float) -> None:
        """Wait until the *latest* snapshot has all ``ids`` registered."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while not ids <= registered_ids(self.latest):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    now = sorted(registered_ids(self.latest))
                    raise TimeoutError(f"{sorted(ids)} not all registered within "
                                       f"{timeout:g} s (now: {now})")
                self._condition.wait(remaining)

    def close(self) -> None:
        self.service.close()
