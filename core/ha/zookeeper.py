"""``ha.mode = zookeeper``: leader election through Apache ZooKeeper with kazoo.

As Flink's ``ZooKeeperLeaderElectionDriver``: every JobManager of the cluster queues for
kazoo's lock recipe (an ephemeral sequential znode under ``/clusterdeck/<cluster>/election``;
the lowest leads, each other one watches the one before it). The winner bumps the counter
znode ``…/epoch`` with a versioned set (a compare-and-set: two writers cannot both read
the same epoch and write the next) and writes the pointer to its job store, with who it
is, into ``…/leader``.

A leader stays leader only while its session is good. kazoo reports SUSPENDED when the
connection drops (the session may still live, but this process can no longer tell) and
LOST when the session expired (its lock znode is gone and a standby may lead already):
either one ends the Leadership at once, on kazoo's thread; the JobManager then stops its
endpoints and exits to stand by again (docs/ha.md). Treating SUSPENDED as lost costs a
needless failover on a short ZooKeeper hiccup, and is the only choice that never lets two
JobManagers act at once.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException

from clusterdeck.core.ha.election import Leadership
from clusterdeck.core.ha.identity import MAX_STANDBYS, own_identity

log = logging.getLogger(__name__)

ROOT = "/clusterdeck"
CONNECT_TIMEOUT = 15.0  # the supervisor's own ZooKeeper may still be starting its JVM


class ZooKeeperElection:
    mode = "zookeeper"

    def __init__(self, cluster_id: str, quorum: str, session_timeout: float,
                 storage_dir: Path, identity: str | None = None) -> None:
        self._path = f"{ROOT}/{cluster_id}"
        self._storage_dir = storage_dir
        self._client = KazooClient(hosts=quorum, timeout=session_timeout)
        self._identity = identity or own_identity()
        self._lock = self._client.Lock(f"{self._path}/election", self._identity)
        self._leadership: Leadership | None = None

    def run_for_leadership(self, lost: threading.Event) -> Leadership:
        self._client.start(timeout=CONNECT_TIMEOUT)
        self._client.add_listener(self._on_state)
        self._lock.acquire()  # a standby blocks here
        epoch = self._bump_epoch()
        leadership = Leadership(epoch, lost)
        self._leadership = leadership
        pointer = json.dumps({"identity": self._identity, "epoch": epoch,
                              "storage_dir": str(self._storage_dir)}).encode()
        self._client.ensure_path(f"{self._path}/leader")
        self._client.set(f"{self._path}/leader", pointer)
        if self._client.state != KazooState.CONNECTED:
            leadership.lose(f"the ZooKeeper session was {self._client.state} right after "
                            "the election")
        return leadership

    def _bump_epoch(self) -> int:
        path = f"{self._path}/epoch"
        self._client.ensure_path(path)
        while True:
            data, stat = self._client.get(path)
            text = data.decode("ascii", "replace").strip() or "0"
            if not text.isdigit() or len(text) > 18:
                raise KazooException(f"the epoch znode {path} holds {text[:40]!r}")
            try:
                self._client.set(path, str(int(text) + 1).encode(), version=stat.version)
            except BadVersionError:
                continue  # another writer came in between: read again
            return int(text) + 1

    def _on_state(self, state: str) -> bool:
        """kazoo's thread: any state but CONNECTED ends a leadership for good (True: this
        listener is done)."""
        leadership = self._leadership
        if leadership is None or state == KazooState.CONNECTED:
            return False
        log.error("ZooKeeper session %s: this JobManager stops leading", state)
        leadership.lose(f"its ZooKeeper session was {state}")
        return True

    def standbys(self) -> tuple[str, ...]:
        try:
            contenders = self._lock.contenders()
        except KazooException as error:
            log.warning("cannot list the standby JobManagers: %s", error)
            return ()
        return tuple(c[:300] for c in contenders if c != self._identity)[:MAX_STANDBYS]

    def close(self) -> None:
        """Release the lock and close the session, so a standby leads at once instead of
        after the session timeout."""
        self._leadership = None  # closing is no loss to report
        try:
            self._client.stop()
            self._client.close()
        except KazooException as error:
            log.warning("closing the ZooKeeper session: %s", error)
