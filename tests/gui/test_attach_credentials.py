"""Attaching the window with a credentials file (issue 38): ``clusterdeck gui
--attach-credentials FILE`` and the attach dialog's "From a credentials file" choice. The
cluster's broker speaks TLS; the window learns its address, login and CA from the file
only."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import WatchOnlyError
from clusterdeck.gui.app import _begin, build_parser
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.session import SessionMode
from tests.gui.windowdriver import leave
from tests.integration.clusters import running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def exported(cluster_id: str, role: str, folder: Path) -> Path:
    path = folder / f"{role}.json"
    done = subprocess.run(
        [sys.executable, "-m", "clusterdeck.core.cli", "credentials", "export", "--cluster",
         cluster_id, "--role", role, "--host", "127.0.0.1", "-o", str(path)],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    folder = tmp_path_factory.mktemp("attach-credentials")
    with running_cluster("auto", **{"taskmanager.count": 1, "broker.tls": "on"}
                         ) as (local, _watcher):
        yield {role: exported(local.cluster_id, role, folder)
               for role in ("client", "observer", "taskmanager")}


@pytest.fixture
def window(qtbot) -> Iterator[MainWindow]:
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    yield window
    leave(window)


def test_a_client_file_attaches_the_window_over_tls(qtbot, window, files) -> None:
    notices: list[str] = []
    window.session.notice.connect(notices.append)
    _begin(window, build_parser().parse_args(["--attach-credentials", str(files["client"])]))
    qtbot.waitUntil(lambda: window.session.state.mode is SessionMode.ATTACHED, timeout=30_000)
    qtbot.waitUntil(lambda: (row := window.model.row_named("taskmanager-1")) is not None
                    and row.registration == "registered", timeout=15_000)
    assert window.bridge.client is not None
    assert window.bridge.client.service.address.tls
    assert any("a client login reads no one else's messages" in n for n in notices)


def test_an_observer_file_attaches_from_the_dialogs_choice(qtbot, window, files) -> None:
    window.attach_from_credentials(str(files["observer"]))
    qtbot.waitUntil(lambda: window.session.state.mode is SessionMode.ATTACHED, timeout=30_000)
    client = window.bridge.client
    assert client is not None and client.observing
    with pytest.raises(WatchOnlyError, match="the observer login may only watch"):
        client.cancel("job-1")  # at once, not after an ask's timeout


def test_a_file_that_is_no_clients_login_is_refused_with_a_notice(window, files, tmp_path,
                                                                  monkeypatch) -> None:
    notices: list[str] = []
    monkeypatch.setattr(window, "notice", notices.append)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{")
    for path in (files["taskmanager"], garbage):
        window.attach_from_credentials(str(path))
    assert window.session.state.mode is SessionMode.IDLE
    assert notices[0].startswith("cannot attach: ")
    assert "holds the taskmanager login; attaching needs a client or observer one" \
        in notices[0]
    assert "not a credentials file (not JSON" in notices[1]
