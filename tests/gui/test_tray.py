"""Desktop habits (gui/controllers/tray.py, gui/models/health.py): job-end notifications while the
window is not in front, the cluster's health for the tray icon."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtWidgets import QMainWindow

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.controllers.tray import DesktopNotifier
from clusterdeck.gui.models.health import Health, cluster_health
from tests.gui.jobsnapshots import empty_snapshot


def overview(*states: p.TaskManagerState) -> p.ClusterOverview:
    tms = tuple(p.TaskManagerInfo(f"taskmanager-{i + 1}", state, "host", 100 + i, 2, 1, 0.2,
                                  0.0) for i, state in enumerate(states))
    return p.ClusterOverview("lab", tms, 2 * len(tms), len(tms), 99, 0.0)


REGISTERED, LOST = p.TaskManagerState.REGISTERED, p.TaskManagerState.LOST


@pytest.mark.parametrize(("args", "level", "words"), [
    (("", None, "none", {}), Health.NONE, "no cluster"),
    (("lab", overview(REGISTERED, REGISTERED), "connected", {"jobmanager": "running"}, 1),
     Health.OK, "2 TaskManagers, 2/4 slots free, 1 job running"),
    (("lab", overview(REGISTERED, LOST), "connected", {}), Health.WARN, "taskmanager-2 lost"),
    (("lab", overview(REGISTERED), "connected", {"taskmanager-2": "restarting"}),
     Health.WARN, "taskmanager-2 restarting"),
    (("lab", overview(REGISTERED), "connected", {"jobmanager": "crashed"}), Health.DOWN,
     "jobmanager crashed"),
    (("lab", overview(REGISTERED), "disconnected", {}), Health.DOWN, "broker is unreachable"),
    (("lab", None, "connected", {}), Health.WARN, "waiting for the JobManager"),
])
def test_the_clusters_health_in_one_word_and_one_line(args, level, words):
    health = cluster_health(*args)
    assert health.level is level and words in health.text


class Sender:
    def __init__(self, fail: str = "") -> None:
        self.calls: list[tuple[str, str, bool]] = []
        self.fail = fail

    def __call__(self, summary: str, body: str, critical: bool) -> None:
        if self.fail:
            raise RuntimeError(self.fail)
        self.calls.append((summary, body, critical))


@pytest.fixture
def window(qtbot):
    window = QMainWindow()
    qtbot.addWidget(window)
    return window


def notifier_for(window, sender, notices, qtbot) -> DesktopNotifier:
    notifier = DesktopNotifier(window, notices.append, lambda f: f(), send=sender,
                               with_tray=False)
    qtbot.addWidget(window)
    return notifier


def running(job_id: str):
    return dataclasses.replace(empty_snapshot(job_id), status=JobStatus.RUNNING)


def failed_result(job_id: str) -> p.JobResult:
    return p.JobResult(job_id, "wordcount", JobStatus.FAILED, 12.5, root_cause={
        "exception_type": "ValueError", "message": "record 777 is bad"})


def test_a_job_that_ends_while_the_window_is_behind_is_notified_once(qtbot, window):
    sender, notices = Sender(), []
    notifier = notifier_for(window, sender, notices, qtbot)
    notifier.job_seen("j1", running("j1"))
    with qtbot.waitSignal(notifier.sent, timeout=5000) as sent:
        notifier.job_ended("j1", failed_result("j1"))
    assert sent.args[2] == "desktop"
    [(summary, body, critical)] = sender.calls
    assert summary == "Job FAILED" and critical
    assert body == "wordcount (j1) failed after 12.5 s: ValueError: record 777 is bad"
    notifier.job_ended("j1", failed_result("j1"))  # the retained result again
    notifier.job_ended("j0", failed_result("j0"))  # never seen running: ended before
    qtbot.wait(200)
    assert len(sender.calls) == 1 and notices == []


def test_without_a_desktop_service_the_window_says_it(qtbot, window):
    notices: list[str] = []
    notifier = notifier_for(window, Sender(fail="no session bus"), notices, qtbot)
    notifier.job_seen("j1", running("j1"))
    with qtbot.waitSignal(notifier.sent, timeout=5000) as sent:
        notifier.job_ended("j1", dataclasses.replace(failed_result("j1"),
                                                     status=JobStatus.FINISHED))
    assert sent.args[2] == "window"
    assert notices == ["Job FINISHED: wordcount (j1) finished after 12.5 s "
                       "(no desktop notification: RuntimeError: no session bus)"]


def test_a_window_in_front_is_not_interrupted(qtbot, window, monkeypatch):
    sender = Sender()
    notifier = notifier_for(window, sender, [], qtbot)
    monkeypatch.setattr(notifier, "in_front", lambda: True)
    notifier.job_seen("j1", running("j1"))
    notifier.job_ended("j1", failed_result("j1"))
    qtbot.wait(200)
    assert sender.calls == []


def test_the_tray_icon_follows_the_health(qtbot, window):
    notifier = DesktopNotifier(window, print, lambda f: f(), send=Sender(), with_tray=True)
    notifier.set_health(cluster_health("lab", overview(REGISTERED, LOST), "connected", {}))
    assert notifier.tray is not None
    assert "taskmanager-2 lost" in notifier.tray.toolTip()
    notifier.shutdown()
