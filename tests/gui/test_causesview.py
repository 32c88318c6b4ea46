"""The chain of causes in the failures view: a lost TaskManager at the root, the failed
attempts, the restart, the aborted checkpoint and the restore under it, each with its
evidence; the same tree from a snapshot read back as a recording would give it."""

from __future__ import annotations

from dataclasses import replace

from clusterdeck.core.executiongraph import FixedDelay, ScheduleRestart
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.causes import CauseChain, CauseEvent, CauseKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.models.causesmodel import EVENT_ROLE, CauseChainModel
from clusterdeck.gui.views.failuresview import FAILURE_ROLE, FailuresView
from tests.unit.core.executiongraph.helpers import Harness, through_the_wire, word_count
from tests.unit.core.executiongraph.test_causes import Linked

JOB = "job-1"


def failover_snapshot() -> JobGraphSnapshot:
    """A streaming-like failover: tm-1 lost while checkpoint 4 was in progress; the region
    restarts from checkpoint 3. Through the wire, as an observer (or a recording) has it."""
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(1, 1.0),
                      pipelined=True)
    harness.start()
    harness.grant_slots()
    linked = Linked(harness)
    out = linked.lose("tm-1", "process exited (detected by last will)")
    failed = next(i.attempt_id for i in out if getattr(i, "failure", None))
    linked.causes.checkpoints_aborted((4,), failed, f"{failed} is FAILED", harness.now, None)
    (restart,) = [i for i in out if isinstance(i, ScheduleRestart)]
    for member in restart.subtasks:
        vertex_id, _, index = member.partition("#")
        linked.causes.restored(vertex_id, int(index), 3, restart.due, None)
    return through_the_wire(replace(harness.graph.snapshot(), causes=linked.causes.chain(),
                                    root_cause=linked.causes.root_failure()))


def shown(qtbot, snapshot: JobGraphSnapshot) -> FailuresView:
    view = FailuresView()
    qtbot.addWidget(view)
    view.show()
    view.set_snapshot(JOB, snapshot)
    view.show_job(JOB)
    return view


def test_the_chain_is_a_tree_with_the_lost_taskmanager_at_its_root(qtbot) -> None:
    view = shown(qtbot, failover_snapshot())

    rows = view.causes.event_rows()
    assert rows[0] == (0, "TaskManager lost: TaskManager tm-1 lost: process exited "
                          "(detected by last will)")
    assert [depth for depth, _ in rows] == [0, 1, 2, 3, 3, 1]
    assert [text.split(":")[0] for _, text in rows] == [
        "TaskManager lost", "Attempt failed", "Region restarted", "Checkpoint aborted",
        "Restored", "Attempt failed"]
    assert rows[4][1].startswith("Restored: 3 subtask(s) restored from checkpoint 3")
    assert "Chain of causes: 1 root cause, 6 events" in view.chain_title.text()
    assert view.chain.isExpanded(view.causes.index(0, 0))


def test_each_event_shows_its_evidence_first_then_what_it_caused(qtbot) -> None:
    view = shown(qtbot, failover_snapshot())
    root = view.causes.item(0, 0)

    evidence = [root.child(row, 0).text() for row in range(2)]
    assert evidence[0] == "message TaskManagerLost from resourcemanager"
    assert evidence[1].startswith("log jobmanager: TaskManager tm-1 lost")
    assert view.causes.item(0, 1).text() == "tm-1"
    failed = root.child(2, 0)
    assert failed.child(0, 0).text() == "message TaskManagerLost from resourcemanager"
    assert view.causes.itemFromIndex(failed.index().siblingAtColumn(1)).text() \
        .startswith("#0 Source on tm-1")


def test_clicking_an_attempts_failure_in_the_chain_selects_it_below(qtbot) -> None:
    view = shown(qtbot, failover_snapshot())
    failed = view.causes.item(0, 0).child(2, 0)
    event = failed.data(EVENT_ROLE)
    qtbot.waitExposed(view)

    view.chain.clicked.emit(failed.index())

    assert view.tree.currentItem().data(0, FAILURE_ROLE)[0].attempt_id == event.attempt_id


def test_an_ended_jobs_result_keeps_the_chain_of_its_last_snapshot(qtbot) -> None:
    snapshot = failover_snapshot()
    view = shown(qtbot, snapshot)
    view.set_result(JOB, p.JobResult(JOB, "word-count", JobStatus.FAILED,
                                     root_cause=snapshot.root_cause.to_dict()))
    view.set_snapshot(JOB, snapshot)
    assert view.causes.event_rows()[0][1].startswith("TaskManager lost")


def test_a_chain_that_breaks_its_links_is_refused_with_the_reason(qtbot) -> None:
    model = CauseChainModel()
    model.set_chain(CauseChain((CauseEvent(1, CauseKind.ATTEMPT_FAILED, 1.0, "x", 9),)), {})
    assert model.event_rows() == []
    assert model.item(0, 0).text().startswith("The chain of causes was refused: event 1 "
                                              "names a cause 9")
