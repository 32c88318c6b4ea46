"""The checkpoints view: a streaming job's checkpoints newest first under a summary line,
failed ones marked, a selection that survives new checkpoints, and a reason instead of an
empty table for a batch job. Fed with the summary a real coordinator's history gives."""

from __future__ import annotations

import time
from dataclasses import replace

from PySide6.QtCore import QItemSelectionModel, Qt

from clusterdeck.core.checkpointing import (
    CheckpointCoordinator,
    CheckpointOptions,
    CheckpointTask,
    StateHandle,
    SubtaskAck,
)
from clusterdeck.core.checkpointing.stats import stats_of
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.checkpointstats import RestoredCheckpointStats
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, Truncation
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.models.checkpointsmodel import (
    BATCH_JOB,
    COLUMNS,
    FAILED_ROW,
    HISTORY_LEFT_OUT,
    NO_JOB,
    NO_SUMMARY,
    NONE_YET,
    STATS_ROLE,
    CheckpointsModel,
)
from clusterdeck.gui.models.formatting import clock
from clusterdeck.gui.views.checkpointsview import CheckpointsView
from tests.gui.jobsnapshots import empty_snapshot

JOB = "5f0c2a9e1b7d4c36"
TASKS = (CheckpointTask("source#0", "a-s0", source=True), CheckpointTask("source#1", "a-s1",
                                                                        source=True))
START = time.time() - 60  # the coordinator's clock: a minute ago, so the times are today's


class Checkpoints:
    """A coordinator driven through checkpoints as a job's tasks would."""

    def __init__(self) -> None:
        self.coordinator = CheckpointCoordinator(
            JOB, CheckpointOptions(interval=1.0, tolerable_failures=100), now=START)
        self.now = START

    def complete(self) -> None:
        self.now += 1
        self.coordinator.trigger(self.now, TASKS)
        checkpoint_id = self.coordinator.in_progress
        for task in TASKS:
            self.coordinator.acknowledge(checkpoint_id, task.subtask_id, task.attempt_id,
                                         SubtaskAck(StateHandle(
                                             f"chk-{checkpoint_id}/{task.subtask_id}.state",
                                             2048, "0" * 64), alignment=0.004), self.now + 0.25)

    def decline(self, reason: str) -> None:
        self.now += 1
        self.coordinator.trigger(self.now, TASKS)
        self.coordinator.decline(self.coordinator.in_progress, "source#1", "a-s1", reason,
                                 self.now + 0.5)

    def trigger(self) -> None:
        self.now += 1
        self.coordinator.trigger(self.now, TASKS)

    def snapshot(self, restored: RestoredCheckpointStats | None = None) -> JobGraphSnapshot:
        return replace(empty_snapshot(JOB), kind=JobKind.STREAMING,
                       checkpoints=stats_of(self.coordinator, restored))


def view_of(qtbot) -> tuple[CheckpointsModel, CheckpointsView]:
    model = CheckpointsModel()
    view = CheckpointsView(model)
    qtbot.addWidget(view)
    view.show()
    return model, view


def texts(model: CheckpointsModel, row: int) -> dict[str, str]:
    return {title: model.data(model.index(row, column))
            for column, title in enumerate(COLUMNS)}


def test_a_streaming_jobs_checkpoints_are_listed_newest_first_under_the_summary(qtbot):
    model, view = view_of(qtbot)
    job = Checkpoints()
    job.complete()
    job.decline("disk full")
    job.trigger()
    restore = RestoredCheckpointStats(1, START + 2.5)

    model.show_job(JOB)
    model.set_snapshot(JOB, job.snapshot(restore))

    assert model.rowCount() == 3
    assert [model.data(model.index(row, 0)) for row in range(3)] == ["3", "2", "1"]
    assert texts(model, 2) == {
        "ID": "1", "Type": "checkpoint", "Status": "completed", "Triggered": clock(START + 1),
        "Duration": "250 ms", "Size": "4.0 KiB", "Acknowledged": "2/2", "Alignment": "4 ms",
        "Details": ""}
    assert texts(model, 0)["Status"] == "in progress"
    assert texts(model, 0)["Duration"] == "\u2013"
    assert texts(model, 0)["Acknowledged"] == "0/2"
    summary = view.summary.text()
    assert summary.startswith("Completed 1 \u00b7 failed 1 \u00b7 aborted 0 \u00b7 in progress 1")
    assert f"latest: checkpoint 1 at {clock(START + 1.25)}, 250 ms, 4.0 KiB" in summary
    assert f"restored from checkpoint 1 ({clock(START + 2.5)})" in summary
    assert view.stack.currentWidget() is view.table and view.summary.isVisible()


def test_a_failed_checkpoint_is_marked_and_says_why(qtbot):
    model, _ = view_of(qtbot)
    job = Checkpoints()
    job.complete()
    job.decline("no space left on device")
    model.show_job(JOB)
    model.set_snapshot(JOB, job.snapshot())

    failed, completed = model.index(0, 0), model.index(1, 0)

    assert texts(model, 0)["Status"] == "FAILED"
    assert texts(model, 0)["Details"] == "source#1 declined: no space left on device"
    assert model.data(failed, Qt.ItemDataRole.BackgroundRole).color() == FAILED_ROW
    assert model.data(completed, Qt.ItemDataRole.BackgroundRole) is None
    assert "no space left" in model.data(model.index(0, COLUMNS.index("Details")),
                                         Qt.ItemDataRole.ToolTipRole)


def test_an_aborted_checkpoint_is_not_a_failure_and_a_savepoint_says_where_it_went(qtbot):
    """A failover aborts the checkpoint in progress: grey, counted apart from failures. A
    stop with savepoint is a row of its own, with the savepoint's folder."""
    model, view = view_of(qtbot)
    job = Checkpoints()
    job.trigger()
    job.coordinator.abort_in_progress(job.now + 0.1, "source#0/a-s0 is FAILED")
    job.coordinator.request_savepoint(stop=True, savepoint=True)
    job.complete()
    job.coordinator.savepoint_written(job.coordinator.history()[-1].checkpoint_id,
                                      "/sp/savepoint-2", job.now + 0.5)
    model.show_job(JOB)
    model.set_snapshot(JOB, job.snapshot())

    assert [texts(model, row)["Type"] for row in range(2)] == ["savepoint (stop)", "checkpoint"]
    assert texts(model, 0)["Details"] == "written to /sp/savepoint-2"
    assert (texts(model, 1)["Status"], texts(model, 1)["Details"]) == (
        "aborted", "source#0/a-s0 is FAILED")
    assert model.data(model.index(1, 0), Qt.ItemDataRole.BackgroundRole) is None
    assert view.summary.text().startswith(
        "Completed 1 \u00b7 failed 0 \u00b7 aborted 1 \u00b7 in progress 0")


def test_a_new_checkpoint_comes_in_at_the_top_and_the_selected_one_stays_selected(qtbot):
    model, view = view_of(qtbot)
    job = Checkpoints()
    job.complete()
    job.complete()
    model.show_job(JOB)
    model.set_snapshot(JOB, job.snapshot())
    view.table.selectionModel().setCurrentIndex(
        model.index(1, 0), QItemSelectionModel.SelectionFlag.ClearAndSelect
        | QItemSelectionModel.SelectionFlag.Rows)
    job.complete()

    with qtbot.waitSignal(model.rowsInserted, timeout=1000):
        model.set_snapshot(JOB, job.snapshot())

    current = view.table.selectionModel().currentIndex()
    assert model.data(current, STATS_ROLE).checkpoint_id == 1
    assert [model.data(model.index(row, 0)) for row in range(3)] == ["3", "2", "1"]


def test_the_history_is_bounded_as_the_snapshot_bounds_it(qtbot):
    model, _ = view_of(qtbot)
    job = Checkpoints()
    for _ in range(25):
        job.complete()
    model.show_job(JOB)
    model.set_snapshot(JOB, job.snapshot())
    assert model.rowCount() == 20 and model.data(model.index(0, 0)) == "25"
    job.complete()
    model.set_snapshot(JOB, job.snapshot())
    assert model.rowCount() == 20
    assert [model.data(model.index(row, 0)) for row in (0, 19)] == ["26", "7"]


def test_a_batch_job_says_it_has_no_checkpoints_instead_of_an_empty_table(qtbot):
    model, view = view_of(qtbot)
    assert view.empty.text() == NO_JOB and view.stack.currentWidget() is view.empty
    model.set_snapshot("batch-1", empty_snapshot("batch-1"))
    model.show_job("batch-1")
    assert view.empty.text() == BATCH_JOB
    assert view.stack.currentWidget() is view.empty and not view.summary.isVisible()


def test_a_streaming_job_without_checkpoints_yet_or_without_a_summary_says_so(qtbot):
    model, view = view_of(qtbot)
    model.show_job(JOB)
    model.set_snapshot(JOB, Checkpoints().snapshot())
    assert view.empty.text() == NONE_YET
    assert view.summary.text().startswith(
        "Completed 0 \u00b7 failed 0 \u00b7 aborted 0 \u00b7 in progress 0")
    model.set_snapshot(JOB, replace(empty_snapshot(JOB), kind=JobKind.STREAMING))
    assert view.empty.text() == NO_SUMMARY and not view.summary.isVisible()


def test_a_reduced_snapshot_without_the_history_keeps_the_summary(qtbot):
    model, view = view_of(qtbot)
    job = Checkpoints()
    job.complete()
    full = job.snapshot()
    reduced = replace(full, truncated=Truncation.CHECKPOINTS,
                      checkpoints=replace(full.checkpoints, history=()))
    model.show_job(JOB)
    model.set_snapshot(JOB, reduced)
    assert model.rowCount() == 0 and view.empty.text() == HISTORY_LEFT_OUT
    assert "latest: checkpoint 1" in view.summary.text()


def test_the_window_shows_the_chosen_jobs_checkpoints_from_the_bridge(qtbot):
    window = MainWindow()
    qtbot.addWidget(window)
    job = Checkpoints()
    job.complete()
    window.bridge.route(topics.job_state(JOB), p.JobSnapshot(JOB, job.snapshot()))
    qtbot.waitUntil(lambda: JOB in window.jobs.snapshots, timeout=5000)

    window.choose_job(JOB)

    assert window.checkpoints_model.rowCount() == 1
    assert window.checkpoints.summary.text().startswith("Completed 1")
    assert window.checkpoints_dock.widget() is window.checkpoints
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert window.checkpoints_dock.toggleViewAction() in view_menu.actions()
    window.bridge.reset()
    assert window.checkpoints.empty.text() == NO_JOB
