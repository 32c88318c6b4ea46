"""Which of the window's commands can run now: one function of the session, the selected
process and the current job, so every menu, button and context menu agrees. GUI thread
only."""

from __future__ import annotations

from collections.abc import Container

from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.models.processmodel import ProcessRow
from clusterdeck.gui.models.sessionstate import SessionMode, SessionState
from clusterdeck.gui.views.actions import WindowActions
from clusterdeck.gui.views.joblist import JobRow


def enable_actions(a: WindowActions, state: SessionState, row: ProcessRow | None,
                   spark_ui: str, job: JobRow | None, waiting: Container[str],
                   jobs_selected: int, offline: bool = False) -> None:
    """``row``: the process selected in the Cluster panel, ``spark_ui`` its Spark UI (if
    any); ``job``: the current job; ``waiting``: the jobs with a savepoint in progress;
    ``offline``: a recording is shown."""
    a.start.setEnabled(not state.active)
    a.attach.setEnabled(not state.active)
    a.open_recording.setEnabled(not state.active)
    a.stop.setEnabled(state.active and state.mode is not SessionMode.STOPPING)
    a.stop.setText("&Detach" if state.mode in (SessionMode.ATTACHING, SessionMode.ATTACHED)
                   else "S&top")
    a.restart.setEnabled(state.supervised and state.mode is SessionMode.RUNNING)
    a.add_taskmanager.setEnabled(state.supervised and state.mode is SessionMode.RUNNING)
    a.show_log.setEnabled(row is not None and row.log_path is not None)
    a.restart_process.setEnabled(row is not None and row.supervised
                                 and state.mode is not SessionMode.STOPPING)
    a.kill_process.setEnabled(row is not None and row.pid is not None)
    a.thread_dump.setEnabled(row is not None and row.pid is not None)
    a.flame_graph.setEnabled(row is not None and row.pid is not None)
    a.spark_ui.setEnabled(row is not None and bool(spark_ui))
    connected = state.mode in (SessionMode.RUNNING, SessionMode.ATTACHED)
    a.submit.setEnabled(connected)
    a.cancel_job.setEnabled(connected and job is not None and not job.ended)
    streaming = (connected and job is not None and job.kind == JobKind.STREAMING
                 and job.status == JobStatus.RUNNING and job.job_id not in waiting)
    for savepoint in (a.savepoint_job, a.stop_job_savepoint, a.stop_job):
        savepoint.setEnabled(streaming)
    a.compare_jobs.setEnabled(jobs_selected == 2)
    a.inspect_state.setEnabled((state.active or offline) and job is not None
                               and job.kind == JobKind.STREAMING)
