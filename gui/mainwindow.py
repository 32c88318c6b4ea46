"""The main window: menus, toolbar, status bar and dockable panels around the jobs view.

It wires the parts and owns nothing of the cluster: the bridge's signals feed the models
and views, the actions call the session. The dock layout and the window geometry are
kept with QSettings in an ini file under the config dir (so tests, which point
CLUSTERDECK_HOME elsewhere, never touch the user's settings). GUI thread only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings, Qt, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QToolBar,
    QWidget,
)

from core import __version__, paths
from core import protocol as p
from gui.actions import create_actions
from gui.bridge import ClusterBridge
from gui.clusterpanel import ClusterPanel
from gui.jobsview import JobsView
from gui.logview import LogTail
from gui.processmodel import ProcessTableModel
from gui.profiles import ProfileError, ProfileStore
from gui.session import ClusterSession, SessionMode, SessionState, attach_config, known_clusters
from gui.slotsview import SlotsView

ORGANISATION = "clusterdeck"
APPLICATION = "clusterdeck"
_SETTINGS_VERSION = 1

STOP = "stop"
HEADLESS = "headless"
CANCEL = "cancel"


def window_settings() -> QSettings:
    """The GUI's settings file, under the config dir (CLUSTERDECK_HOME in tests)."""
    return QSettings(str(paths.config_dir() / "gui.ini"), QSettings.Format.IniFormat)


class MainWindow(QMainWindow):
    """The whole app in one window."""

    closed = Signal(str)
    """Emitted once the window is closed: ``stop`` (the cluster, if any, is stopped) or
    ``headless`` (a local cluster keeps running in this process without a window)."""
    job_file_dropped = Signal(str)
    """A job file was dropped on the window (submission arrives with the job protocol)."""

    def __init__(self, bridge: ClusterBridge | None = None,
                 session: ClusterSession | None = None,
                 store: ProfileStore | None = None) -> None:
        super().__init__()
        self.setWindowTitle("clusterdeck")
        self.setObjectName("clusterdeck-main")
        self.setAcceptDrops(True)
        self.bridge = bridge or ClusterBridge(self)
        self.session = session or ClusterSession(self.bridge, self)
        self.actions = create_actions(self)
        self.model = ProcessTableModel(self)
        self.jobs = JobsView()
        self.cluster_panel = ClusterPanel(self.model, self.actions, store or ProfileStore())
        self.slots = SlotsView()
        self.log_docks: dict[str, QDockWidget] = {}
        self.setCentralWidget(self.jobs)
        self.cluster_dock = self._dock("Cluster", "cluster", self.cluster_panel,
                                       Qt.DockWidgetArea.LeftDockWidgetArea)
        self.slots_dock = self._dock("Slots", "slots", self.slots,
                                     Qt.DockWidgetArea.LeftDockWidgetArea)
        self.splitDockWidget(self.cluster_dock, self.slots_dock, Qt.Orientation.Vertical)
        self._status_labels()
        self._menus_and_toolbar()
        self._wire()
        self.resize(1400, 860)
        self.resizeDocks([self.cluster_dock], [560], Qt.Orientation.Horizontal)
        self.resizeDocks([self.cluster_dock, self.slots_dock], [420, 440],
                         Qt.Orientation.Vertical)
        self._default_state = self.saveState(_SETTINGS_VERSION)
        self._restore_layout()
        self._update_actions()
        if self.cluster_panel.profiles.store.problem:
            self.statusBar().showMessage(self.cluster_panel.profiles.store.problem, 10000)

    # -- construction -------------------------------------------------------------------------

    def _dock(self, title: str, name: str, widget: QWidget,
              area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock-{name}")
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _status_labels(self) -> None:
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
        cluster = self.menuBar().addMenu("&Cluster")
        cluster.addActions([a.start, a.stop, a.restart, a.attach])
        cluster.addSeparator()
        cluster.addAction(a.add_taskmanager)
        cluster.addSeparator()
        cluster.addAction(a.quit)
        process = self.menuBar().addMenu("&Process")
        process.addActions([a.show_log, a.restart_process, a.kill_process])
        view = self.menuBar().addMenu("&View")
        view.addActions([self.cluster_dock.toggleViewAction(),
                         self.slots_dock.toggleViewAction()])
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
        toolbar.addActions([a.show_log, a.restart_process, a.kill_process])
        toolbar.addSeparator()
        toolbar.addAction(a.fit_graph)
        self.addToolBar(toolbar)

    def _wire(self) -> None:
        bridge, a = self.bridge, self.actions
        bridge.overview_changed.connect(self._on_overview)
        bridge.processes_changed.connect(self.model.update_processes)
        bridge.resources_changed.connect(self.model.set_resources)
        bridge.job_changed.connect(self.jobs.set_job)
        bridge.job_changed.connect(self.slots.set_job)
        bridge.cluster_events.connect(self._on_cluster_events)
        bridge.broker_changed.connect(self._on_broker)
        bridge.cleared.connect(self._on_cleared)
        self.session.state_changed.connect(self._on_session)
        self.session.notice.connect(self._on_notice)
        self.model.dataChanged.connect(self._update_actions)
        self.model.modelReset.connect(self._update_actions)
        self.cluster_panel.table.selectionModel().selectionChanged.connect(self._update_actions)
        self.cluster_panel.process_activated.connect(self.show_log)
        a.start.triggered.connect(self.start_cluster)
        a.stop.triggered.connect(lambda: self.session.stop())
        a.restart.triggered.connect(self.session.restart)
        a.attach.triggered.connect(self.attach_cluster)
        a.add_taskmanager.triggered.connect(self.session.add_taskmanager)
        a.quit.triggered.connect(self.close)
        a.show_log.triggered.connect(lambda: self._with_selected(self.show_log))
        a.restart_process.triggered.connect(
            lambda: self._with_selected(self.session.restart_process))
        a.kill_process.triggered.connect(self.kill_selected)
        a.zoom_in.triggered.connect(lambda: self.jobs.graph.zoom_by(1.25))
        a.zoom_out.triggered.connect(lambda: self.jobs.graph.zoom_by(0.8))
        a.fit_graph.triggered.connect(self.jobs.graph.fit)
        a.reset_layout.triggered.connect(self.reset_layout)
        a.about.triggered.connect(self._about)

    # -- commands -----------------------------------------------------------------------------

    def start_cluster(self) -> None:
        try:
            profile = self.cluster_panel.profiles.save()
            config = profile.to_config()
        except (ProfileError, ValueError) as error:
            self._on_notice(f"cannot start: {error}")
            return
        self.session.start(config)

    def attach_cluster(self) -> None:
        clusters = known_clusters() or ["default"]
        cluster_id, ok = QInputDialog.getItem(
            self, "Attach to a running cluster", "Cluster id (started with clusterdeck up "
            "or by another window):", clusters, 0, True)
        if ok and cluster_id.strip():
            try:
                config = attach_config(cluster_id.strip())
            except ValueError as error:
                self._on_notice(f"cannot attach: {error}")
                return
            self.session.attach(config)

    def kill_selected(self) -> None:
        row = self.cluster_panel.selected_row()
        if row is not None:
            self.session.kill_process(row.name, row.pid, row.host)

    def show_log(self, name: str) -> None:
        """Open (or raise) a dock following the process's log, tabbed with the others."""
        row = self.model.row_named(name)
        if row is None or row.log_path is None:
            self._on_notice(f"no log of {name} is known here")
            return
        dock = self.log_docks.get(name)
        if dock is None:
            dock = self._dock(f"Log: {name}", f"log-{name}", LogTail(Path(row.log_path)),
                              Qt.DockWidgetArea.BottomDockWidgetArea)
            dock.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dock.destroyed.connect(lambda *_: self.log_docks.pop(name, None))
            if self.log_docks:
                self.tabifyDockWidget(next(iter(self.log_docks.values())), dock)
            self.log_docks[name] = dock
        dock.show()
        dock.raise_()

    def reset_layout(self) -> None:
        self.restoreState(self._default_state, _SETTINGS_VERSION)
        for dock in (self.cluster_dock, self.slots_dock):
            dock.show()

    def _with_selected(self, command: Any) -> None:
        row = self.cluster_panel.selected_row()
        if row is not None:
            command(row.name)

    def _about(self) -> None:
        QMessageBox.about(self, "About clusterdeck",
                          f"<b>clusterdeck {__version__}</b><p>A desktop cluster manager: a "
                          "Flink-style runtime over MQTT whose tasks run on PySpark.</p>")

    # -- what the bridge and the session say --------------------------------------------------

    def _on_overview(self, overview: p.ClusterOverview | None) -> None:
        self.model.set_overview(overview)
        self.slots.set_overview(overview)
        if overview is None:
            self.taskmanagers_label.setText("TaskManagers: \u2013")
            self.slots_label.setText("slots: \u2013")
            return
        live = sum(tm.state is p.TaskManagerState.REGISTERED for tm in overview.taskmanagers)
        lost = len(overview.taskmanagers) - live
        self.taskmanagers_label.setText(f"TaskManagers: {live} registered"
                                        + (f", {lost} lost" if lost else ""))
        used = overview.slots_total - overview.slots_free
        self.slots_label.setText(f"slots: {used}/{overview.slots_total} used")

    def _on_cluster_events(self, events: list[Any]) -> None:
        for event in events:
            if isinstance(event, p.TaskManagerLost):
                self.statusBar().showMessage(f"{event.cause} ({event.detected_by})", 8000)
            elif isinstance(event, p.TaskManagerRegistered):
                self.statusBar().showMessage(f"TaskManager {event.info.id} registered "
                                             f"({event.info.slots_total} slots)", 5000)

    def _on_broker(self, state: str) -> None:
        kind = self.session.state.broker_kind
        text = {"none": "broker: \u2013", "connected": f"broker: connected ({kind})",
                "disconnected": f"broker: DISCONNECTED ({kind})"}[state]
        self.broker_label.setText(text)
        self.broker_label.setStyleSheet("color: #b03a36; font-weight: bold;"
                                        if state == "disconnected" else "")

    def _on_cleared(self) -> None:
        self.model.clear()
        self.slots.clear()
        self.jobs.clear()
        self._on_overview(None)
        for dock in list(self.log_docks.values()):
            dock.close()

    def _on_session(self, state: SessionState) -> None:
        self.cluster_panel.set_session_state(state)
        self.session_label.setText(f"{state.cluster_id}: {state.mode}" if state.active
                                   else "no cluster")
        self.setWindowTitle(f"clusterdeck \u2014 {state.cluster_id}" if state.active
                            else "clusterdeck")
        self._update_actions()

    def _on_notice(self, message: str) -> None:
        self.statusBar().showMessage(message, 10000)
        self.cluster_panel.show_notice(message)

    def _update_actions(self) -> None:
        state, a = self.session.state, self.actions
        a.start.setEnabled(not state.active)
        a.attach.setEnabled(not state.active)
        a.stop.setEnabled(state.active and state.mode is not SessionMode.STOPPING)
        a.stop.setText("&Detach" if state.mode in (SessionMode.ATTACHING, SessionMode.ATTACHED)
                       else "S&top")
        a.restart.setEnabled(state.supervised and state.mode is SessionMode.RUNNING)
        a.add_taskmanager.setEnabled(state.supervised and state.mode is SessionMode.RUNNING)
        row = self.cluster_panel.selected_row()
        a.show_log.setEnabled(row is not None and row.log_path is not None)
        a.restart_process.setEnabled(row is not None and row.supervised
                                     and state.mode is not SessionMode.STOPPING)
        a.kill_process.setEnabled(row is not None and row.pid is not None)

    # -- layout and closing -------------------------------------------------------------------

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

    def ask_close_action(self) -> str:
        """Ask what becomes of a running local cluster: STOP, HEADLESS or CANCEL."""
        box = QMessageBox(QMessageBox.Icon.Question, "Close clusterdeck",
                          f"Cluster {self.session.state.cluster_id} is running.", parent=self)
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

    def closeEvent(self, event: QCloseEvent) -> None:
        state = self.session.state
        choice = STOP
        if state.owned and state.mode in (SessionMode.STARTING, SessionMode.RUNNING):
            choice = self.ask_close_action()
        if choice == CANCEL:
            event.ignore()
            return
        self.save_layout()
        if choice == STOP:
            self.session.shutdown()
        event.accept()
        self.closed.emit(choice)

    # -- dropping job files -------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(url.toLocalFile().endswith(".py") for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        for url in event.mimeData().urls():
            if url.toLocalFile().endswith(".py"):
                self.job_file_dropped.emit(url.toLocalFile())
                self.statusBar().showMessage(f"job file {Path(url.toLocalFile()).name}: "
                                             "submission from the window is not wired yet",
                                             8000)
        event.acceptProposedAction()
