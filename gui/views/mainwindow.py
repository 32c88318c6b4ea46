"""The main window: menus, toolbar, status bar and dockable panels around the
ExecutionGraph view.

It wires the parts and owns nothing of the cluster: the bridge's signals feed the models
and views, the actions call the session, the job commands and the submission flow. One
job is "current": chosen in the job list or the graph view's selector, it is the one the
graph, the result, the failures and the checkpoints views show. The dock layout and the
window geometry are kept with QSettings in an ini file under the config dir (so tests,
which point CLUSTERDECK_HOME elsewhere, never touch the user's settings). GUI thread only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QToolBar,
    QWidget,
)

from clusterdeck.core import __version__
from clusterdeck.core.client.comparison import RunSummary
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.recorder.store import FILE_NAME
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.inspection import ProcessInspector
from clusterdeck.gui.jobcalls import JobCommands, JobWorker, SavepointAsk
from clusterdeck.gui.models.checkpointsmodel import CheckpointsModel
from clusterdeck.gui.models.health import cluster_health
from clusterdeck.gui.models.metrics import MetricsStore
from clusterdeck.gui.models.processmodel import ProcessTableModel
from clusterdeck.gui.models.profiles import ProfileError, ProfileStore
from clusterdeck.gui.recording import SUFFIX, is_recording, open_in_bridge
from clusterdeck.gui.sampler import ResourceSample
from clusterdeck.gui.session import (
    ClusterSession,
    SessionMode,
    SessionState,
    attach_config,
    known_clusters,
    savepoints_dir,
)
from clusterdeck.gui.submission import SubmissionFlow
from clusterdeck.gui.tray import DesktopNotifier
from clusterdeck.gui.views.actions import create_actions
from clusterdeck.gui.views.checkpointsview import CheckpointsView
from clusterdeck.gui.views.clusterpanel import ClusterPanel
from clusterdeck.gui.views.comparison import ComparisonWindow
from clusterdeck.gui.views.failuresview import FailuresView
from clusterdeck.gui.views.joblist import JobListModel, JobListView
from clusterdeck.gui.views.jobsview import JobsView, job_span
from clusterdeck.gui.views.logsearch import LogSearchView
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


RECENT_KEY = "recordings/recent"
RECENT_KEPT = 8


def recent_recordings() -> list[Path]:
    """The recordings opened last, newest first, that still exist."""
    value = window_settings().value(RECENT_KEY, [])
    paths_seen = [value] if isinstance(value, str) else list(value or [])
    return [Path(p) for p in paths_seen if isinstance(p, str) and Path(p).is_file()]


def remember_recording(path: Path) -> None:
    kept = [str(path.resolve())] + [str(p) for p in recent_recordings()
                                    if p != path.resolve()]
    window_settings().setValue(RECENT_KEY, kept[:RECENT_KEPT])


def window_settings() -> QSettings:
    """The GUI's settings file, under the config dir (CLUSTERDECK_HOME in tests)."""
    return QSettings(str(paths.config_dir() / "gui.ini"), QSettings.Format.IniFormat)


class MainWindow(QMainWindow):
    """The whole app in one window."""

    closed = Signal(str)
    """Emitted once the window is closed: ``stop`` (the cluster, if any, is stopped) or
    ``headless`` (a local cluster keeps running in this process without a window)."""
    job_file_dropped = Signal(str)
    """A file was dropped on the window; it is offered for submission."""

    def __init__(self, bridge: ClusterBridge | None = None,
                 session: ClusterSession | None = None,
                 store: ProfileStore | None = None) -> None:
        super().__init__()
        self.setWindowTitle("clusterdeck")
        self.setObjectName("clusterdeck-main")
        self.setAcceptDrops(True)
        self.bridge = bridge or ClusterBridge(self)
        self.recording: Path | None = None  # the recording shown instead of a cluster
        self.session = session or ClusterSession(self.bridge, self)
        self.actions = create_actions(self)
        self.worker = JobWorker(self.bridge)
        self.commands = JobCommands(self.bridge, self.worker, self)
        self.submission = SubmissionFlow(self.bridge, self.worker, self)
        self.inspector = ProcessInspector(self.bridge, self)
        self.notifier = DesktopNotifier(
            self, lambda message: self.statusBar().showMessage(message, 10000),
            self.bridge.call_on_gui_thread)
        self._overview: p.ClusterOverview | None = None
        self._broker_state = "none"
        self.current_job: str | None = None
        self._focus_next: str | None = None
        self.model = ProcessTableModel(self)
        self.metrics = MetricsStore()
        self.jobs = JobsView(self.bridge.recorder, self.metrics)
        self.load = ProcessPlot()
        self.cluster_panel = ClusterPanel(self.model, self.actions, store or ProfileStore())
        self.slots = SlotsView()
        self.job_model = JobListModel(self)
        self.job_list = JobListView(self.job_model, self.actions.submit, self.actions.cancel_job,
                                    self.actions.compare_jobs, job_actions=self._job_actions())
        self.comparisons: list[ComparisonWindow] = []
        self.result = ResultView()
        self.failures = FailuresView(self.submission.job_files)
        self.checkpoints_model = CheckpointsModel(self)
        self.checkpoints = CheckpointsView(self.checkpoints_model)
        self.messages = MessagesView()
        self.logs = LogSearchView(self.worker.run)
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
        self._wire()
        self.resize(1400, 860)
        self.resizeDocks([self.cluster_dock], [520], Qt.Orientation.Horizontal)
        self.resizeDocks([self.cluster_dock, self.slots_dock], [400, 460],
                         Qt.Orientation.Vertical)
        self.resizeDocks([self.jobs_dock], [300], Qt.Orientation.Vertical)
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

    def _job_actions(self) -> list[QAction]:
        a = self.actions
        return [a.cancel_job, a.savepoint_job, a.stop_job_savepoint, a.stop_job]

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
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
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

    def _wire(self) -> None:
        bridge, a = self.bridge, self.actions
        bridge.overview_changed.connect(self._on_overview)
        bridge.processes_changed.connect(self.model.update_processes)
        bridge.resources_changed.connect(self.model.set_resources)
        bridge.resources_changed.connect(self._on_resources)
        bridge.metrics.connect(self._on_metrics)
        bridge.samples.connect(lambda samples: (self.metrics.add_samples(samples),
                                                self._plot_load()))
        bridge.job_changed.connect(self.job_model.set_snapshot)
        bridge.job_changed.connect(self.jobs.set_job)
        bridge.job_changed.connect(self.slots.set_job)
        bridge.job_changed.connect(self.failures.set_snapshot)
        bridge.job_changed.connect(self.checkpoints_model.set_snapshot)
        bridge.job_changed.connect(self.result.set_snapshot)
        bridge.job_changed.connect(self._on_job_seen)
        bridge.job_changed.connect(self.notifier.job_seen)
        bridge.job_result_changed.connect(self.notifier.job_ended)
        for health_changed in (bridge.overview_changed, bridge.processes_changed,
                               bridge.job_changed, self.session.state_changed):
            health_changed.connect(lambda *_: self._update_health())
        bridge.job_list_changed.connect(self.job_model.set_job_list)
        bridge.job_result_changed.connect(self.job_model.set_result)
        bridge.job_result_changed.connect(self.result.set_result)
        bridge.job_result_changed.connect(self.failures.set_result)
        bridge.job_result_changed.connect(lambda *_: self._update_actions())
        bridge.job_events.connect(self.jobs.apply_events)
        bridge.traffic.connect(self.messages.add)
        bridge.cluster_events.connect(self._on_cluster_events)
        bridge.broker_changed.connect(self._on_broker)
        bridge.cleared.connect(self._on_cleared)
        self.session.state_changed.connect(self._on_session)
        self.session.notice.connect(self._on_notice)
        self.model.dataChanged.connect(self._update_actions)
        self.model.modelReset.connect(self._update_actions)
        self.cluster_panel.table.selectionModel().selectionChanged.connect(self._update_actions)
        self.cluster_panel.table.selectionModel().selectionChanged.connect(
            lambda *_: self._plot_load())
        self.cluster_panel.process_activated.connect(self.show_log)
        self.jobs.job_chosen.connect(self.choose_job)
        self.jobs.replay_changed.connect(self.slots.set_replay)
        self.job_list.job_chosen.connect(self.choose_job)
        self.job_model.dataChanged.connect(self._update_actions)
        self.job_model.rowsInserted.connect(self._update_actions)
        self.failures.failure_selected.connect(self.jobs.graph.focus)
        self.failures.logs_wanted.connect(self._show_attempt_logs)
        self.logs.subtask_named.connect(self._find_subtask)
        self.failures_dock.visibilityChanged.connect(self.failures.set_on_screen)
        self.messages_dock.visibilityChanged.connect(self.messages.set_on_screen)
        self.result.rows_wanted.connect(self.commands.load_rows)
        self.commands.rows_loaded.connect(self.result.show_rows)
        self.commands.notice.connect(self._on_notice)
        self.commands.waiting_changed.connect(self._on_savepoints_waiting)
        self.commands.savepoint_answered.connect(self.checkpoints_model.set_savepoint)
        self.submission.notice.connect(lambda text: self.statusBar().showMessage(text, 10000))
        self.submission.submitted.connect(self._on_submitted)
        self.job_file_dropped.connect(self.submission.offer)
        a.submit.triggered.connect(self.choose_job_file)
        a.open_recording.triggered.connect(self.choose_recording)
        a.cancel_job.triggered.connect(self.cancel_current_job)
        a.savepoint_job.triggered.connect(lambda: self.savepoint_current_job())
        a.stop_job_savepoint.triggered.connect(lambda: self.savepoint_current_job(stop=True))
        a.stop_job.triggered.connect(
            lambda: self.savepoint_current_job(stop=True, keep=False))
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
        a.compare_jobs.triggered.connect(self.compare_selected_jobs)
        self.job_list.table.selectionModel().selectionChanged.connect(
            lambda *_: self._update_actions())
        a.thread_dump.triggered.connect(lambda: self._with_row(self.inspector.thread_dump))
        a.flame_graph.triggered.connect(lambda: self._with_row(self.inspector.flame_graph))
        a.spark_ui.triggered.connect(lambda: self._with_row(lambda row: (
            self.inspector.open_spark_ui(row.name, self.metrics.spark_ui.get(row.name, "")))))
        self.inspector.notice.connect(lambda text: self.statusBar().showMessage(text, 10000))
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

    def choose_job_file(self) -> None:
        """File > Submit...: pick a job file; it goes through the submission flow."""
        path, _ = QFileDialog.getOpenFileName(self, "Submit a job file", str(Path.cwd()),
                                              "Job files (*.py);;All files (*)")
        if path:
            self.submission.offer(path)

    def cancel_current_job(self) -> None:
        if self.current_job is not None:
            self.commands.cancel(self.current_job)

    def savepoint_current_job(self, stop: bool = False, keep: bool = True) -> None:
        """Take a savepoint of the current job (``stop``: and stop it there; ``keep``
        False: a stop at a last checkpoint); its answer goes to the status bar and the
        Checkpoints view."""
        job = self.job_model.row(self.current_job or "")
        if job is not None:
            self.commands.savepoint(SavepointAsk(job.job_id, job.name, stop, keep))

    def choose_job(self, job_id: str) -> None:
        """Make ``job_id`` the current job of every job view."""
        if job_id == self.current_job:
            return
        self.current_job = job_id
        self.job_list.select(job_id)
        self.jobs.select_job(job_id)
        self.result.show_job(job_id)
        self.failures.show_job(job_id)
        self.checkpoints_model.show_job(job_id)
        self._update_actions()

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
        for dock in (self.cluster_dock, self.slots_dock, self.jobs_dock, self.result_dock,
                     self.failures_dock, self.checkpoints_dock, self.messages_dock):
            dock.show()
        self.jobs_dock.raise_()

    def compare_selected_jobs(self) -> ComparisonWindow | None:
        """The two jobs selected in the Jobs list side by side, in a window of their own."""
        jobs = self.job_list.selected_jobs
        if len(jobs) != 2:
            self._on_notice("select two jobs in the Jobs list to compare them (Ctrl+click)")
            return None
        missing = [job for job in jobs if job not in self.jobs.snapshots]
        if missing:
            self._on_notice(f"no ExecutionGraph of {', '.join(missing)} is known here")
            return None
        jobs.sort(key=lambda job: job_span(self.jobs.snapshots[job])[0])  # the older first
        first, second = (RunSummary.of(self.jobs.snapshots[job], self.result.results.get(job))
                         for job in jobs)
        window = ComparisonWindow(first, second)
        self.comparisons = [*self.comparisons[-7:], window]
        window.show()
        return window

    def _show_attempt_logs(self, attempt_id: str, _taskmanager: str) -> None:
        self.logs_dock.show()
        self.logs_dock.raise_()
        self.logs.show_lines_of(attempt_id)

    def _find_subtask(self, job_id: str, vertex_id: str, subtask: int) -> None:
        """A log line's attempt: its job on screen, its subtask selected and centred."""
        if job_id not in self.jobs.snapshots:
            self._on_notice(f"job {job_id} is not known here")
            return
        self.choose_job(job_id)
        self.jobs.graph.focus(vertex_id, subtask)

    def _with_row(self, command: Any) -> None:
        row = self.cluster_panel.selected_row()
        if row is not None:
            command(row)

    def _with_selected(self, command: Any) -> None:
        row = self.cluster_panel.selected_row()
        if row is not None:
            command(row.name)

    def _about(self) -> None:
        QMessageBox.about(self, "About clusterdeck",
                          f"<b>clusterdeck {__version__}</b><p>A desktop cluster manager: a "
                          "Flink-style runtime over MQTT whose tasks run on PySpark.</p>")

    # -- what the bridge and the session say --------------------------------------------------

    def _update_health(self) -> None:
        state = self.session.state
        self.notifier.set_health(cluster_health(
            state.cluster_id if state.active else "", self._overview, self._broker_state,
            {row.name: row.state for row in self.model.rows() if row.supervised},
            sum(not row.ended for row in self.job_model.rows())))

    def _on_overview(self, overview: p.ClusterOverview | None) -> None:
        self._overview = overview
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
        self._broker_state = state
        kind = self.session.state.broker_kind
        text = {"none": "broker: \u2013", "connected": f"broker: connected ({kind})",
                "disconnected": f"broker: DISCONNECTED ({kind})"}[state]
        self.broker_label.setText(text)
        self.broker_label.setStyleSheet("color: #b03a36; font-weight: bold;"
                                        if state == "disconnected" else "")
        self._update_health()

    def _on_submitted(self, job_id: str, _path: str) -> None:
        """Show a job submitted here as soon as it is seen (it may be already)."""
        self._focus_next = job_id
        if job_id in self.jobs.snapshots:
            self._on_job_seen(job_id, self.jobs.snapshots[job_id])
        self.jobs_dock.raise_()

    def _on_job_seen(self, job_id: str, _snapshot: Any) -> None:
        if job_id == self._focus_next:
            self._focus_next = None
            self.choose_job(job_id)

    def _on_metrics(self, messages: list[p.TaskManagerMetrics]) -> None:
        self.jobs.show_metrics(self.metrics.add(messages))
        self._plot_load()

    def _on_resources(self, samples: dict[int, ResourceSample]) -> None:
        """The sampler's CPU and memory, kept per process name for the Load plot."""
        self.metrics.add_resources(
            {row.name: (samples[row.pid].cpu_percent, samples[row.pid].memory_bytes)
             for row in self.model.rows() if row.pid in samples}, time.time())
        self._plot_load()

    def _plot_load(self) -> None:
        """The process selected in the Cluster panel in the Load plot (when it shows)."""
        row = self.cluster_panel.selected_row()
        if row is not None and not self.load.visibleRegion().isEmpty():
            self.load.show_process(row.name, self.metrics.processes.get(row.name))

    def _on_cleared(self) -> None:
        self.metrics.clear()
        self.model.clear()
        self.slots.clear()
        self.jobs.clear()
        self.job_model.clear()
        self.result.clear()
        self.failures.clear()
        self.checkpoints_model.clear()
        self.messages.clear()
        self.current_job = None
        self.commands.forget_waiting()
        self._on_overview(None)
        for dock in list(self.log_docks.values()):
            dock.close()

    def _on_session(self, state: SessionState) -> None:
        if state.active:
            self.recording = None
        config = self.session.config
        self.submission.savepoints_dir = (savepoints_dir(config) if state.active
                                          and config is not None else None)
        if state.active or self.recording is None:
            self._follow_cluster_logs(state)
        self.cluster_panel.set_session_state(state)
        self.session_label.setText(f"{state.cluster_id}: {state.mode}" if state.active
                                   else "no cluster")
        self.setWindowTitle(f"clusterdeck \u2014 {state.cluster_id}" if state.active
                            else "clusterdeck")
        self._update_actions()

    def _follow_cluster_logs(self, state: SessionState) -> None:
        """The Logs view reads the cluster's own recording where its recorder writes it:
        on this machine (of a cluster elsewhere it says that there is none here)."""
        recording = paths.cluster_dir(state.cluster_id) / FILE_NAME if state.active else None
        if recording != self.logs.path:
            self.logs.show_recording(recording, live=state.active)

    def _on_savepoints_waiting(self) -> None:
        """The status bar says which savepoints asked for here are in progress (they can
        take minutes); the job's savepoint actions wait for the answer."""
        waiting = list(self.commands.waiting.values())
        if len(waiting) == 1:
            self.savepoint_label.setText(f"{waiting[0].doing} of {waiting[0].job} in "
                                         f"progress\u2026")
        elif waiting:
            self.savepoint_label.setText(f"{len(waiting)} savepoints in progress\u2026")
        self.savepoint_label.setVisible(bool(waiting))
        self._update_actions()

    def _on_notice(self, message: str) -> None:
        self.statusBar().showMessage(message, 10000)
        self.cluster_panel.show_notice(message)

    def _update_actions(self) -> None:
        state, a = self.session.state, self.actions
        a.start.setEnabled(not state.active)
        a.attach.setEnabled(not state.active)
        a.open_recording.setEnabled(not state.active)
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
        a.thread_dump.setEnabled(row is not None and row.pid is not None)
        a.flame_graph.setEnabled(row is not None and row.pid is not None)
        a.spark_ui.setEnabled(row is not None and bool(self.metrics.spark_ui.get(row.name)))
        connected = state.mode in (SessionMode.RUNNING, SessionMode.ATTACHED)
        a.submit.setEnabled(connected)
        job = self.job_model.row(self.current_job or "")
        a.cancel_job.setEnabled(connected and job is not None and not job.ended)
        streaming = (connected and job is not None and job.kind == JobKind.STREAMING
                     and job.status == JobStatus.RUNNING
                     and job.job_id not in self.commands.waiting)
        for savepoint in (a.savepoint_job, a.stop_job_savepoint, a.stop_job):
            savepoint.setEnabled(streaming)
        a.compare_jobs.setEnabled(len(self.job_list.selected_jobs) == 2)

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
        self.worker.shutdown()
        self.inspector.shutdown()
        self.notifier.shutdown()
        if choice == STOP:
            self.session.shutdown()
        event.accept()
        self.closed.emit(choice)

    # -- dropping job files -------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        """Any local file is welcome: one that is not a job is refused with the reason."""
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        dropped = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if not dropped:
            event.ignore()
            return
        for path in dropped:
            if is_recording(path):
                self.open_recording(Path(path))
            else:
                self.job_file_dropped.emit(path)
        event.acceptProposedAction()

    # -- recordings ---------------------------------------------------------------------------

    def open_recording(self, path: Path) -> None:
        """Show a flight recording (docs/recorder.md) instead of a cluster: offline, every
        view fed from the file. Refused while a cluster is shown."""
        if self.session.state.active:
            self._on_notice(f"{path.name} not opened: stop or detach the cluster first")
            return
        self.bridge.reset()
        self.recording = path
        remember_recording(path)
        self.setWindowTitle(f"clusterdeck \u2014 recording {path.name} (offline)")
        self.session_label.setText(f"recording {path.name}: offline, no cluster")
        self.statusBar().showMessage(f"Opening the recording {path.name}...")
        open_in_bridge(self.bridge, path, lambda count, error: self._recording_opened(
            path, count, error))
        self.logs.show_recording(path, live=False)

    def choose_recording(self) -> None:
        """File > Open Recording...: pick a recording file."""
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a recording", str(Path.cwd()),
            f"Recordings (*{SUFFIX} {FILE_NAME});;All files (*)")
        if path:
            self.open_recording(Path(path))

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = recent_recordings()
        for path in recent:
            action = self.recent_menu.addAction(str(path))
            action.setEnabled(not self.session.state.active)
            action.triggered.connect(lambda _=False, chosen=path: self.open_recording(chosen))
        if not recent:
            self.recent_menu.addAction("(none yet)").setEnabled(False)

    def _recording_opened(self, path: Path, count: int, error: str) -> None:
        if error:
            self._on_notice(f"{path.name} could not be read: {error}")
            return
        self.statusBar().showMessage(f"Recording {path.name}: {count:,} messages. This is "
                                     "what was recorded, not a running cluster.")
