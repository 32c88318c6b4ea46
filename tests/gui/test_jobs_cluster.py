"""Jobs from the window on a real local cluster (broker, JobManager, TaskManagers with
Spark): a dropped job runs to the end, a failing job explains itself, a file that is not a
job is refused without harm. One cluster serves the module; Spark starts once per
TaskManager."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt

from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.gui.controllers import inspection
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.session import SessionMode
from clusterdeck.gui.views.failuretext import user_frames
from tests.gui.windowdriver import drop_files, job_status, leave, submit_dropped
from tests.integration.clusters import running_cluster

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TINY = "def build(env):\n    env.from_range(0, 10).map(lambda x: x * 2).collect()\n"


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("auto", **{"spark.start": "eager"}) as (local_cluster, _):
        yield local_cluster


@pytest.fixture
def window(qtbot, cluster):
    window = MainWindow()
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    window.session.adopt(cluster, owned=False)
    qtbot.waitUntil(lambda: window.session.state.mode is SessionMode.RUNNING, timeout=30_000)
    yield window
    leave(window)


def test_a_job_file_dropped_on_the_window_runs_until_every_subtask_is_finished(
        qtbot, window, tmp_path):
    job = tmp_path / "tiny_job.py"
    job.write_text(TINY)
    job_id = submit_dropped(qtbot, window, job)
    qtbot.waitUntil(lambda: window.current_job == job_id, timeout=10_000)
    assert window.jobs.current_job == job_id
    qtbot.waitUntil(lambda: job_status(window, job_id) == JobStatus.FINISHED, timeout=150_000)
    graph = window.jobs.graph
    qtbot.waitUntil(lambda: bool(graph.cells()) and all(
        cell.state == ExecutionState.FINISHED for cell in graph.cells()), timeout=10_000)
    assert window.job_model.row(job_id).finished == window.job_model.row(job_id).total == 1
    qtbot.waitUntil(lambda: window.result.rows.rowCount() == 10, timeout=10_000)
    assert sorted(window.result.rows.value(row, 0) for row in range(10)) == list(range(0, 20, 2))
    assert "FINISHED" in window.result.header.text()
    window.messages_dock.raise_()  # held while its tab was behind the others
    qtbot.waitUntil(lambda: {"SubmitJob", "UpdateTaskExecutionStates"}
                    <= window.messages.model.types, timeout=5000)
    assert window.bridge.recorder.count(job_id) > 0, "its events were recorded for replay"


def test_a_failing_job_shows_its_root_cause_and_traceback_and_finds_its_subtask(
        qtbot, window):
    job_id = submit_dropped(qtbot, window, EXAMPLES / "failing_job.py", strategy="none")
    qtbot.waitUntil(lambda: job_status(window, job_id) == JobStatus.FAILED, timeout=120_000)
    qtbot.waitUntil(lambda: window.current_job == job_id, timeout=5000)
    failures = window.failures
    window.failures_dock.raise_()
    qtbot.waitUntil(lambda: bool(failures.failure_items()), timeout=10_000)
    root = failures.failure_items()[0]
    assert failures.tree.topLevelItem(0).text(0) == "Root cause"
    assert root.text(0) == "ValueError: record 777 is bad"
    detail = failures.detail.toPlainText()
    assert "Traceback (most recent call last)" in detail
    assert 'raise ValueError(f"record {number} is bad")' in detail
    record = root.data(0, Qt.ItemDataRole.UserRole + 1)[0]
    assert user_frames(record.traceback, job_id), "the job file's frame is marked"
    qtbot.waitExposed(failures)
    rect = failures.tree.visualItemRect(root)
    with qtbot.waitSignal(failures.failure_selected, timeout=5000) as selected:
        qtbot.mouseClick(failures.tree.viewport(), Qt.MouseButton.LeftButton,
                         pos=QPoint(rect.left() + 10, rect.center().y()))
    assert selected.args == [record.vertex_id, record.subtask]
    assert window.jobs.graph.selected == (record.vertex_id, record.subtask)
    assert window.jobs.graph.cell(record.vertex_id, record.subtask).state == (
        ExecutionState.FAILED)


def test_files_that_are_not_jobs_get_an_error_dialog_and_the_window_stays_usable(
        qtbot, window, tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("print('no build, no pyspark')\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\n")
    raising = tmp_path / "raising.py"
    raising.write_text("def build(env):\n    raise RuntimeError('no input given')\n")
    flow = window.submission

    def refused(name: str) -> bool:
        dialog = flow.error_dialog
        return dialog is not None and dialog.isVisible() and name in dialog.windowTitle()

    drop_files(window, plain)
    qtbot.waitUntil(lambda: refused("plain.py"), timeout=10_000)
    assert "defines no build(env) function and does not import pyspark" in \
        flow.error_dialog.message.text()
    assert flow.dialog is None, "no settings are asked for a file that is not a job"
    drop_files(window, notes)
    qtbot.waitUntil(lambda: refused("notes.txt"), timeout=10_000)
    assert "not a job file" in flow.error_dialog.message.text()
    drop_files(window, raising)  # a job by its syntax; it fails when loaded at submit
    qtbot.waitUntil(lambda: flow.dialog is not None, timeout=10_000)
    qtbot.mouseClick(flow.dialog.submit_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: refused("raising.py"), timeout=10_000)
    assert "raised RuntimeError: no input given" in flow.error_dialog.message.text()
    assert "raise RuntimeError('no input given')" in flow.error_dialog.traceback.toPlainText()
    flow.error_dialog.close()

    job = tmp_path / "after_refusals.py"
    job.write_text(TINY)
    job_id = submit_dropped(qtbot, window, job)
    qtbot.waitUntil(lambda: job_status(window, job_id) == JobStatus.FINISHED, timeout=120_000)


WORDS = ["spark", "flink", "slot", "vertex", "mailbox", "split", "barrier", "watermark",
         "partition", "attempt", "fencing", "token", "heartbeat"]


def test_a_word_counts_vertices_show_live_rates_and_end_at_the_results_records(
        qtbot, window, tmp_path):
    """The live numbers (docs/metrics.md): while the word count runs some vertex shows
    records/s above zero; once it ended every vertex's totals are the job result's."""
    data = tmp_path / "words"
    data.mkdir()
    for index in range(8):
        (data / f"part-{index}.txt").write_text("\n".join(
            " ".join(WORDS[(index + line + k) % len(WORDS)] for k in range(8))
            for line in range(30_000)) + "\n")
    job = tmp_path / "live_wordcount.py"
    job.write_text(f"""
import time

def build(env):
    env.set_parallelism(4)
    env.set_job_name("live wordcount")
    lines = env.counter("lines")

    def tokenize(line):
        lines.add(1)
        time.sleep(0.00005)
        return line.split()

    (env.read_text({str(data)!r}).flat_map(tokenize).map(lambda word: (word, 1))
        .key_by(0).sum(1).collect())
""")
    job_id = submit_dropped(qtbot, window, job)
    graph = window.jobs.graph
    qtbot.waitUntil(lambda: window.jobs.current_job == job_id, timeout=10_000)
    qtbot.waitUntil(lambda: job_status(window, job_id) == JobStatus.RUNNING
                    and any(n.rate_in > 0 or n.rate_out > 0 for n in graph.numbers.values()),
                    timeout=120_000)
    qtbot.waitUntil(lambda: job_status(window, job_id) == JobStatus.FINISHED, timeout=150_000)
    result = window.bridge.client.result(job_id)
    expected = {vertex: (counts["in"], counts["out"]) for vertex, counts in result.records.items()}
    source = next(iter(expected))
    assert expected[source][0] == 8 * 30_000 == result.accumulators["lines"]

    def totals() -> dict[str, tuple[int, int]]:
        return {vertex: (n.records_in, n.records_out) for vertex, n in graph.numbers.items()}
    qtbot.waitUntil(lambda: totals() == expected, timeout=10_000)
    assert graph.numbers[source].records_in == result.accumulators["lines"]
    box = graph.boxes[source]
    assert "in 240.0k" in box._numbers.text()


def test_a_flame_graph_and_a_thread_dump_of_a_running_taskmanager_are_drawn(
        qtbot, window, tmp_path):
    """docs/profiling.md: py-spy samples a real TaskManager (and its Spark workers) while it
    runs a job; the flame graph is drawn in a window of its own, and so are its threads."""
    job = tmp_path / "busy_job.py"
    job.write_text("import time\n\ndef build(env):\n    env.from_range(0, 1200).map("
                   "lambda x: time.sleep(0.01) or x).collect()\n")
    qtbot.waitUntil(lambda: window.model.row_named("taskmanager-1") is not None
                    and window.model.row_named("taskmanager-1").pid is not None,
                    timeout=30_000)
    window.cluster_panel.select_process("taskmanager-1")
    job_id = submit_dropped(qtbot, window, job)
    # py-spy samples busy threads only: an idle TaskManager would give an empty graph
    qtbot.waitUntil(lambda: job_status(window, job_id) == JobStatus.RUNNING, timeout=60_000)
    inspector = window.inspector
    with qtbot.waitSignal(inspector.opened, timeout=60_000) as opened:
        window.actions.flame_graph.trigger()
    flame = opened.args[0]
    assert "Flame graph of taskmanager-1" in flame.windowTitle()
    assert "samples over" in flame.header.text(), flame.header.text()
    assert len(flame.flame.boxes) > 3  # the process, its threads, what they ran
    assert flame.hottest.toPlainText().strip()
    with qtbot.waitSignal(inspector.opened, timeout=60_000) as opened:
        window.actions.thread_dump.trigger()
    threads = opened.args[0].threads.toPlainText()
    assert "Thread MainThread" in threads and "taskexecutor" in threads.lower()


def test_a_taskmanagers_spark_ui_is_one_click_away(qtbot, window, monkeypatch):
    """Its address comes with the TaskManager's live numbers; it answers; Open Spark UI
    hands it to the desktop's browser."""
    qtbot.waitUntil(lambda: bool(window.metrics.spark_ui.get("taskmanager-1")),
                    timeout=30_000)
    url = window.metrics.spark_ui["taskmanager-1"]
    with urllib.request.urlopen(url + "/jobs/", timeout=10) as page:
        assert page.status == 200 and b"Spark" in page.read()
    opened: list[str] = []
    monkeypatch.setattr(inspection.QDesktopServices, "openUrl",
                        lambda address: opened.append(address.toString()) or True)
    window.cluster_panel.select_process("taskmanager-1")
    assert window.actions.spark_ui.isEnabled()
    window.actions.spark_ui.trigger()
    assert opened == [url]


def test_two_runs_of_a_job_compare_side_by_side(qtbot, window, tmp_path):
    job = tmp_path / "tiny_job.py"
    job.write_text(TINY)
    runs = [submit_dropped(qtbot, window, job) for _ in range(2)]
    for job_id in runs:
        qtbot.waitUntil(lambda job_id=job_id: job_status(window, job_id) == JobStatus.FINISHED
                        and job_id in window.result.results, timeout=150_000)
    table = window.job_list.table
    table.clearSelection()
    for job_id in runs:
        index = window.job_model.index(window.job_model.row_of(job_id), 0)
        table.selectionModel().select(index, table.selectionModel().SelectionFlag.Select
                                      | table.selectionModel().SelectionFlag.Rows)
    assert window.actions.compare_jobs.isEnabled()
    window.actions.compare_jobs.trigger()
    compared = window.comparisons[-1]
    rows = {(row.what, row.measure): row for row in compared.rows}
    assert {rows[("job", "id")].first, rows[("job", "id")].second} == set(runs)
    assert rows[("job", "status")].first == rows[("job", "status")].second == "FINISHED"
    source = compared.rows[4].what  # the first vertex's rows follow the job's four
    assert rows[(source, "records out")].first == rows[(source, "records out")].second == "10"
    assert compared.table.rowCount() == len(compared.rows)
