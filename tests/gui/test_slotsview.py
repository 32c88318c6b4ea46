"""The slots view: one cell per slot, coloured free, busy, lost or by the job in it."""

from __future__ import annotations

from clusterdeck.gui.models.palette import job_colour
from clusterdeck.gui.views.slotsview import SlotsView
from tests.gui.jobsnapshots import mixed_word_count
from tests.gui.overviews import overview, taskmanager


def test_busy_slots_take_the_colour_of_the_job_that_holds_them(qtbot):
    view = SlotsView()
    qtbot.addWidget(view)
    view.set_overview(overview(taskmanager("tm-1", free=0), taskmanager("tm-2", free=1),
                               taskmanager("tm-3", lost=True)))
    _, snapshot = mixed_word_count()  # runs in tm-1/0 and deploys into tm-2/1
    view.set_job("job-1", snapshot)
    cells = {(tm, index): what for tm, index, what in view.grid.cells()}
    assert (cells[("tm-1", 0)], cells[("tm-1", 1)]) == ("job-1", "busy")
    assert (cells[("tm-2", 0)], cells[("tm-2", 1)]) == ("free", "job-1")
    assert cells[("tm-3", 0)] == cells[("tm-3", 1)] == "lost"
    assert view.summary.text() == "3 of 4 slots busy on 2 TaskManagers"


def test_busy_slots_no_job_names_are_drawn_busy(qtbot):
    view = SlotsView()
    qtbot.addWidget(view)
    view.set_overview(overview(taskmanager("tm-1", slots=3, free=1)))
    assert [what for _, _, what in view.grid.cells()] == ["busy", "busy", "free"]


def test_the_plot_samples_the_latest_overview_on_its_timer(qtbot):
    view = SlotsView()
    qtbot.addWidget(view)
    view.set_overview(overview(taskmanager("tm-1", free=1), taskmanager("tm-2", free=2)))
    view.plot.sample()
    view.plot.sample()
    busy, total = view.plot.samples()
    assert list(busy) == [1, 1] and list(total) == [4, 4]


def test_the_overview_count_wins_over_a_job_snapshot_that_is_ahead(qtbot):
    view = SlotsView()
    qtbot.addWidget(view)
    view.set_overview(overview(taskmanager("tm-1"), taskmanager("tm-2")))  # all free
    _, snapshot = mixed_word_count()
    view.set_job("job-1", snapshot)
    assert {what for *_, what in view.grid.cells()} == {"free"}


def test_without_a_cluster_the_plot_takes_no_samples(qtbot):
    view = SlotsView()
    qtbot.addWidget(view)
    view.plot.sample()
    assert len(view.plot.samples()[0]) == 0


def test_jobs_seen_together_get_different_colours(qtbot):
    colours = {job_colour(f"colour-test-{n}").name() for n in range(5)}
    assert len(colours) == 5
    assert job_colour("colour-test-0") == job_colour("colour-test-0")
