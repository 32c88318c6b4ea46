"""TLS on the cluster's broker, for both kinds, with real broker and TaskManager processes.

The broker is forced to TLS on loopback (``broker.tls = on``): binding beyond loopback
is not something a test machine reliably allows, and the listener is the same. A client
that trusts the cluster's CA gets in; one that does not, and one speaking plain TCP,
never get a CONNACK. A TaskManager given only an exported credentials file joins a
TLS cluster and keeps the password out of its command line.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import BrokerConnectError, connect_and_wait, make_client
from clusterdeck.broker.connection import client_address, read_connection
from clusterdeck.broker.server import wait_ready
from clusterdeck.broker.tls import CA_CERT_NAME, TLS_DIR_NAME
from tests.integration.clusters import FAST_HEARTBEATS, broker_kinds, running_cluster
from tests.integration.test_broker import KINDS
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CLUSTER = "tls-alpha"
START_TIMEOUT = 20.0
REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "clusterdeck.core.cli"]


@dataclass
class TlsBroker:
    kind: str
    process: subprocess.Popen
    cluster_dir: Path
    log: Path

    def address(self, role: str = "client") -> BrokerAddress:
        return client_address(self.cluster_dir, CLUSTER, role)


@pytest.fixture(scope="module", params=KINDS)
def broker(request, tmp_path_factory) -> Iterator[TlsBroker]:
    """``clusterdeck broker`` with TLS forced on, on loopback; ready once a TLS login
    that trusts the cluster's CA is accepted."""
    home = tmp_path_factory.mktemp(f"tls-home-{request.param}")
    cluster_dir = home / "data" / "clusters" / CLUSTER
    log = home / "broker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*CLI, "broker", "--cluster-dir", str(cluster_dir), "-D", f"cluster.id={CLUSTER}",
             "-D", f"broker.kind={request.param}", "-D", "broker.bind=127.0.0.1",
             "-D", "broker.tls=on"],
            cwd=REPO, env={**os.environ, "CLUSTERDECK_HOME": str(home)}, stdout=output,
            stderr=subprocess.STDOUT)
    running = TlsBroker(request.param, process, cluster_dir, log)
    try:
        wait_for(lambda: process.poll() is not None or read_connection(cluster_dir),
                 START_TIMEOUT, "broker.json")
        assert process.poll() is None, log.read_text(errors="replace")
        wait_ready(running.address(), START_TIMEOUT)
        yield running
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def test_the_connection_file_points_local_processes_at_tls_with_the_cluster_ca(broker):
    address = broker.address()
    assert address.url().startswith("mqtts://cd-tls-alpha-client@127.0.0.1:")
    ca = (broker.cluster_dir / TLS_DIR_NAME / CA_CERT_NAME).read_text()
    assert address.ca_pem == ca


def test_a_client_trusting_the_cluster_ca_connects_and_is_delivered_to(broker):
    address = broker.address("jobmanager")  # the role that may use any cluster topic
    received: queue.Queue[bytes] = queue.Queue()
    subscribed = threading.Event()
    client = make_client(address, f"tls-sub-{time.monotonic_ns()}")
    client.on_message = lambda c, u, m: received.put(m.payload)
    client.on_subscribe = lambda *_: subscribed.set()
    try:
        connect_and_wait(client, address, 5.0)
        topic = f"clusterdeck/{CLUSTER}/test/tls"
        client.subscribe(topic, qos=1)
        assert subscribed.wait(5.0)
        client.publish(topic, b"over tls", qos=1)
        assert received.get(timeout=5.0) == b"over tls"
        assert client.socket().version() in ("TLSv1.2", "TLSv1.3")
    finally:
        client.disconnect()
        client.loop_stop()


def test_a_client_without_the_ca_fails_the_handshake(broker):
    address = broker.address().with_tls(None)  # the system's CAs do not know this one
    client = make_client(address, f"tls-noca-{time.monotonic_ns()}")
    with pytest.raises(BrokerConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        connect_and_wait(client, address, 5.0)


def test_a_plain_tcp_client_gets_no_session(broker):
    tls_address = broker.address()
    plain = BrokerAddress(tls_address.host, tls_address.port, tls_address.username,
                          tls_address.password)
    client = make_client(plain, f"tls-plain-{time.monotonic_ns()}")
    with pytest.raises(BrokerConnectError):
        connect_and_wait(client, plain, 3.0)


# -- a TaskManager on "another machine": only an exported credentials file ---------------------


def _run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, input=stdin, capture_output=True,
                          timeout=60, check=False)


def _start_taskmanager(credentials: str, log: Path,
                       stdin: bytes | None = None) -> subprocess.Popen:
    heartbeats = [f"-D{key}={value}" for key, value in FAST_HEARTBEATS.items()
                  if key.startswith(("heartbeat.", "registration.", "spark."))]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*CLI, "taskmanager", "--credentials", credentials, *heartbeats],
            cwd=REPO, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=output, stderr=subprocess.STDOUT)
    if stdin is not None:
        assert process.stdin is not None
        process.stdin.write(stdin)
        process.stdin.close()
    return process


def _export(cluster_id: str, path: Path) -> dict:
    result = _run_cli("credentials", "export", "--cluster", cluster_id,
                      "--host", "localhost", "-D", "broker.tls=on", "-o", str(path))
    assert result.returncode == 0, result.stderr.decode()
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert "mqtts://localhost:" in path.read_text()
    return json.loads(path.read_text())


@pytest.mark.parametrize("kind", broker_kinds())
def test_a_taskmanager_with_only_a_credentials_file_joins_a_tls_cluster(kind, tmp_path):
    with running_cluster(kind, **{"broker.tls": "on"}) as (cluster, watcher):
        assert cluster.broker_address().tls
        # Each export is the login of one TaskManager: the TaskManager's id comes with it.
        exported = [_export(cluster.cluster_id, tmp_path / f"tm-{n}.json") for n in (1, 2)]
        names = [data["identity"] for data in exported]
        assert names == ["taskmanager-64", "taskmanager-63"]
        passwords = [data["password"] for data in exported]
        assert passwords == [cluster.broker_address("taskmanager", name).password
                             for name in names]

        from_file = _start_taskmanager(str(tmp_path / "tm-1.json"), tmp_path / "file.log")
        from_stdin = _start_taskmanager("-", tmp_path / "stdin.log",
                                        stdin=(tmp_path / "tm-2.json").read_bytes())
        try:
            watcher.wait_registered(names, timeout=60)
            for process, password in zip((from_file, from_stdin), passwords, strict=True):
                assert process.poll() is None
                cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
                assert password.encode() not in cmdline
                assert b"--credentials" in cmdline
        finally:
            for process in (from_file, from_stdin):
                process.terminate()
            for process in (from_file, from_stdin):
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
        assert from_file.returncode == 0, (tmp_path / "file.log").read_text()


def test_a_password_in_broker_still_works_but_is_warned_about(tmp_path):
    # Nothing listens on port 1: the warning comes before any connection attempt.
    result = _run_cli("status", "--cluster", "nobody", "--broker",
                      "mqtt://u:hunter2@127.0.0.1:1")
    err = result.stderr.decode()
    assert "visible to every user" in err and "--credentials" in err
    assert "hunter2" not in err
