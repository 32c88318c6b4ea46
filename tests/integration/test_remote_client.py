"""A client on another machine (issue 38): ``submit``, ``status``, ``list`` and ``result``
given only a credentials file from ``clusterdeck credentials export``.

The cluster's broker listens on every interface with TLS (``broker.bind = 0.0.0.0``, as
docs/distributed.md says to run it); the client runs the real CLI in a network namespace
of its own on a bridge (tests/integration/netns.py), reaching the broker at this
machine's bridge address, which the broker's certificate names. The client's home folder
is empty: no cluster folder tells it where the broker is or which login to use.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterdeck.core.config import paths
from tests.integration.clusters import running_cluster
from tests.integration.netns import Machine, bridged_machines

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLI = [sys.executable, "-m", "clusterdeck.core.cli"]
WORDCOUNT = Path(__file__).resolve().parents[2] / "examples" / "wordcount.py"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


@dataclass
class RemoteClient:
    """The machine the client runs on, its own empty home, and the files exported to it."""

    cluster_id: str
    machine: Machine
    home: Path
    folder: Path

    def clusterdeck(self, *arguments: str, timeout: float = 120
                    ) -> subprocess.CompletedProcess[str]:
        return self.machine.run(["env", f"{paths.HOME_ENV}={self.home}", *CLI, *arguments],
                                timeout=timeout)

    def credentials(self, role: str) -> Path:
        return self.folder / f"{role}.json"


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteClient]:
    folder = tmp_path_factory.mktemp("remote-client")
    with bridged_machines(1) as network, \
            running_cluster("auto", **{"taskmanager.count": 1, "broker.bind": "0.0.0.0"}
                            ) as (local, _watcher):
        for role in ("client", "observer"):
            exported = subprocess.run(
                [*CLI, "credentials", "export", "--cluster", local.cluster_id, "--role", role,
                 "--host", network.gateway, "-o", str(folder / f"{role}.json")],
                capture_output=True, text=True, timeout=60, check=False)
            assert exported.returncode == 0, exported.stderr
        home = folder / "client-home"
        home.mkdir()
        yield RemoteClient(local.cluster_id, network.machines[0], home, folder)


def test_the_exported_file_reaches_the_broker_over_tls_at_a_non_loopback_address(
        remote: RemoteClient) -> None:
    data = json.loads(remote.credentials("client").read_text())
    assert data["broker_url"].startswith("mqtts://")
    assert not data["broker_url"].startswith("mqtts://127.")
    assert "BEGIN CERTIFICATE" in data["ca_certificate"]


def test_a_client_elsewhere_submits_and_reads_the_exact_result(
        remote: RemoteClient, tmp_path: Path) -> None:
    text = tmp_path / "words.txt"
    lines = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(i % 4 + 1))
             for i in range(300)]
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = dict(collections.Counter(word for line in lines for word in line.split()))
    login = str(remote.credentials("client"))

    submitted = remote.clusterdeck("submit", "--credentials", login, str(WORDCOUNT), "--",
                                   str(text), "2", timeout=240)
    assert submitted.returncode == 0, submitted.stderr
    assert _counts(submitted.stdout) == expected
    found = re.search(r"job (\S+) submitted", submitted.stderr)
    assert found is not None, submitted.stderr
    job_id = found.group(1)

    listed = remote.clusterdeck("list", "--credentials", login, "--json")
    assert listed.returncode == 0, listed.stderr
    assert {job["job_id"]: job["status"] for job in json.loads(listed.stdout)}[job_id] \
        == "FINISHED"
    result = remote.clusterdeck("result", job_id, "--credentials", login)
    assert result.returncode == 0, result.stderr
    assert _counts(result.stdout) == expected
    status = remote.clusterdeck("status", "--credentials", login, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["cluster_id"] == remote.cluster_id


def test_an_observer_elsewhere_watches_but_is_told_it_may_not_submit(
        remote: RemoteClient) -> None:
    login = str(remote.credentials("observer"))
    status = remote.clusterdeck("status", "--credentials", login, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["taskmanagers"][0]["id"] == "taskmanager-1"
    listed = remote.clusterdeck("list", "--credentials", login)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("JOB ")
    refused = remote.clusterdeck("submit", "--credentials", login, str(WORDCOUNT), timeout=30)
    assert refused.returncode == 2
    assert "holds the observer login, which may only watch (status, list); `submit` " \
        "needs a client login" in refused.stderr


def test_a_login_the_broker_refuses_is_said_so_at_once(remote: RemoteClient) -> None:
    data = json.loads(remote.credentials("client").read_text())
    wrong = remote.folder / "wrong-password.json"
    wrong.write_text(json.dumps({**data, "password": "not-the-password"}))
    wrong.chmod(0o600)
    refused = remote.clusterdeck("status", "--credentials", str(wrong), timeout=30)
    assert refused.returncode == 5, refused.stderr
    assert "the broker refused the client login" in refused.stderr


def test_a_malformed_file_is_refused_before_connecting(remote: RemoteClient) -> None:
    malformed = remote.folder / "malformed.json"
    malformed.write_text('{"format": "clusterdeck-credentials", "version": 1, "role": 7}')
    refused = remote.clusterdeck("list", "--credentials", str(malformed), timeout=30)
    assert refused.returncode == 2
    assert "the credentials file's role is not a string" in refused.stderr


def _counts(stdout: str) -> dict[str, int]:
    return {word: count for word, count in map(json.loads, stdout.splitlines())}
