"""The job list: every job with status, progress and duration, newest first."""

from __future__ import annotations

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.views.joblist import (
    COLUMNS,
    JOB_ID_ROLE,
    PROGRESS_ROLE,
    JobListModel,
    JobListView,
)
from tests.gui.jobsnapshots import mixed_word_count


def summary(job_id: str, status: JobStatus = JobStatus.RUNNING, finished: int = 0,
            total: int = 4, submitted: float = 1000.0, duration: float | None = None
            ) -> p.JobSummary:
    return p.JobSummary(job_id, f"name-{job_id}", "dataflow", status, submitted, finished,
                        total, duration)


def text(model: JobListModel, row: int, column: str) -> str:
    return model.data(model.index(row, COLUMNS.index(column)))


def test_jobs_of_the_retained_list_appear_newest_first(qtbot):
    model = JobListModel()
    model.set_job_list(p.JobList((summary("a", JobStatus.FINISHED, 4, 4, 1000.0, 2.5),
                                  summary("b", submitted=1010.0))))
    assert [row.job_id for row in model.rows()] == ["b", "a"]
    assert text(model, 1, "Status") == "FINISHED"
    assert text(model, 1, "Duration") == "2.5 s"
    assert model.data(model.index(1, COLUMNS.index("Progress")), PROGRESS_ROLE) == (4, 4)
    assert model.data(model.index(0, 0), JOB_ID_ROLE) == "b"


def test_a_snapshot_moves_a_running_jobs_progress_on_and_an_old_list_does_not_undo_it(qtbot):
    model = JobListModel()
    model.set_job_list(p.JobList((summary("job-1"),)))
    _, snapshot = mixed_word_count()
    model.set_snapshot("job-1", snapshot)
    assert text(model, 0, "Progress") == "1 / 6"
    model.set_job_list(p.JobList((summary("job-1", finished=0, total=6),)))
    assert text(model, 0, "Progress") == "1 / 6"


def test_a_result_ends_the_job_and_late_snapshots_do_not_revive_it(qtbot):
    model = JobListModel()
    _, snapshot = mixed_word_count()
    model.set_snapshot("job-1", snapshot)
    model.set_result("job-1", p.JobResult("job-1", "word-count", JobStatus.CANCELED, duration=7.0,
                                          finished=1, total=6))
    model.set_snapshot("job-1", snapshot)
    assert text(model, 0, "Status") == "CANCELED"
    assert text(model, 0, "Duration") == "7.0 s"


def test_the_list_view_shows_a_drop_hint_until_the_first_job(qtbot):
    window = MainWindow()
    qtbot.addWidget(window)
    view: JobListView = window.job_list
    assert view._stack.currentWidget() is view.hint
    window.job_model.set_job_list(p.JobList((summary("a"),)))
    assert view._stack.currentWidget() is view.table
    with qtbot.waitSignal(view.job_chosen) as chosen:
        view.table.selectRow(0)
    assert chosen.args == ["a"]
    assert window.current_job == "a"
