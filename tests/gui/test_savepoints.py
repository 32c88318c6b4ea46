"""Savepoints from the window: Take Savepoint, Stop with Savepoint and Stop Job are offered
for a running streaming job only, wait off the GUI thread, say in the status bar that they
are in progress and what came of them (the savepoint's folder, or why not), and leave the
folder in the Checkpoints view to copy. The cluster is a stub client: its answer waits
until the test lets it go."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import AskTimeoutError, RemoteError
from clusterdeck.gui.controllers.jobcalls import SavepointAsk
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.session import SessionMode, SessionState

JOB = "3f2a91c0d4e1"
FOLDER = "/data/clusters/lab/savepoints/savepoint-3f2a91c0d4e1-7-a1b2c3"


class StubClient:
    """The part of a JobClient the job commands and the bridge use; ``savepoint`` answers
    ``answer`` (or raises it) once ``let`` is set, on the command's own thread."""

    observing = False

    def __init__(self, answer: p.SavepointCompleted | Exception) -> None:
        self.service = SimpleNamespace(subscribe=lambda *_args, **_kwargs: None)
        self.answer = answer
        self.let = threading.Event()
        self.asked: list[tuple[str, bool, bool]] = []

    def savepoint(self, job_id: str, stop: bool = False,
                  savepoint: bool = True) -> p.SavepointCompleted:
        self.asked.append((job_id, stop, savepoint))
        if not self.let.wait(10):
            raise TimeoutError("the test never let the answer go")
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def close(self) -> None:
        self.let.set()


def summary(status: JobStatus = JobStatus.RUNNING, kind: str = "streaming",
            job_id: str = JOB) -> p.JobSummary:
    return p.JobSummary(job_id, "rates", kind, status, 1000.0, 0, 2, None)


def savepoint_actions(window: MainWindow) -> list[Any]:
    a = window.actions
    return [a.savepoint_job, a.stop_job_savepoint, a.stop_job]


def window_with(qtbot, client: StubClient | None, *jobs: p.JobSummary) -> MainWindow:
    """A window following a cluster (``client``) that lists ``jobs``, the first chosen."""
    window = MainWindow()
    qtbot.addWidget(window)
    if client is not None:
        window.bridge.connect_client(client)  # type: ignore[arg-type]
    window.session.state = SessionState(SessionMode.ATTACHED, "lab")
    window.job_model.set_job_list(p.JobList(jobs, len(jobs)))
    window.choose_job(jobs[0].job_id)
    return window


@pytest.mark.parametrize(("job", "offered"), [
    (summary(), True),
    (summary(kind="dataflow"), False),
    (summary(JobStatus.CREATED), False),
    (summary(JobStatus.FINISHED), False),
])
def test_savepoints_are_offered_for_a_running_streaming_job_only(qtbot, job, offered):
    window = window_with(qtbot, None, job)
    assert [action.isEnabled() for action in savepoint_actions(window)] == [offered] * 3
    assert window.actions.cancel_job.isEnabled() is not job.status.is_terminal


def test_a_streaming_job_that_ends_is_offered_no_savepoint_any_more(qtbot):
    window = window_with(qtbot, None, summary())
    window.job_model.set_job_list(p.JobList((summary(JobStatus.FINISHED),), 1))
    assert not any(action.isEnabled() for action in savepoint_actions(window))


def test_without_a_cluster_no_savepoint_is_offered(qtbot):
    window = MainWindow()
    qtbot.addWidget(window)
    window.job_model.set_job_list(p.JobList((summary(),), 1))
    window.choose_job(JOB)
    assert not any(action.isEnabled() for action in savepoint_actions(window))


def test_a_savepoint_says_it_is_in_progress_then_where_it_lies(qtbot):
    client = StubClient(p.SavepointCompleted(JOB, 7, FOLDER))
    window = window_with(qtbot, client, summary())
    window.actions.savepoint_job.trigger()
    assert window.statusBar().currentMessage() == f"savepoint of rates ({JOB}) in progress\u2026"
    assert window.savepoint_label.text() == f"savepoint of rates ({JOB}) in progress\u2026"
    assert not window.savepoint_label.isHidden()
    assert not window.actions.savepoint_job.isEnabled(), "one savepoint of a job at a time"
    assert window.actions.cancel_job.isEnabled()
    client.let.set()
    qtbot.waitUntil(lambda: FOLDER in window.statusBar().currentMessage(), timeout=5000)
    assert window.statusBar().currentMessage() == \
        f"rates ({JOB}): savepoint at checkpoint 7: {FOLDER}"
    assert client.asked == [(JOB, False, True)]
    assert window.savepoint_label.isHidden()
    assert window.actions.savepoint_job.isEnabled()
    assert window.checkpoints.summary.text().endswith(f"savepoint at checkpoint 7: {FOLDER}")


def test_a_refused_savepoint_says_why_in_the_status_bar_and_the_checkpoints_view(qtbot):
    reason = f"job {JOB} is FINISHED: savepoints are of running streaming jobs"
    client = StubClient(RemoteError("SavepointFailed", reason))
    window = window_with(qtbot, client, summary())
    window.actions.stop_job_savepoint.trigger()
    assert window.savepoint_label.text() == \
        f"stop with savepoint of rates ({JOB}) in progress\u2026"
    client.let.set()
    qtbot.waitUntil(lambda: window.savepoint_label.isHidden(), timeout=5000)
    assert window.statusBar().currentMessage() == \
        f"rates ({JOB}): stop with savepoint failed: {reason}"
    assert window.cluster_panel.state_line.text() == window.statusBar().currentMessage()
    assert client.asked == [(JOB, True, True)]
    assert window.checkpoints.summary.text() == f"stop with savepoint failed: {reason}"


def test_a_stop_without_savepoint_keeps_nothing(qtbot):
    client = StubClient(p.SavepointCompleted(JOB, 9, ""))
    window = window_with(qtbot, client, summary())
    client.let.set()
    with qtbot.waitSignal(window.commands.savepoint_answered, timeout=5000):
        window.actions.stop_job.trigger()
    assert client.asked == [(JOB, True, False)]
    assert window.statusBar().currentMessage() == (
        f"rates ({JOB}): stopped at checkpoint 9; the job finishes once its sinks committed")


def test_a_cluster_left_meanwhile_drops_its_savepoints_in_progress(qtbot):
    client = StubClient(p.SavepointCompleted(JOB, 7, FOLDER))
    window = window_with(qtbot, client, summary())
    window.actions.savepoint_job.trigger()
    assert window.commands.waiting
    window.bridge.reset()
    assert not window.commands.waiting and window.savepoint_label.isHidden()
    client.let.set()


def test_the_job_lists_menu_holds_the_job_commands_for_the_job_clicked(qtbot):
    window = window_with(qtbot, None, summary(kind="dataflow", job_id="batch"), summary())
    table = window.job_list.table
    window.show()
    qtbot.waitExposed(window)
    streaming_row = table.visualRect(window.job_model.index(window.job_model.row_of(JOB), 0))
    menu = window.job_list.job_menu(streaming_row.center())
    assert menu is not None
    qtbot.addWidget(menu)
    assert window.current_job == JOB
    assert [action.text() for action in menu.actions()] == [
        "&Cancel Job", "Take Save&point", "Stop &with Savepoint", "Stop &Job",
        "Inspect &State\u2026"]
    assert all(action.isEnabled() for action in menu.actions())


def test_the_answers_name_the_job_and_a_timeout_says_the_job_may_still_take_it():
    ask = SavepointAsk(JOB, "rates", stop=True)
    assert ask.taken(p.SavepointCompleted(JOB, 9, FOLDER)) == (
        f"stopped at checkpoint 9; the job finishes once its sinks committed; savepoint: "
        f"{FOLDER}")
    assert ask.failed(AskTimeoutError("no answer")) == (
        "stop with savepoint: no answer within 660 s; the job may still take it (see its "
        "checkpoints)")
    assert SavepointAsk(JOB, "").job == f"job {JOB}"
