"""ha.mode zookeeper against a real ZooKeeper server (core/ha/zookeeper.py, zkserver.py).

Marked integration: each test starts the server's JVM, and stops it when it ends, passed
or not.
"""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.core.ha import zkserver
from clusterdeck.core.ha.zookeeper import ZooKeeperElection
from tests.waiting import wait_for

try:
    zkserver.classpath()
    HAVE_ZOOKEEPER = True
except zkserver.ZooKeeperMissingError:
    HAVE_ZOOKEEPER = False

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not HAVE_ZOOKEEPER, reason="ZooKeeper is not installed")]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = zkserver.free_port()
    argv = zkserver.server_argv(zkserver.write_config(tmp_path, port))
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        zkserver.wait_serving(port, 60)
        yield process, f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(10)


def election(quorum: str, cluster: str, tmp_path: Path) -> ZooKeeperElection:
    """A contender named as if it were a process of its own."""
    return ZooKeeperElection(cluster, quorum, 2.0, tmp_path,
                             identity=f"pid {uuid.uuid4().int % 10**6} on host test")


def test_the_next_contender_leads_with_a_higher_epoch_when_the_leader_closes(
        server: tuple[subprocess.Popen[bytes], str], tmp_path: Path) -> None:
    cluster = f"c-{uuid.uuid4().hex[:6]}"
    first, second = election(server[1], cluster, tmp_path), election(server[1], cluster,
                                                                     tmp_path)
    try:
        assert first.run_for_leadership(threading.Event()).epoch == 1
        granted: list[int] = []
        waiting = threading.Thread(target=lambda: granted.append(
            second.run_for_leadership(threading.Event()).epoch), daemon=True)
        waiting.start()
        wait_for(lambda: len(first.standbys()) == 1, 10, "the second contender listed")
        assert granted == []
        first.close()
        waiting.join(10)
        assert granted == [2]
    finally:
        first.close()
        second.close()


def test_a_leader_whose_server_goes_away_loses_its_leadership_at_once(
        server: tuple[subprocess.Popen[bytes], str], tmp_path: Path) -> None:
    leader = election(server[1], f"c-{uuid.uuid4().hex[:6]}", tmp_path)
    try:
        leadership = leader.run_for_leadership(threading.Event())
        server[0].kill()
        assert leadership.lost.wait(10), "the leadership outlived its connection"
        assert leadership.cause == "its ZooKeeper session was SUSPENDED"
    finally:
        leader.close()
