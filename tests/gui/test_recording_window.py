"""A recording handed over and opened in a fresh window, with the cluster it came from
stopped: the views show the failed run as the live window did."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from clusterdeck.core.cli.main import main as cli_main
from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.recorder.export import describe, export
from clusterdeck.core.recorder.replay import RecordedEvent, replay
from clusterdeck.core.recorder.store import FILE_NAME
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.controllers.recordings import recent_recordings, remember_recording
from clusterdeck.gui.session import SessionMode, SessionState
from clusterdeck.gui.views.failuresview import FAILURE_ROLE
from clusterdeck.gui.views.jobsview import job_span
from tests.integration.clusters import running_cluster, wait_result
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


FLAKY = """
import os

MARKER = {marker!r}


def check(number):
    if number == 777 and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        raise ValueError("record 777 fails the first time")
    return number * 2


def build(env):
    env.set_job_name("flaky_job")
    env.set_parallelism(4)
    env.from_range(0, 1000).map(check).collect()
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, str, str]:
    """A real cluster runs a job that fails once and then succeeds and one that fails for
    good; the recording of both is exported, the cluster stops: (the exported file, the
    failed job's id, the flaky job's id)."""
    folder = tmp_path_factory.mktemp("handed-over")
    target = folder / "failed-run.cdrec"
    flaky = folder / "flaky_job.py"
    flaky.write_text(FLAKY.format(marker=str(folder / "failed-once")))
    # On Spark, not local execution: a job that runs in milliseconds can fall between two
    # of the TaskManagers' samples (CPU, JVM heap, once a second), which the test reads.
    with running_cluster("auto", **{"restart-strategy.type": "none",
                                    "taskmanager.local-execution.max-records": 0}) as (
            cluster, _):
        with JobClient(cluster.config, connect_timeout=30) as client:
            flaky_id = client.submit(flaky, restart_strategy={
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 2,
                "restart-strategy.fixed-delay.delay": 0.2})
            assert wait_result(client, flaky_id, 180).status is p.JobStatus.FINISHED
            job_id = client.submit(EXAMPLES / "failing_job.py")
            assert wait_result(client, job_id, 180).status is p.JobStatus.FAILED
        recording = paths.cluster_dir(cluster.cluster_id) / FILE_NAME
        wait_for(lambda: {job_id, flaky_id} <= {j.job_id for j in describe(recording).jobs},
                 30, "both results in the recording")
        wait_for(lambda: _has_final_numbers(recording, job_id), 30,
                 "the failed job's last numbers in the recording")
        export(recording, target, [flaky_id, job_id])
    return target, job_id, flaky_id


def _has_final_numbers(recording: Path, job_id: str) -> bool:
    """QoS 0 numbers travel apart from the job's end: the recorder may write them later."""
    return any(isinstance(item, RecordedEvent)
               and isinstance(item.message, p.TaskManagerMetrics)
               and any(a.job_id == job_id and a.final for a in item.message.attempts)
               for item in replay(recording))


@pytest.fixture(scope="module")
def failed_run(runs) -> tuple[Path, str]:
    return runs[0], runs[1]


def test_a_job_that_failed_once_then_finished_shows_its_failure_offline(qtbot, runs):
    path, _, flaky_id = runs
    window = MainWindow()
    qtbot.addWidget(window)
    window.recordings.open(path)
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith(
        f"Recording {path.name}"), timeout=30_000)
    window.choose_job(flaky_id)
    assert window.jobs.snapshots[flaky_id].status is JobStatus.FINISHED
    window.failures_dock.raise_()
    qtbot.waitUntil(lambda: bool(window.failures.failure_items()), timeout=5000)
    failure = window.failures.failure_items()[0].data(0, FAILURE_ROLE)[0]
    assert failure.exception_type == "ValueError"
    assert "record 777 fails the first time" in window.failures.detail.toPlainText()
    # the chain of causes, as the JobMaster linked it, from the recorded snapshot
    rows = window.failures.causes.event_rows()
    assert rows[0] == (0, "Attempt failed: ValueError: record 777 fails the first time")
    assert rows[1][0] == 1 and rows[1][1].startswith("Region restarted: a region of")
    # the failed attempt's deployment is among the recorded messages
    window.messages_dock.raise_()
    qtbot.waitUntil(lambda: window.messages.model.row_count() > 0, timeout=5000)
    assert any(record.type_name == "SubmitTasks" and failure.attempt_id in repr(record.message)
               for record in window.messages.model.records())


def test_a_recording_opens_offline_and_every_view_shows_the_failed_run(qtbot, failed_run):
    path, job_id = failed_run
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    window.recordings.open(path)
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith(
        f"Recording {path.name}"), timeout=30_000)
    assert "recording failed-run.cdrec (offline)" in window.windowTitle()
    assert not window.session.state.active

    window.choose_job(job_id)
    window.failures_dock.raise_()
    qtbot.waitUntil(lambda: bool(window.failures.failure_items()), timeout=5000)
    (root, *_) = window.failures.failure_items()
    assert root.text(0) == "ValueError: record 777 is bad"
    assert "raise ValueError" in window.failures.detail.toPlainText()

    window.messages_dock.raise_()
    qtbot.waitUntil(lambda: window.messages.model.row_count() > 0, timeout=5000)
    types = {record.type_name for record in window.messages.model.records()}
    assert {"SubmitTasks", "UpdateTaskExecutionStates", "TaskManagerHeartbeat"} <= types

    window.logs_dock.raise_()
    window.logs.text.setText("record 777")
    window.logs.search()
    qtbot.waitUntil(lambda: bool(window.logs.lines) and all(
        "record 777" in x.line.lower() for x in window.logs.lines), timeout=5000)
    assert any(x.process.startswith("taskmanager") for x in window.logs.lines)

    # from the failure to its log lines, and from a line back to its subtask
    window.failures_dock.raise_()
    window.failures.tree.setCurrentItem(window.failures.failure_items()[0])
    attempt_id = window.failures.failure_items()[0].data(0, FAILURE_ROLE)[0].attempt_id
    assert window.failures.log_button.isEnabled()
    window.failures.log_button.click()
    assert window.logs.text.text() == attempt_id
    qtbot.waitUntil(lambda: bool(window.logs.lines) and all(
        attempt_id in x.line for x in window.logs.lines), timeout=5000)
    window.jobs.graph.selected = None
    output = window.logs.output
    output.moveCursor(output.textCursor().MoveOperation.Start)
    spot = output.cursorRect().center()
    qtbot.mouseDClick(output.viewport(), Qt.MouseButton.LeftButton, pos=spot)
    vertex_id, subtask = attempt_id.split("/")[1].split("#")
    assert window.jobs.graph.selected == (vertex_id, int(subtask))

    qtbot.waitUntil(lambda: bool(window.jobs.graph.numbers), timeout=5000)
    # as recorded: the failed attempt's last numbers (it may fail before a batch ends, so
    # with no records counted yet) and its time
    recorded = window.jobs.graph.numbers.get(vertex_id)
    assert recorded is not None and recorded.subtasks >= 1 and recorded.busy > 0
    processes = window.metrics.processes
    assert any(series.cpu for series in processes.values()), "the recorded CPU samples"
    assert any(series.heap for series in processes.values()), "the recorded JVM heap"

    history = window.jobs.history()
    assert history is not None
    start, end = job_span(window.jobs.snapshots[job_id])
    assert history.at(start).status is not JobStatus.FAILED  # the slider replays it
    assert history.at(end + 0.01).status is JobStatus.FAILED


def test_a_cluster_shown_keeps_the_window_from_opening_a_recording(qtbot, failed_run):
    path, _ = failed_run
    window = MainWindow()
    qtbot.addWidget(window)
    window.session.state = SessionState(SessionMode.RUNNING, "lab")
    window.recordings.open(path)
    assert window.recordings.recording is None
    assert "stop or detach the cluster first" in window.statusBar().currentMessage()


def test_recent_recordings_keep_the_newest_eight_that_still_exist(qtbot, tmp_path):
    files = [tmp_path / f"run-{n}.cdrec" for n in range(10)]
    for file in files:
        file.write_bytes(b"")
        remember_recording(file)
    assert recent_recordings() == [f.resolve() for f in reversed(files[2:])]
    remember_recording(files[5])
    assert recent_recordings()[:2] == [files[5].resolve(), files[9].resolve()]
    files[9].unlink()
    assert files[9].resolve() not in recent_recordings()


def test_the_file_menu_offers_the_recent_recordings(qtbot, failed_run):
    path, _ = failed_run
    window = MainWindow()
    qtbot.addWidget(window)
    window.recordings.open(path)
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith("Recording"),
                    timeout=30_000)
    window.recordings.fill_recent_menu()
    assert window.recent_menu.actions()[0].text() == str(path.resolve())
    assert window.actions.open_recording.isEnabled()


def test_compare_reads_runs_from_recordings_and_refuses_what_is_not_one(runs, capsys,
                                                                         tmp_path):
    path, job_id, flaky_id = runs
    assert cli_main(["compare", f"{path}:{flaky_id}", f"{path}:{job_id}"]) == 0
    out = capsys.readouterr().out
    assert "FINISHED" in out and "FAILED" in out and "root cause" in out
    assert "failed attempts" in out
    assert cli_main(["compare", str(path), str(path)]) == 1
    assert "holds 2 jobs: name one" in capsys.readouterr().err
    not_one = tmp_path / "notes.txt"
    not_one.write_text("not a recording")
    assert cli_main(["compare", str(not_one), f"{path}:{job_id}"]) == 1
    assert "not a readable recording" in capsys.readouterr().err
    assert cli_main(["compare", f"{path}:nosuchjob", f"{path}:{job_id}"]) == 1
    assert "job nosuchjob is not in" in capsys.readouterr().err
