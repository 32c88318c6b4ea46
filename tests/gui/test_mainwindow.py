"""The main window without a cluster: settings location, layout, logs, actions."""

from __future__ import annotations

import os
from pathlib import Path

from clusterdeck.core.config import paths
from clusterdeck.core.supervisor import ProcessInfo, ProcessStatus
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.views.logview import LogTail
from clusterdeck.gui.views.mainwindow import window_settings


def test_the_layout_is_saved_under_the_config_dir_not_the_users_home(qtbot):
    window = MainWindow()
    qtbot.addWidget(window)
    window.slots_dock.hide()
    window.save_layout()
    settings = Path(window_settings().fileName())
    assert settings == paths.config_dir() / "gui.ini"
    assert str(settings).startswith(os.environ["CLUSTERDECK_HOME"])
    again = MainWindow()
    qtbot.addWidget(again)
    assert again.slots_dock.isHidden()
    again.reset_layout()
    assert not again.slots_dock.isHidden()
    again.save_layout()


def test_without_a_cluster_only_start_and_attach_are_offered(qtbot):
    window = MainWindow()
    qtbot.addWidget(window)
    enabled = {a.text() for a in window.actions.all() if a.isEnabled()}
    assert {"&Start", "&Attach\u2026"} <= enabled
    assert not ({"S&top", "&Restart", "Show &Log", "Restart &Process",
                 "&Kill Process (SIGKILL)"} & enabled)


def test_a_process_log_opens_in_a_dock_that_follows_the_file(qtbot, tmp_path):
    log = tmp_path / "taskmanager-1.log"
    log.write_text("first line\n")
    window = MainWindow()
    qtbot.addWidget(window)
    window.model.update_processes([ProcessInfo("taskmanager-1", "taskmanager", 12,
                                               ProcessStatus.RUNNING, 1.0, 0, None, log)])
    assert window.cluster_panel.select_process("taskmanager-1")
    assert window.actions.show_log.isEnabled()
    window.actions.show_log.trigger()
    tail = window.log_docks["taskmanager-1"].widget()
    assert isinstance(tail, LogTail)
    assert tail.text() == "first line"
    with log.open("a") as file:
        file.write("second line\npartial")
    qtbot.waitUntil(lambda: tail.text() == "first line\nsecond line", timeout=2000)
