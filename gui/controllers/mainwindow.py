"""The main window's controller: it builds the services the window acts through (the
session, the job worker and commands, the submission flow, the process inspector, the
desktop notifier), connects the bridge's signals to the models and views, and decides
what every command does.

It owns nothing of the cluster. One job is "current": chosen in the job list or the graph
view's selector, it is the one the graph, the result, the failures and the checkpoints
views show. GUI thread only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QFileDialog, QInputDialog

from clusterdeck.core.client.comparison import RunSummary
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.recorder.store import FILE_NAME
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.controllers.actionstate import enable_actions
from clusterdeck.gui.controllers.inspection import ProcessInspector
from clusterdeck.gui.controllers.jobcalls import JobCommands, JobWorker, SavepointAsk
from clusterdeck.gui.controllers.recordings import RecordingOpener
from clusterdeck.gui.controllers.reproduction import ReproductionFlow
from clusterdeck.gui.controllers.stateinspection import StateInspection
from clusterdeck.gui.controllers.statusline import (
    broker_style,
    broker_text,
    cluster_event_notice,
    savepoints_text,
    slots_text,
    taskmanagers_text,
)
from clusterdeck.gui.controllers.submission import SubmissionFlow
from clusterdeck.gui.controllers.tray import DesktopNotifier
from clusterdeck.gui.models.health import cluster_health
from clusterdeck.gui.models.processmodel import ProcessRow
from clusterdeck.gui.models.profiles import ProfileError, ProfileStore
from clusterdeck.gui.recording import is_recording
from clusterdeck.gui.sampler import ResourceSample
from clusterdeck.gui.session import (
    ClusterSession,
    SessionMode,
    SessionState,
    attach_config,
    credentials_attach,
    known_clusters,
    savepoints_dir,
)
from clusterdeck.gui.views.comparison import ComparisonWindow
from clusterdeck.gui.views.jobsview import job_span
from clusterdeck.gui.views.mainwindow import CANCEL, STOP, MainWindowView

FROM_CREDENTIALS = "From a credentials file\u2026"  # the attach dialog's last choice

COMPARISONS_KEPT = 8
ZOOM_STEP = 1.25


class MainWindow(MainWindowView):
    """The window of the app: its layout (MainWindowView) driven by this controller."""

    closed = Signal(str)
    """Emitted once the window is closed: ``stop`` (the cluster, if any, is stopped) or
    ``headless`` (a local cluster keeps running in this process without a window)."""

    def __init__(self, bridge: ClusterBridge | None = None,
                 session: ClusterSession | None = None,
                 store: ProfileStore | None = None) -> None:
        own_bridge = bridge is None
        bridge = bridge or ClusterBridge()
        worker = JobWorker(bridge)
        job_files: dict[str, Path] = {}
        super().__init__(bridge.recorder, store or ProfileStore(), job_files, worker.run)
        if own_bridge:
            bridge.setParent(self)
        self.bridge = bridge
        self.worker = worker
        self.submission = SubmissionFlow(bridge, worker, self, job_files)
        self.session = session or ClusterSession(self.bridge, self)
        self.commands = JobCommands(self.bridge, self.worker, self)
        self.recordings = RecordingOpener(self, self.bridge, self.session, self.notice)
        self.inspector = ProcessInspector(self.bridge, self)
        self.reproduction = ReproductionFlow(self, self.session, worker, self.notice)
        self.state_inspection = StateInspection(self.bridge, self.session,
                                                lambda: self.recordings.recording, self.notice,
                                                self)
        self.notifier = DesktopNotifier(self, self.show_notice, self.bridge.call_on_gui_thread)
        self.comparisons: list[ComparisonWindow] = []
        self._overview: p.ClusterOverview | None = None
        self._broker_state = "none"
        self.current_job: str | None = None
        self._focus_next: str | None = None
        self._wire_bridge()
        self._wire_views()
        self._wire_actions()
        self.update_actions()

    # -- wiring -------------------------------------------------------------------------------

    def _wire_bridge(self) -> None:
        bridge = self.bridge
        bridge.overview_changed.connect(self._on_overview)
        bridge.processes_changed.connect(self.model.update_processes)
        bridge.resources_changed.connect(self.model.set_resources)
        bridge.resources_changed.connect(self._on_resources)
        bridge.metrics.connect(self._on_metrics)
        bridge.samples.connect(self._on_samples)
        for job_changed in (self.job_model.set_snapshot, self.jobs.set_job, self.slots.set_job,
                            self.failures.set_snapshot, self.checkpoints_model.set_snapshot,
                            self.result.set_snapshot, self._on_job_seen,
                            self.notifier.job_seen):
            bridge.job_changed.connect(job_changed)
        for health_changed in (bridge.overview_changed, bridge.processes_changed,
                               bridge.job_changed, self.session.state_changed):
            health_changed.connect(self.update_health)
        bridge.job_list_changed.connect(self.job_model.set_job_list)
        for result_changed in (self.notifier.job_ended, self.job_model.set_result,
                               self.result.set_result, self.failures.set_result,
                               self.update_actions):
            bridge.job_result_changed.connect(result_changed)
        bridge.job_events.connect(self.jobs.apply_events)
        bridge.traffic.connect(self.messages.add)
        bridge.cluster_events.connect(self._on_cluster_events)
        bridge.broker_changed.connect(self._on_broker)
        bridge.cleared.connect(self._on_cleared)
        self.session.state_changed.connect(self._on_session)
        self.session.notice.connect(self.notice)

    def _wire_views(self) -> None:
        self.recent_menu.aboutToShow.connect(self.recordings.fill_recent_menu)
        self.files_dropped.connect(self._on_files_dropped)
        self.model.dataChanged.connect(self.update_actions)
        self.model.modelReset.connect(self.update_actions)
        process_selection = self.cluster_panel.table.selectionModel()
        process_selection.selectionChanged.connect(self.update_actions)
        process_selection.selectionChanged.connect(self._plot_load)
        self.cluster_panel.process_activated.connect(self.show_log)
        self.jobs.job_chosen.connect(self.choose_job)
        self.jobs.replay_changed.connect(self.slots.set_replay)
        self.job_list.job_chosen.connect(self.choose_job)
        self.job_list.table.selectionModel().selectionChanged.connect(self.update_actions)
        self.job_model.dataChanged.connect(self.update_actions)
        self.job_model.rowsInserted.connect(self.update_actions)
        self.failures.failure_selected.connect(self.jobs.graph.focus)
        self.failures.logs_wanted.connect(self._show_attempt_logs)
        self.failures.reproduce_wanted.connect(self.reproduction.reproduce)
        self.checkpoints.state_wanted.connect(self.inspect_state)
        self.logs.subtask_named.connect(self._find_subtask)
        self.result.rows_wanted.connect(self.commands.load_rows)
        self.commands.rows_loaded.connect(self.result.show_rows)
        self.commands.notice.connect(self.notice)
        self.commands.waiting_changed.connect(self._on_savepoints_waiting)
        self.commands.savepoint_answered.connect(self.checkpoints_model.set_savepoint)
        self.submission.notice.connect(self.show_notice)
        self.submission.submitted.connect(self._on_submitted)
        self.inspector.notice.connect(self.show_notice)
        self.jobs.graph.vertex_profile_wanted.connect(self.profile_vertex)

    def _wire_actions(self) -> None:
        a = self.actions
        a.submit.triggered.connect(self.choose_job_file)
        a.open_recording.triggered.connect(self.recordings.choose)
        a.cancel_job.triggered.connect(self.cancel_current_job)
        a.savepoint_job.triggered.connect(self.take_savepoint_of_current_job)
        a.stop_job_savepoint.triggered.connect(self.stop_current_job_with_savepoint)
        a.stop_job.triggered.connect(self.stop_current_job)
        a.start.triggered.connect(self.start_cluster)
        a.stop.triggered.connect(self.stop_cluster)
        a.restart.triggered.connect(self.session.restart)
        a.attach.triggered.connect(self.attach_cluster)
        a.add_taskmanager.triggered.connect(self.session.add_taskmanager)
        a.quit.triggered.connect(self.close)
        a.show_log.triggered.connect(self.show_selected_log)
        a.restart_process.triggered.connect(self.restart_selected)
        a.kill_process.triggered.connect(self.kill_selected)
        a.compare_jobs.triggered.connect(self.compare_selected_jobs)
        a.inspect_state.triggered.connect(lambda: self.inspect_state())
        a.thread_dump.triggered.connect(self.thread_dump_selected)
        a.flame_graph.triggered.connect(self.flame_graph_selected)
        a.spark_ui.triggered.connect(self.open_selected_spark_ui)
        a.zoom_in.triggered.connect(self.zoom_in)
        a.zoom_out.triggered.connect(self.zoom_out)
        a.fit_graph.triggered.connect(self.jobs.graph.fit)
        a.reset_layout.triggered.connect(self.reset_layout)
        a.about.triggered.connect(self.show_about)

    # -- cluster commands ---------------------------------------------------------------------

    def start_cluster(self) -> None:
        try:
            profile = self.cluster_panel.profiles.save()
            config = profile.to_config()
        except (ProfileError, ValueError) as error:
            self.notice(f"cannot start: {error}")
            return
        self.session.start(config)

    def stop_cluster(self) -> None:
        self.session.stop()

    def attach_cluster(self) -> None:
        clusters = [*(known_clusters() or ["default"]), FROM_CREDENTIALS]
        cluster_id, ok = QInputDialog.getItem(
            self, "Attach to a running cluster", "Cluster id (started with clusterdeck up "
            "or by another window), or a cluster on another machine:", clusters, 0, True)
        if not ok or not cluster_id.strip():
            return
        if cluster_id == FROM_CREDENTIALS:
            self.attach_from_credentials()
            return
        try:
            config = attach_config(cluster_id.strip())
        except ValueError as error:
            self.notice(f"cannot attach: {error}")
            return
        self.session.attach(config)

    def attach_from_credentials(self, path: str | None = None) -> None:
        """Attach with a file of ``clusterdeck credentials export``: asked for when
        ``path`` is None."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(
                self, "Attach with a credentials file", str(Path.home()),
                "Credentials (*.json);;All files (*)")
            if not path:
                return
        try:
            self.session.attach(*credentials_attach(path))
        except ValueError as error:
            self.notice(f"cannot attach: {error}")

    # -- process commands (on the process selected in the Cluster panel) ----------------------

    def _selected(self) -> ProcessRow | None:
        return self.cluster_panel.selected_row()

    def show_selected_log(self) -> None:
        if (row := self._selected()) is not None:
            self.show_log(row.name)

    def restart_selected(self) -> None:
        if (row := self._selected()) is not None:
            self.session.restart_process(row.name)

    def kill_selected(self) -> None:
        if (row := self._selected()) is not None:
            self.session.kill_process(row.name, row.pid, row.host)

    def thread_dump_selected(self) -> None:
        if (row := self._selected()) is not None:
            self.inspector.thread_dump(row)

    def flame_graph_selected(self) -> None:
        if (row := self._selected()) is not None:
            self.inspector.flame_graph(row)

    def profile_vertex(self, vertex_id: str) -> None:
        if (snapshot := self.jobs.graph.snapshot) is not None:
            self.inspector.vertex_flame_graph(
                snapshot, vertex_id, self.metrics.attempts(snapshot.job_id, vertex_id),
                live=self.recordings.recording is None)

    def open_selected_spark_ui(self) -> None:
        if (row := self._selected()) is not None:
            self.inspector.open_spark_ui(row.name, self.metrics.spark_ui.get(row.name, ""))

    def show_log(self, name: str) -> None:
        """Open (or raise) a dock following the process's log, tabbed with the others."""
        row = self.model.row_named(name)
        if row is None or row.log_path is None:
            self.notice(f"no log of {name} is known here")
            return
        self.show_log_dock(name, Path(row.log_path))

    # -- job commands -------------------------------------------------------------------------

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

    def take_savepoint_of_current_job(self) -> None:
        self.savepoint_current_job()

    def stop_current_job_with_savepoint(self) -> None:
        self.savepoint_current_job(stop=True)

    def stop_current_job(self) -> None:
        """Stop the current job at its last checkpoint (no savepoint kept)."""
        self.savepoint_current_job(stop=True, keep=False)

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
        self.update_actions()

    def compare_selected_jobs(self) -> ComparisonWindow | None:
        """The two jobs selected in the Jobs list side by side, in a window of their own."""
        jobs = self.job_list.selected_jobs
        if len(jobs) != 2:
            self.notice("select two jobs in the Jobs list to compare them (Ctrl+click)")
            return None
        missing = [job for job in jobs if job not in self.jobs.snapshots]
        if missing:
            self.notice(f"no ExecutionGraph of {', '.join(missing)} is known here")
            return None
        jobs.sort(key=lambda job: job_span(self.jobs.snapshots[job])[0])  # the older first
        first, second = (RunSummary.of(self.jobs.snapshots[job], self.result.results.get(job))
                         for job in jobs)
        window = ComparisonWindow(first, second)
        self.comparisons = [*self.comparisons[-(COMPARISONS_KEPT - 1):], window]
        window.show()
        return window

    def inspect_state(self, which: str = "") -> None:
        """The State view of the current job at ``which`` (a checkpoint id or savepoint
        folder; empty: its latest checkpoint)."""
        if self.current_job is not None:
            self.state_inspection.open(self.current_job, self.jobs.snapshots.get(
                self.current_job), which, self.checkpoints.savepoints())

    def zoom_in(self) -> None:
        self.jobs.graph.zoom_by(ZOOM_STEP)

    def zoom_out(self) -> None:
        self.jobs.graph.zoom_by(1 / ZOOM_STEP)

    def _show_attempt_logs(self, attempt_id: str, _taskmanager: str) -> None:
        self.show_attempt_logs(attempt_id)

    def _find_subtask(self, job_id: str, vertex_id: str, subtask: int) -> None:
        """A log line's attempt: its job on screen, its subtask selected and centred."""
        if job_id not in self.jobs.snapshots:
            self.notice(f"job {job_id} is not known here")
            return
        self.choose_job(job_id)
        self.jobs.graph.focus(vertex_id, subtask)

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

    def _on_files_dropped(self, dropped: list[str]) -> None:
        """A recording is opened; any other file is offered for submission."""
        for path in dropped:
            if is_recording(path):
                self.recordings.open(Path(path))
            else:
                self.submission.offer(path)

    # -- what the bridge and the session say --------------------------------------------------

    def notice(self, message: str) -> None:
        """A notice for the status bar and the Cluster panel."""
        self.show_notice(message)
        self.cluster_panel.show_notice(message)

    def update_health(self) -> None:
        state = self.session.state
        self.notifier.set_health(cluster_health(
            state.cluster_id if state.active else "", self._overview, self._broker_state,
            {row.name: row.state for row in self.model.rows() if row.supervised},
            sum(not row.ended for row in self.job_model.rows())))

    def update_actions(self) -> None:
        row = self._selected()
        enable_actions(self.actions, self.session.state, row,
                       self.metrics.spark_ui.get(row.name, "") if row is not None else "",
                       self.job_model.row(self.current_job or ""), self.commands.waiting,
                       len(self.job_list.selected_jobs),
                       offline=self.recordings.recording is not None)

    def _on_overview(self, overview: p.ClusterOverview | None) -> None:
        self._overview = overview
        self.metrics.set_clock_offsets(overview)
        self.model.set_overview(overview)
        self.slots.set_overview(overview)
        self.taskmanagers_label.setText(taskmanagers_text(overview))
        self.slots_label.setText(slots_text(overview))

    def _on_cluster_events(self, events: list[Any]) -> None:
        for event in events:
            notice = cluster_event_notice(event)
            if notice is not None:
                self.statusBar().showMessage(*notice)

    def _on_broker(self, state: str) -> None:
        self._broker_state = state
        self.broker_label.setText(broker_text(state, self.session.state.broker_kind))
        self.broker_label.setStyleSheet(broker_style(state))
        self.update_health()

    def _on_metrics(self, messages: list[p.TaskManagerMetrics]) -> None:
        self.jobs.show_metrics(self.metrics.add(messages))
        self._plot_load()

    def _on_samples(self, samples: list[Any]) -> None:
        self.metrics.add_samples(samples)
        self._plot_load()

    def _on_resources(self, samples: dict[int, ResourceSample]) -> None:
        """The sampler's CPU and memory, kept per process name for the Load plot."""
        self.metrics.add_resources(
            {row.name: (samples[row.pid].cpu_percent, samples[row.pid].memory_bytes)
             for row in self.model.rows() if row.pid in samples}, time.time())
        self._plot_load()

    def _plot_load(self) -> None:
        """The process selected in the Cluster panel in the Load plot (when it shows)."""
        row = self._selected()
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
        self.close_log_docks()

    def _on_session(self, state: SessionState) -> None:
        if state.active:
            self.recordings.forget()
        config = self.session.config
        self.submission.savepoints_dir = (savepoints_dir(config) if state.active
                                          and config is not None else None)
        if state.active or self.recordings.recording is None:
            self._follow_cluster_logs(state)
        self.cluster_panel.set_session_state(state)
        self.session_label.setText(f"{state.cluster_id}: {state.mode}" if state.active
                                   else "no cluster")
        self.setWindowTitle(f"clusterdeck \u2014 {state.cluster_id}" if state.active
                            else "clusterdeck")
        self.update_actions()

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
        if waiting:
            self.savepoint_label.setText(savepoints_text(waiting))
        self.savepoint_label.setVisible(bool(waiting))
        self.update_actions()

    # -- closing ------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        state = self.session.state
        choice = STOP
        if state.owned and state.mode in (SessionMode.STARTING, SessionMode.RUNNING):
            choice = self.ask_close_action(state.cluster_id)
        if choice == CANCEL:
            event.ignore()
            return
        self.save_layout()
        self.worker.shutdown()
        self.inspector.shutdown()
        self.state_inspection.shutdown()
        self.notifier.shutdown()
        if choice == STOP:
            self.session.shutdown()
        event.accept()
        self.closed.emit(choice)
