"""The main window's layout: menus, toolbar, status bar and dockable panels around the
ExecutionGraph view.

It lays out widgets and shows models; it does not know the cluster. The controller
(gui/controllers/mainwindow.py) builds the services, connects the signals and decides what
the commands do. The dock layout and the window geometry are kept with QSettings in an
ini file under the config dir (so tests, which point CLUSTERDECK_HOME elsewhere, never
touch the user's settings). GUI thread only.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, Qt, Signal
from PySide6.QtGui import QAction, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QLabel,
    QMainWindow,
    QMessageBox,
    QToolBar,
    QWidget,
)

from clusterdeck.core import __version__
from clusterdeck.core.config import paths
from clusterdeck.gui.models.checkpointsmodel import CheckpointsModel
from clusterdeck.gui.models.metrics import MetricsStore
from clusterdeck.gui.models.processmodel import ProcessTableModel
from clusterdeck.gui.models.profiles import ProfileStore
from clusterdeck.gui.models.recorder import JobRecorder
from clusterdeck.gui.views.actions import create_actions
from clusterdeck.gui.views.checkpointsview import CheckpointsView
from clusterdeck.gui.views.clusterpanel import ClusterPanel
from clusterdeck.gui.views.failuresview import FailuresView
from clusterdeck.gui.views.joblist import JobListModel, JobListView
from clusterdeck.gui.views.jobsview import JobsView
from clusterdeck.gui.views.logsearch import LogSearchView, Runner
from clusterdeck.gui.views.logview import LogTail
from clusterdeck.gui.views.messagesview import MessagesView
from clusterdeck.gui.views.plots import ProcessPlot
from clusterdeck.gui.views.resultview import ResultView
from clusterdeck.gui.views.slotsview import SlotsView

ORGANISATION = "clusterdeck"
APPLICATION = "clusterdeck"
_SETTINGS_VERSION = 5  # 3: the Logs dock; 4: the Load dock; 5: the Checkpoints dock

STOP = "stop"
HEADLESS = "headless"
CANCEL = "cancel"

NOTICE_MS = 10000
"""How long a notice stays in the status bar."""


def window_settings() -> QSettings:
    """The GUI's settings file, under the config dir (CLUSTERDECK_HOME in tests)."""
    return QSettings(str(paths.config_dir() / "gui.ini"), QSettings.Format.IniFormat)


class MainWindowView(QMainWindow):
    """The whole app in one window: its widgets, docks, menus and layout."""

    files_dropped = Signal(list)
    """Local files (``list[str]``) were dropped on the window: jobs or recordings."""

    def __init__(self, recorder: JobRecorder, store: ProfileStore,
                 job_files: Mapping[str, Path], run: Runner) -> None:
        """``job_files``: the submission flow's job files (the failures view shows their
        lines); ``run``: the job worker that runs log searches off the GUI thread."""
        super().__init__()
        self.setWindowTitle("clusterdeck")
        self.setObjectName("clusterdeck-main")
        self.setAcceptDrops(True)
        self.actions = create_actions(self)
        self.model = ProcessTableModel(self)
        self.metrics = MetricsStore()
        self.jobs = JobsView(recorder, self.metrics)
        self.load = ProcessPlot()
        self.cluster_panel = ClusterPanel(self.model, self.actions, store)
        self.slots = SlotsView()
        self.job_model = JobListModel(self)
        self.job_list = JobListView(self.job_model, self.actions.submit, self.actions.cancel_job,
                                    self.actions.compare_jobs, job_actions=self._job_actions())
        self.result = ResultView()
        self.failures = FailuresView(job_files)
        self.checkpoints_model = CheckpointsModel(self)
        self.checkpoints = CheckpointsView(self.checkpoints_model)
        self.messages = MessagesView()
        self.logs = LogSearchView(run)
        self.log_docks: dict[str, QDockWidget] = {}
        self.setCentralWidget(self.jobs)
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.cluster_dock = self._dock("Cluster", "cluster", self.cluster_panel,
                                       Qt.DockWidgetArea.LeftDockWidgetArea)
        self.slots_dock = self._dock("Slots", "slots", self.slots,
                                     Qt.DockWidgetArea.LeftDockWidgetArea)
        self.splitDockWidget(self.cluster_dock, self.slots_dock, Qt.Orientation.Vertical)
        bottom = Qt.DockWidgetArea.BottomDockWidgetArea
        self.jobs_dock = self._dock("Jobs", "jobs", self.job_list, bottom)
        self.result_dock = self._dock("Result", "result", self.result, bottom)
        self.failures_dock = self._dock("Failures", "failures", self.failures, bottom)
        self.checkpoints_dock = self._dock("Checkpoints", "checkpoints", self.checkpoints,
                                           bottom)
        self.messages_dock = self._dock("Messages", "messages", self.messages, bottom)
        self.logs_dock = self._dock("Logs", "logs", self.logs, bottom)
        self.load_dock = self._dock("Load", "load", self.load, bottom)
        for dock in (self.result_dock, self.failures_dock, self.checkpoints_dock,
                     self.messages_dock, self.logs_dock, self.load_dock):
            self.tabifyDockWidget(self.jobs_dock, dock)
        self.jobs_dock.raise_()
        self._status_labels()
        self._menus_and_toolbar()
        self.failures_dock.visibilityChanged.connect(self.failures.set_on_screen)
        self.messages_dock.visibilityChanged.connect(self.messages.set_on_screen)
        self.resize(1400, 860)
        self.resizeDocks([self.cluster_dock], [520], Qt.Orientation.Horizontal)
        self.resizeDocks([self.cluster_dock, self.slots_dock], [400, 460],
                         Qt.Orientation.Vertical)
        self.resizeDocks([self.jobs_dock], [300], Qt.Orientation.Vertical)
        self._default_state = self.saveState(_SETTINGS_VERSION)
        self._restore_layout()
        if store.problem:
            self.show_notice(store.problem)

    # -- construction -------------------------------------------------------------------------

    def _dock(self, title: str, name: str, widget: QWidget,
              area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock-{name}")
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _job_actions(self) -> list[QAction]:
        a = self.actions
        return [a.cancel_job, a.savepoint_job, a.stop_job_savepoint, a.stop_job,
                a.inspect_state]

    def _status_labels(self) -> None:
        self.savepoint_label = QLabel()  # while a savepoint asked for here is in progress
        self.savepoint_label.setContentsMargins(8, 0, 8, 0)
        self.savepoint_label.hide()
        self.statusBar().addPermanentWidget(self.savepoint_label)
        self.session_label = QLabel("no cluster")
        self.broker_label = QLabel("broker: \u2013")
        self.taskmanagers_label = QLabel("TaskManagers: \u2013")
        self.slots_label = QLabel("slots: \u2013")
        for label in (self.session_label, self.broker_label, self.taskmanagers_label,
                      self.slots_label):
            label.setContentsMargins(8, 0, 8, 0)
            self.statusBar().addPermanentWidget(label)

    def _menus_and_toolbar(self) -> None:
        a = self.actions
        file = self.menuBar().addMenu("&File")
        file.addAction(a.submit)
        file.addActions(self._job_actions())
        file.addAction(a.compare_jobs)
        file.addSeparator()
        file.addAction(a.open_recording)
        self.recent_menu = file.addMenu("Recent Recordings")
        file.addSeparator()
        file.addAction(a.quit)
        cluster = self.menuBar().addMenu("&Cluster")
        cluster.addActions([a.start, a.stop, a.restart, a.attach])
        cluster.addSeparator()
        cluster.addAction(a.add_taskmanager)
        process = self.menuBar().addMenu("&Process")
        process.addActions([a.show_log, a.restart_process, a.kill_process])
        process.addSeparator()
        process.addActions([a.thread_dump, a.flame_graph, a.spark_ui])
        view = self.menuBar().addMenu("&View")
        view.addActions([dock.toggleViewAction() for dock in (
            self.cluster_dock, self.slots_dock, self.jobs_dock, self.result_dock,
            self.failures_dock, self.checkpoints_dock, self.messages_dock, self.logs_dock,
            self.load_dock)])
        view.addSeparator()
        view.addActions([a.zoom_in, a.zoom_out, a.fit_graph])
        view.addSeparator()
        view.addAction(a.reset_layout)
        self.menuBar().addMenu("&Help").addAction(a.about)
        toolbar = QToolBar("Main toolbar", self)
        toolbar.setObjectName("toolbar-main")
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        toolbar.addActions([a.start, a.stop, a.restart, a.attach])
        toolbar.addSeparator()
        toolbar.addActions([a.submit, a.cancel_job, a.savepoint_job])
        toolbar.addSeparator()
        toolbar.addActions([a.show_log, a.restart_process, a.kill_process])
        toolbar.addSeparator()
        toolbar.addAction(a.fit_graph)
        self.addToolBar(toolbar)

    # -- what the window shows ----------------------------------------------------------------

    def show_notice(self, message: str) -> None:
        """A line in the status bar for a while."""
        self.statusBar().showMessage(message, NOTICE_MS)

    def show_log_dock(self, name: str, path: Path) -> None:
        """Open (or raise) a dock following a process's log, tabbed with the others."""
        dock = self.log_docks.get(name)
        if dock is None:
            dock = self._dock(f"Log: {name}", f"log-{name}", LogTail(path),
                              Qt.DockWidgetArea.BottomDockWidgetArea)
            dock.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dock.destroyed.connect(functools.partial(self._forget_log_dock, name))
            if self.log_docks:
                self.tabifyDockWidget(next(iter(self.log_docks.values())), dock)
            self.log_docks[name] = dock
        dock.show()
        dock.raise_()

    def _forget_log_dock(self, name: str, _dock: object = None) -> None:
        """A log dock was closed, and so deleted."""
        self.log_docks.pop(name, None)

    def close_log_docks(self) -> None:
        for dock in list(self.log_docks.values()):
            dock.close()

    def show_attempt_logs(self, attempt_id: str) -> None:
        """The Logs dock raised, showing the lines of one attempt."""
        self.logs_dock.show()
        self.logs_dock.raise_()
        self.logs.show_lines_of(attempt_id)

    def show_about(self) -> None:
        QMessageBox.about(self, "About clusterdeck",
                          f"<b>clusterdeck {__version__}</b><p>A desktop cluster manager: a "
                          "Flink-style runtime over MQTT whose tasks run on PySpark.</p>")

    def ask_close_action(self, cluster_id: str) -> str:
        """Ask what becomes of a running local cluster: STOP, HEADLESS or CANCEL."""
        box = QMessageBox(QMessageBox.Icon.Question, "Close clusterdeck",
                          f"Cluster {cluster_id} is running.", parent=self)
        box.setInformativeText("Stop it, or leave it running headless? A headless cluster "
                               "keeps running in this process until it gets Ctrl-C or "
                               "SIGTERM; attach to it again from a new window.")
        stop = box.addButton("Stop cluster", QMessageBox.ButtonRole.DestructiveRole)
        headless = box.addButton("Leave running headless", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(stop)
        box.exec()
        clicked = box.clickedButton()
        return STOP if clicked is stop else HEADLESS if clicked is headless else CANCEL

    # -- layout -------------------------------------------------------------------------------

    def _restore_layout(self) -> None:
        settings = window_settings()
        geometry = settings.value("window/geometry")
        state = settings.value("window/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if isinstance(state, QByteArray):
            self.restoreState(state, _SETTINGS_VERSION)

    def save_layout(self) -> None:
        settings = window_settings()
        settings.setValue("window/geometry", self.saveGeometry())
        settings.setValue("window/state", self.saveState(_SETTINGS_VERSION))
        settings.sync()

    def reset_layout(self) -> None:
        self.restoreState(self._default_state, _SETTINGS_VERSION)
        for dock in (self.cluster_dock, self.slots_dock, self.jobs_dock, self.result_dock,
                     self.failures_dock, self.checkpoints_dock, self.messages_dock):
            dock.show()
        self.jobs_dock.raise_()

    # -- dropping files -----------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        """Any local file is welcome: one that is not a job is refused with the reason."""
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        dropped = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if not dropped:
            event.ignore()
            return
        self.files_dropped.emit(dropped)
        event.acceptProposedAction()
