"""The main window on real local clusters: processes, slots, failover, restart, attach,
start and stop from a profile, closing."""

from __future__ import annotations

import os
import signal

import pytest

from clusterdeck.core.supervisor import ProcessStatus
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.models.profiles import ClusterProfile, ProfileStore
from clusterdeck.gui.session import SessionMode
from clusterdeck.gui.views.mainwindow import CANCEL, HEADLESS
from tests.integration.clusters import running_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster():
    # A long restart backoff keeps a killed TaskManager down until the restart action.
    with running_cluster("amqtt", **{"supervisor.restart-backoff": 8.0}) as (cluster, _):
        yield cluster


def registered(window: MainWindow, name: str) -> bool:
    row = window.model.row_named(name)
    return row is not None and row.state == "running" and row.registration == "registered"


def test_attached_the_window_shows_the_jobmanager_and_taskmanagers_of_the_overview(
        qtbot, cluster):
    window = MainWindow()
    qtbot.addWidget(window)
    window.session.attach(cluster.config)
    qtbot.waitUntil(lambda: registered(window, "taskmanager-1")
                    and registered(window, "taskmanager-2"), timeout=10_000)
    assert window.session.state.mode is SessionMode.ATTACHED
    assert [r.name for r in window.model.rows()] == ["jobmanager", "taskmanager-1",
                                                    "taskmanager-2"]
    assert not window.actions.restart.isEnabled()
    assert window.actions.stop.text() == "&Detach"
    window.actions.stop.trigger()
    qtbot.waitUntil(lambda: window.session.state.mode is SessionMode.IDLE, timeout=5000)
    assert window.model.rows() == []
    assert all(info.status is ProcessStatus.RUNNING for info in cluster.supervisor.processes())


def test_the_window_follows_a_real_cluster_through_a_kill_and_a_restart(
        qtbot, monkeypatch, cluster):
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    window.session.adopt(cluster, owned=True)
    model = window.model
    qtbot.waitUntil(lambda: registered(window, "taskmanager-1")
                    and registered(window, "taskmanager-2"), timeout=10_000)
    assert [r.name for r in model.rows()] == ["broker", "recorder", "jobmanager",
                                             "taskmanager-1", "taskmanager-2"]
    qtbot.waitUntil(lambda: window.slots_label.text() == "slots: 0/4 used", timeout=5000)
    assert window.taskmanagers_label.text() == "TaskManagers: 2 registered"
    assert [what for *_, what in window.slots.grid.cells()] == ["free"] * 4

    killed = model.row_named("taskmanager-1").pid
    os.kill(killed, signal.SIGKILL)
    qtbot.waitUntil(lambda: model.row_named("taskmanager-1").state == "restarting"
                    and model.row_named("taskmanager-1").registration == "lost", timeout=2000)
    assert "taskmanager-1 lost" in model.row_named("taskmanager-1").lost_cause
    assert window.taskmanagers_label.text() == "TaskManagers: 1 registered, 1 lost"

    assert window.cluster_panel.select_process("taskmanager-1")
    assert window.actions.restart_process.isEnabled()
    window.actions.restart_process.trigger()
    qtbot.waitUntil(lambda: registered(window, "taskmanager-1")
                    and model.row_named("taskmanager-1").pid not in (None, killed),
                    timeout=20_000)
    assert cluster.supervisor.info("taskmanager-1").status is ProcessStatus.RUNNING
    qtbot.waitUntil(lambda: window.slots_label.text() == "slots: 0/4 used", timeout=5000)

    # The Logs view follows the live recording: both starts of taskmanager-1 are in it.
    window.logs_dock.raise_()
    window.logs.process.addItem("taskmanager-1")
    window.logs.process.setCurrentText("taskmanager-1")
    qtbot.waitUntil(lambda: {x.process for x in window.logs.lines} == {"taskmanager-1"}
                    and sum("[supervisor] started pid" in x.line
                            for x in window.logs.lines) >= 2, timeout=15_000)

    answers = iter([CANCEL, HEADLESS])
    monkeypatch.setattr(window, "ask_close_action", lambda _cluster_id: next(answers, HEADLESS))
    window.close()
    assert window.isVisible(), "cancel keeps the window open"
    with qtbot.waitSignal(window.closed, timeout=2000) as closed:
        window.close()
    assert closed.args == [HEADLESS]
    assert all(info.status is ProcessStatus.RUNNING
               for info in cluster.supervisor.processes()), "headless leaves it running"
    client = window.bridge.disconnect_client()
    if client is not None:
        client.close()
    window.bridge.close()


def test_start_and_stop_a_cluster_from_a_profile(qtbot, tmp_path):
    store = ProfileStore(tmp_path / "profiles.json")
    store.put(ClusterProfile("gui-start-stop", taskmanagers=1, slots=3, broker_kind="amqtt"))
    window = MainWindow(store=store)
    qtbot.addWidget(window)
    window.cluster_panel.profiles.choice.setCurrentText("gui-start-stop")
    window.actions.start.trigger()
    qtbot.waitUntil(lambda: window.session.state.mode is SessionMode.RUNNING
                    and registered(window, "taskmanager-1"), timeout=30_000)
    qtbot.waitUntil(lambda: window.slots_label.text() == "slots: 0/3 used", timeout=5000)
    assert window.cluster_panel.profiles.isHidden()
    cluster = window.session.cluster
    window.actions.stop.trigger()
    qtbot.waitUntil(lambda: window.session.state.mode is SessionMode.IDLE, timeout=20_000)
    assert window.model.rows() == []
    assert all(info.status is ProcessStatus.STOPPED for info in cluster.supervisor.processes())
    assert window.slots_label.text() == "slots: \u2013"
