"""Job snapshots made by the real ExecutionGraph and Scheduler, driven through a few
events by the executiongraph tests' harness, so the views are tested against the
``JobGraphSnapshot`` a JobMaster will publish."""

from __future__ import annotations

from clusterdeck.core.executiongraph import ExecutionState, FixedDelay, TaskFailure
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, JobProgress
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.views.jobsview import JobsView
from tests.unit.core.executiongraph.helpers import Harness, word_count


def mixed_word_count() -> tuple[Harness, JobGraphSnapshot]:
    """word-count with four sources on four slots: one running, one finished, one failed
    (a restart is pending), one still deploying; the two reducers wait (CREATED)."""
    harness = Harness(word_count(sources=4, reducers=2), restart=FixedDelay(3, 5.0))
    harness.start()
    harness.grant_slots()
    harness.report(harness.attempt("source", 0), ExecutionState.RUNNING)
    harness.report(harness.attempt("source", 1), ExecutionState.RUNNING)
    harness.report(harness.attempt("source", 1), ExecutionState.FINISHED)
    harness.report(harness.attempt("source", 2), ExecutionState.RUNNING)
    harness.report(harness.attempt("source", 2), ExecutionState.FAILED,
                   failure=TaskFailure("ValueError", "bad line 17",
                                       "Traceback (most recent call last):\n  ...\n"
                                       "ValueError: bad line 17",
                                       ("reading part-2.txt", "parsing line 17")))
    return harness, harness.graph.snapshot()


def empty_snapshot(job_id: str) -> JobGraphSnapshot:
    """A job without vertices, just created."""
    return JobGraphSnapshot(job_id=job_id, name="empty", epoch=0, kind=JobKind.DATAFLOW,
                            status=JobStatus.CREATED, status_timestamps={},
                            progress=JobProgress(0, 0), vertices=())


def shown_word_count(qtbot):
    """A JobsView on screen showing ``mixed_word_count``'s job-1; the view, and the
    harness and snapshot of ``mixed_word_count``."""
    harness, snapshot = mixed_word_count()
    view = JobsView()
    qtbot.addWidget(view)
    view.resize(1000, 600)
    view.show()
    qtbot.waitExposed(view)
    view.set_job("job-1", snapshot)
    return view, harness, snapshot
