"""The ExecutionGraph view draws a job's snapshot: boxes, cells by state, edges, clicks."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import Qt

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.gui.models.graphlayout import layers
from clusterdeck.gui.models.palette import BACKPRESSURE_COLOURS, execution_colour
from clusterdeck.gui.views.graphview import MAX_FIT_SCALE
from clusterdeck.gui.views.jobsview import JobsView
from tests.gui.jobsnapshots import mixed_word_count, shown_word_count

S = ExecutionState


def subtask_states(snapshot):
    return {(v.id, s.subtask): s.state for v in snapshot.vertices for s in v.subtasks}


def test_every_subtask_cell_is_coloured_by_its_state(qtbot):
    _, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.set_job("job-1", snapshot)
    graph = view.graph
    states = subtask_states(snapshot)
    assert {S.RUNNING, S.FINISHED, S.FAILED, S.DEPLOYING, S.CREATED} <= set(states.values())
    assert {(c.vertex_id, c.subtask) for c in graph.cells()} == set(states)
    for cell in graph.cells():
        expected = execution_colour(states[(cell.vertex_id, cell.subtask)])
        assert cell.brush().color() == expected, (cell.vertex_id, cell.subtask)
    assert [e.strategy for e in graph.edges] == ["HASH"]
    assert view.status.text() == JobStatus.RUNNING
    assert view.progress.value() == 1 and view.progress.maximum() == 6


def test_clicking_a_cell_selects_the_subtask_and_shows_its_attempts(qtbot):
    view, harness, _snapshot = shown_word_count(qtbot)
    graph = view.graph
    target = graph.cell("source", 2)
    where = graph.mapFromScene(target.sceneBoundingRect().center())
    with qtbot.waitSignal(graph.subtask_clicked, timeout=1000) as clicked:
        qtbot.mouseClick(graph.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert clicked.args == ["source", 2]
    assert graph.selected == ("source", 2)
    assert view.attempts.table.rowCount() == 1
    assert "ValueError: bad line 17" in view.attempts.detail.toPlainText()
    assert "parsing line 17" in view.attempts.detail.toPlainText()

    harness.restart_due(harness.now + 10)
    view.set_job("job-1", harness.graph.snapshot())
    assert view.attempts.table.rowCount() == 2, "the panel follows the selected subtask"
    assert graph.cell("source", 2).state is not S.FAILED


def test_a_new_snapshot_of_the_same_job_recolours_the_cells_it_drew(qtbot):
    harness, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.set_job("job-1", snapshot)
    box = view.graph.boxes["source"]
    harness.report(harness.attempt("source", 0), S.FINISHED)
    view.set_job("job-1", harness.graph.snapshot())
    assert view.graph.boxes["source"] is box
    assert box.cells[0].brush().color() == execution_colour(S.FINISHED)


def test_wheel_zooms_and_fit_shows_everything(qtbot):
    _, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.resize(900, 500)
    view.set_job("job-1", snapshot)
    graph = view.graph
    before = graph.transform().m11()
    graph.zoom_by(1.5)
    assert graph.transform().m11() == before * 1.5
    graph.fit()
    assert graph.transform().m11() <= MAX_FIT_SCALE
    scene = graph.mapToScene(graph.viewport().rect()).boundingRect()
    assert scene.contains(graph.scene().itemsBoundingRect())


def test_vertices_are_layered_left_to_right():
    assert layers(["a", "b", "join", "sink"],
                  [("a", "join"), ("b", "join"), ("join", "sink"), ("a", "sink")]) == [
        ["a", "b"], ["join"], ["sink"]]


def test_a_new_job_is_shown_once_the_one_on_screen_has_ended(qtbot):
    _, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.set_job("job-1", snapshot)
    view.set_job("job-2", replace(snapshot, job_id="job-2"))
    assert view.current_job == "job-1", "job-1 still runs: it stays on screen"
    view.set_job("job-1", replace(snapshot, status=JobStatus.FINISHED))
    view.set_job("job-3", replace(snapshot, job_id="job-3"))
    assert view.current_job == "job-3"
    assert view.jobs.count() == 3


def test_another_job_does_not_inherit_the_selected_subtask(qtbot):
    _, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.set_job("job-1", snapshot)
    view.graph.select("source", 1)
    view.graph.show_snapshot(replace(snapshot, job_id="job-2"))
    assert view.graph.selected is None


def live(vertex: str, subtask: int, records: int, backpressured: float = 0.0,
         watermark: float | None = None) -> p.AttemptMetrics:
    return p.AttemptMetrics("job-1", vertex, subtask, 0, f"job-1/{vertex}/{subtask}/0",
                            records, records, 0, 0, 0.0, False, backpressured, watermark)


def feed(view: JobsView, seconds: int, *numbers_at: Callable[[int], list[p.AttemptMetrics]]
         ) -> None:
    """``seconds`` messages a second apart, ending now, as the bridge's ticks bring them."""
    now = time.time()
    for second in range(seconds):
        attempts = [n for make in numbers_at for n in make(second)]
        view.show_metrics(view.metrics.add([p.TaskManagerMetrics(
            "taskmanager-1", now - seconds + 1 + second, tuple(attempts))]))


def test_a_streaming_vertex_shows_its_rates_backpressure_band_and_watermark(qtbot):
    _, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.set_job("job-1", replace(snapshot, kind=JobKind.STREAMING))
    sources = lambda s: [live("source", i, 100 * s, 0.7 * s, 40.0 + s + i)  # noqa: E731
                         for i in range(4)]
    reducers = lambda s: [live("reduce", i, 10 * s, 0.02 * s, 39.5 + s)  # noqa: E731
                          for i in range(2)]

    feed(view, 4, sources, reducers)

    source, reduce = view.graph.boxes["source"], view.graph.boxes["reduce"]
    assert source.pressure is not None and source.watermark is not None
    assert (source.pressure.band, source.pressure.text()) == ("HIGH", "HIGH 70%")
    assert source.pressure.brush().color() == BACKPRESSURE_COLOURS["HIGH"]
    assert source.watermark.text() == "watermark 43.000 s"  # the smallest subtask's
    assert source._numbers.text() == "in 400/s  out 400/s  busy 0%"
    assert reduce.pressure is not None and reduce.pressure.band == "OK"
    assert reduce.pressure.brush().color() == BACKPRESSURE_COLOURS["OK"]
    assert "backpressure HIGH: 70% of the time" in source.toolTip()
    assert source.rect().height() > view.graph.boxes["reduce"].cells[0].y()


def test_a_streaming_vertex_without_a_watermark_says_so(qtbot):
    _, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.set_job("job-1", replace(snapshot, kind=JobKind.STREAMING))
    feed(view, 3, lambda s: [live("source", 0, 10 * s, 0.3 * s)])
    source = view.graph.boxes["source"]
    assert source.watermark is not None and source.pressure is not None
    assert source.watermark.text() == "no watermark"
    assert source.pressure.text() == "LOW 30%"


def test_a_batch_vertex_shows_its_numbers_as_before(qtbot):
    _, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.set_job("job-1", snapshot)
    feed(view, 3, lambda s: [live("source", 0, 1000 * s)])
    source = view.graph.boxes["source"]
    assert source.pressure is None and source.watermark is None
    assert source._numbers.text() == "in 2.0k  out 2.0k (1.0k/s)  busy 0%"
    assert "backpressure" not in source.toolTip() and "watermark" not in source.toolTip()
    assert source.cells[0].y() == 78.0  # the header of a batch vertex, as it was
