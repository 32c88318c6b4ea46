"""Replay: a job drawn as it was at an earlier moment, from its snapshot and its events."""

from __future__ import annotations

import dataclasses

from clusterdeck.core.executiongraph import ExecutionState, FixedDelay, TaskFailure
from clusterdeck.core.executiongraph.instructions import ExecutionStateChanged, JobStatusChanged
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, JobProgress
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.models.recorder import JobRecorder
from clusterdeck.gui.models.replay import JobHistory
from clusterdeck.gui.views.jobsview import JobsView
from clusterdeck.gui.views.replaybar import STEPS
from clusterdeck.gui.views.slotsview import SlotsView
from tests.gui.overviews import overview, taskmanager
from tests.unit.core.executiongraph.helpers import JOB_ID, Harness, word_count


def events_of(harness: Harness) -> list[object]:
    """The events a JobMaster publishes for the harness's instructions."""
    events: list[object] = []
    for change in harness.log:
        if isinstance(change, ExecutionStateChanged):
            execution = harness.graph.execution(change.attempt_id)
            slot = execution.slot if execution else None
            events.append(p.ExecutionStateEvent(
                JOB_ID, change.attempt_id, change.vertex_id, change.subtask, change.attempt,
                change.old, change.new, change.timestamp,
                slot.taskmanager_id if slot else None, slot.slot_index if slot else None))
        elif isinstance(change, JobStatusChanged):
            events.append(p.JobStatusEvent(JOB_ID, change.old, change.new, change.timestamp))
    return events


def a_job_with_a_restart() -> tuple[Harness, dict[str, float]]:
    """Two sources, one reducer; source 1 fails once and runs again. Returns the moments
    of interest."""
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(3, 1.0))
    harness.start()
    harness.grant_slots()
    moments = {"deployed": harness.now}
    harness.report(harness.attempt("source", 0), ExecutionState.RUNNING)
    harness.report(harness.attempt("source", 1), ExecutionState.RUNNING)
    moments["both running"] = harness.now
    harness.report(harness.attempt("source", 1), ExecutionState.FAILED,
                   failure=TaskFailure("ValueError", "bad", "Traceback ...\nValueError: bad"))
    moments["failed"] = harness.now
    harness.restart_due(harness.now + 2)
    harness.run_to_end()
    moments["end"] = harness.now
    return harness, moments


S = ExecutionState


def states(snapshot: JobGraphSnapshot) -> dict[tuple[str, int], ExecutionState]:
    return {(v.id, s.subtask): s.state for v in snapshot.vertices for s in v.subtasks}


def test_the_snapshot_alone_replays_every_moment_of_the_job():
    harness, moments = a_job_with_a_restart()
    history = JobHistory(harness.graph.snapshot())
    assert states(history.at(moments["both running"])) == {
        ("source", 0): S.RUNNING, ("source", 1): S.RUNNING, ("reduce", 0): S.CREATED}
    at_failure = history.at(moments["failed"])
    assert states(at_failure)[("source", 1)] is S.FAILED
    assert at_failure.root_cause is not None and at_failure.root_cause.message == "bad"
    assert len(at_failure.failures) == 1
    assert history.at(moments["both running"]).failures == ()
    assert set(states(history.at(moments["end"])).values()) == {S.FINISHED}
    assert history.at(moments["end"]).status is JobStatus.FINISHED
    assert history.at(moments["end"]).progress == JobProgress(finished=3, total=3)


def test_a_job_that_failed_in_the_same_moment_it_began_failing_replays_as_failed():
    harness, _ = a_job_with_a_restart()
    snapshot = dataclasses.replace(harness.graph.snapshot(), status=JobStatus.FAILED,
                                   status_timestamps={JobStatus.CREATED: 1.0,
                                                      JobStatus.FAILING: 5.0,
                                                      JobStatus.FAILED: 5.0})
    history = JobHistory(snapshot)
    assert history.status_at(4.9) is JobStatus.CREATED
    assert history.status_at(5.0) is JobStatus.FAILED
    assert history.at(history.end).status is JobStatus.FAILED


def test_a_restarted_subtask_shows_only_the_attempts_made_by_then():
    harness, moments = a_job_with_a_restart()
    history = JobHistory(harness.graph.snapshot())
    source = history.at(moments["failed"]).vertices[0].subtasks[1]
    assert [a.state for a in source.attempts] == [S.FAILED]
    later = history.at(moments["end"]).vertices[0].subtasks[1]
    assert [a.state for a in later.attempts] == [S.FAILED, S.FINISHED]


def test_slots_are_held_only_while_an_attempt_deploys_or_runs(qtbot):
    harness, moments = a_job_with_a_restart()
    history = JobHistory(harness.graph.snapshot())
    view = SlotsView()
    qtbot.addWidget(view)
    view.set_overview(overview(taskmanager("tm-1", free=2), taskmanager("tm-2", free=2)))
    view.set_replay(history.at(moments["both running"]), moments["both running"])
    assert sorted(what for *_, what in view.grid.cells()).count(JOB_ID) == 2
    assert "held 2 slots" in view.summary.text()
    view.set_replay(history.at(moments["end"]), moments["end"])
    assert {what for *_, what in view.grid.cells()} == {"free"}
    view.set_replay(None, None)
    assert "2 TaskManagers" in view.summary.text()


def test_recorded_events_tell_what_a_stale_snapshot_does_not_know_yet():
    harness = Harness(word_count(sources=2, reducers=1))
    harness.start()
    harness.grant_slots()
    stale = harness.graph.snapshot()
    harness.report(harness.attempt("source", 0), ExecutionState.RUNNING)
    history = JobHistory(stale, events_of(harness))
    assert states(history.at(harness.now))[("source", 0)] is S.RUNNING
    assert history.status_at(harness.now) is JobStatus.RUNNING


def test_the_recorder_keeps_each_jobs_events_bounded():
    recorder = JobRecorder(per_job=3, jobs=2)
    recorder.record([p.JobStatusEvent("a", JobStatus.CREATED, JobStatus.RUNNING, float(n))
                     for n in range(5)])
    recorder.record([p.JobStatusEvent("b", JobStatus.CREATED, JobStatus.RUNNING, 1.0)])
    assert [e.at for e in recorder.events("a")] == [2.0, 3.0, 4.0]
    recorder.record([p.JobStatusEvent("c", JobStatus.CREATED, JobStatus.RUNNING, 1.0)])
    assert recorder.job_ids() == ["b", "c"], "the job updated longest ago goes first"


def test_the_slider_replays_the_graph_and_its_end_returns_to_live(qtbot):
    harness, moments = a_job_with_a_restart()
    recorder = JobRecorder()
    recorder.record(events_of(harness))
    view = JobsView(recorder)
    qtbot.addWidget(view)
    live = harness.graph.snapshot()
    view.set_job(JOB_ID, live)
    assert view.replay.isEnabled()
    with qtbot.waitSignal(view.replay_changed) as replayed:
        view.replay.show_moment(moments["failed"] + 0.5)  # the next change is 1 s later
    snapshot, moment = replayed.args
    assert abs(moment - (moments["failed"] + 0.5)) < 0.1
    assert view.graph.cell("source", 1).state is S.FAILED
    assert view.status.text() == snapshot.status
    view.set_job(JOB_ID, live)
    assert view.graph.cell("source", 1).state is S.FAILED, "a snapshot does not end a replay"
    with qtbot.waitSignal(view.replay_changed) as back:
        view.replay.slider.setValue(STEPS)
    assert back.args == [None, None]
    assert view.graph.cell("source", 1).state is S.FINISHED
    assert view.replay.label.text() == "live"


def test_an_event_recolours_a_cell_before_the_next_snapshot(qtbot):
    harness = Harness(word_count(sources=2, reducers=1))
    harness.start()
    harness.grant_slots()
    view = JobsView()
    qtbot.addWidget(view)
    view.set_job(JOB_ID, harness.graph.snapshot())
    harness.report(harness.attempt("source", 0), ExecutionState.RUNNING)
    view.apply_events(events_of(harness))
    assert view.graph.cell("source", 0).state is S.RUNNING
    old = p.ExecutionStateEvent(JOB_ID, harness.attempt("source", 0), "source", 0, 0,
                                S.CREATED, S.SCHEDULED, 0.0)
    view.apply_events([old])
    assert view.graph.cell("source", 0).state is S.RUNNING, "an old event changes nothing"
