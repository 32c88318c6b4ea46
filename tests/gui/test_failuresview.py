"""The failures view: root cause first, the history, the user's frames marked, and a
click that finds the subtask in the ExecutionGraph."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QPoint, Qt

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpointstats import (
    CheckpointStatsSnapshot,
    RestoredCheckpointStats,
)
from clusterdeck.core.protocol.failures import FailureRecord, TaskFailure
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.views.failuresview import FailuresView
from clusterdeck.gui.views.failuretext import failure_html, traceback_html, user_frames
from clusterdeck.gui.views.jobsview import JobsView
from tests.gui.jobsnapshots import mixed_word_count

JOB = "3892b72ea8554705"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    f'  File "/home/u/.local/clusters/c/taskmanagers/tm-2/jobs/{JOB}/600b/failing_job.py", '
    "line 12, in check\n"
    '    raise ValueError(f"record {number} is bad")\n'
    '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads\n'
    "    return _default_decoder.decode(s)\n"
    "ValueError: record 777 is bad\n")


def failure(subtask: int, at: float, attempt: int = 0, message: str = "record 777 is bad"
            ) -> FailureRecord:
    return FailureRecord(
        attempt_id=f"{JOB}/source#{subtask}/a{attempt}", vertex_id="source", subtask=subtask,
        attempt=attempt, taskmanager_id="tm-2", slot_index=1, start_time=at - 4, timestamp=at,
        input_splits=(1, 3), failure=TaskFailure(
            "ValueError", message, TRACEBACK, ("reading input split 1", "attempt failed")))


def test_the_frames_of_the_job_file_are_the_users_and_library_frames_are_not():
    assert user_frames(TRACEBACK, JOB) == [1, 2]
    marked = traceback_html(TRACEBACK, JOB)
    assert '<b style="color:#b03a36">    raise ValueError' in marked
    assert '<b style="color:#b03a36">  File "/usr/lib' not in marked


def test_the_folder_a_job_was_submitted_from_marks_frames_too(tmp_path):
    job_file = tmp_path / "job.py"
    text = f'Traceback (most recent call last):\n  File "{tmp_path}/helpers.py", line 3, in f\n' \
           "    x()\nKeyError: 1\n"
    assert user_frames(text, "other-job", job_file) == [1, 2]
    assert user_frames(text, "other-job", Path("/elsewhere/job.py")) == []


def test_the_record_shows_where_when_the_traceback_and_the_log(qtbot):
    html = failure_html(failure(2, 1000.0), root_cause=True, job_id=JOB,
                        vertex_names={"source": "numbers -> check"})
    for part in ("Root cause", "ValueError: record 777 is bad", "numbers -&gt; check",
                 "tm-2, slot 1", "1, 3", "(4.0 s)", "reading input split 1"):
        assert part in html, part


def test_root_cause_first_then_the_history_oldest_first(qtbot):
    view = FailuresView()
    qtbot.addWidget(view)
    view.show()
    history = (failure(2, 1010.0, attempt=1, message="second"), failure(2, 1000.0))
    view.show_job(JOB)
    view.set_result(JOB, p.JobResult(JOB, "failing_job", JobStatus.FAILED,
                                     root_cause=history[1].to_dict(),
                                     failure_history=tuple(f.to_dict() for f in history)))
    items = view.failure_items()
    assert [item.text(0) for item in items] == ["ValueError: record 777 is bad",
                                               "ValueError: record 777 is bad",
                                               "ValueError: second"]
    assert view.tree.topLevelItem(0).text(0) == "Root cause"
    assert "Root cause" in view.detail.toHtml()
    assert "raise ValueError" in view.detail.toPlainText()
    assert "2 failures" in view.title.text()


def test_clicking_a_failure_selects_and_centres_its_subtask_in_the_graph(qtbot):
    _, snapshot = mixed_word_count()  # source 2 failed
    jobs = JobsView()
    failures = FailuresView()
    for widget in (jobs, failures):
        qtbot.addWidget(widget)
        widget.show()
    failures.failure_selected.connect(jobs.graph.focus)
    jobs.set_job("job-1", snapshot)
    failures.set_snapshot("job-1", snapshot)
    failures.show_job("job-1")
    item = failures.failure_items()[0]
    assert (item.text(1), item.text(2)) == ("#2 Source", "0")
    qtbot.waitExposed(failures)
    rect = failures.tree.visualItemRect(item)
    where = QPoint(rect.left() + 10, rect.center().y())
    with qtbot.waitSignal(failures.failure_selected) as selected:
        qtbot.mouseClick(failures.tree.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert selected.args == ["source", 2]
    assert jobs.graph.selected == ("source", 2)
    assert jobs.attempts.subtask == ("source", 2)


def test_a_hidden_view_draws_what_it_kept_when_it_is_shown(qtbot):
    _, snapshot = mixed_word_count()
    view = FailuresView()
    qtbot.addWidget(view)
    view.show_job("job-1")
    view.set_snapshot("job-1", snapshot)
    assert view.failure_items() == []
    view.show()
    assert len(view.failure_items()) == 2  # the root cause, and the history's one failure


def test_a_job_without_failures_says_so(qtbot):
    _, snapshot = mixed_word_count()
    view = FailuresView()
    qtbot.addWidget(view)
    view.show()
    view.set_snapshot("job-1", replace(snapshot, failures=(), root_cause=None))
    view.show_job("job-1")
    assert view.failure_items() == []
    assert view.title.text().startswith("No failures")


def test_a_streaming_job_that_resumed_after_a_failover_names_the_checkpoint(qtbot):
    _, snapshot = mixed_word_count()  # source 2 failed
    restored_at = time.mktime((2026, 11, 26, 12, 3, 41, 0, 0, -1))
    resumed = replace(snapshot, kind=JobKind.STREAMING, checkpoints=CheckpointStatsSnapshot(
        completed=7, restored=RestoredCheckpointStats(7, restored_at)))
    view = FailuresView()
    qtbot.addWidget(view)
    view.show()
    view.show_job("job-1")
    view.set_snapshot("job-1", replace(resumed, checkpoints=CheckpointStatsSnapshot()))
    assert view.restored.isHidden()

    view.set_snapshot("job-1", resumed)

    assert view.restored.isVisible()
    assert view.restored.text().endswith("restored from checkpoint 7 (12:03:41)")
    view.set_result("job-1", p.JobResult("job-1", "rate", JobStatus.CANCELED))
    assert "checkpoint 7" in view.restored.text() and view.restored.isVisible()
    view.set_snapshot("batch", snapshot)
    view.show_job("batch")
    assert view.restored.isHidden()
