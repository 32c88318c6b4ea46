"""The job list shows the cluster's window of jobs and says how many there are in all."""

from __future__ import annotations

from PySide6.QtGui import QAction

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.views.joblist import JobListModel, JobListView


def summary(job_id: str, status: JobStatus = JobStatus.FINISHED,
            submitted: float = 1000.0) -> p.JobSummary:
    return p.JobSummary(job_id, f"name-{job_id}", "dataflow", status, submitted, 4, 4, 1.0)


def test_an_ended_job_the_window_no_longer_holds_leaves_the_table(qtbot) -> None:
    model = JobListModel()
    model.set_job_list(p.JobList((summary("old", submitted=1.0), summary("new", submitted=2.0)),
                                 2))
    model.set_job_list(p.JobList((summary("new", submitted=2.0),), 1))
    assert [row.job_id for row in model.rows()] == ["new"]


def test_a_running_job_stays_until_the_list_names_it(qtbot) -> None:
    model = JobListModel()
    model.set_result("ended", p.JobResult("ended", "x", JobStatus.FINISHED))
    model.set_job_list(p.JobList((summary("running", JobStatus.RUNNING),), 1))
    model.set_job_list(p.JobList((), 0))
    assert [row.job_id for row in model.rows()] == ["running"]


def test_the_dock_says_how_many_of_all_jobs_it_shows(qtbot) -> None:
    model = JobListModel()
    view = JobListView(model, QAction("Submit"), QAction("Cancel"))
    qtbot.addWidget(view)
    model.set_job_list(p.JobList((summary("a"), summary("b")), 3000))
    assert view.count.text() == "2 of 3000 jobs"
    model.set_job_list(p.JobList((summary("a"), summary("b")), 2))
    assert view.count.text() == "2 jobs"
