"""The State view on real state files: 10,000 keys of a vertex ``counts`` (two subtasks,
the rocksdb backend) over two checkpoints, written by the state inspector's own test
helper where a cluster's JobManager keeps them. The reads are ``clusterdeck state``'s own
code: in-process here (``in_process``, fast), as a child process in the tests of an
unreadable folder (what the window runs)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from clusterdeck.core.cli.main import main
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import load
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.controllers.stateinspection import NOTHING_SHOWN, StateInspection
from clusterdeck.gui.models import statereading
from clusterdeck.gui.models.formatting import NONE
from clusterdeck.gui.models.statereading import PAGE, StatePlace, open_state
from clusterdeck.gui.views.stateview import StateWindow
from tests.gui.test_checkpointsview import JOB as CHECKPOINTED_JOB
from tests.gui.test_checkpointsview import Checkpoints, view_of
from tests.unit.core.recorder.test_checkpoints import recording  # noqa: F401 (a fixture)
from tests.unit.core.stateinspector.test_queries import JOB, Job

USERS = 10_000
CLUSTER = "demo-state"
NAMES = {"counts": "sum per user", "source": "numbers"}


def in_process(command: list[str]) -> tuple[int, str, str]:
    """``clusterdeck state ...`` run here: the same code as the child, without its start."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(command[command.index("state"):])
    return code, out.getvalue(), err.getvalue()


def synchronously(work: Callable[[], Any], done: Callable[[Any], None],
                  failed: Callable[[BaseException], None]) -> None:
    try:
        outcome = work()
    except Exception as error:
        failed(error)
        return
    done(outcome)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A cluster folder holding job-1's two checkpoints of 10,000 keys."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(paths.HOME_ENV, str(home))
        job = Job(paths.cluster_dir(CLUSTER) / "work" / JOB / "checkpoints", "rocksdb")
        job.checkpoint(1, {f"user-{n}": (n, "x" * (n % 7)) for n in range(USERS)})
        job.checkpoint(2, {"user-3": (3, "changed" * 10), "user-4": None,
                           "user-10000": (10000, "")})
        job.close()
    return home


@pytest.fixture
def window(home, qtbot, monkeypatch):
    monkeypatch.setenv(paths.HOME_ENV, str(home))
    monkeypatch.setattr(statereading, "run_command", in_process)
    return open_window(qtbot, load(None, {"cluster.id": CLUSTER}))


def open_window(qtbot, config, recorded=None, run=synchronously) -> StateWindow:
    place = StatePlace(JOB, config, recorded)
    window = StateWindow("running sums (job-1)", NAMES, run,
                         lambda: open_state(place, lambda cluster: load(
                             None, {"cluster.id": cluster})))
    qtbot.addWidget(window)
    return window


def keys_shown(window: StateWindow) -> list[str]:
    return [row.key for row in window.keys_model.rows()]


def test_it_opens_on_the_latest_checkpoint_with_the_vertices_by_name(window) -> None:
    assert not window.message.isVisibleTo(window)
    assert [window.snapshot.itemText(i) for i in range(window.snapshot.count())] == \
        ["latest: checkpoint 2", "checkpoint 2", "checkpoint 1"]
    rows = window.sizes_model.rows()
    assert [row.subtask for row in rows] == ["counts#0", "counts#1"]
    assert sum(row.keys for row in rows) == USERS
    assert window.sizes_model.index(0, 0).data() == "sum per user (counts)"
    assert window.keys.vertex.currentText() == "sum per user (counts)"
    assert "checkpoint 2: 10,000 keys" in window.sizes_line.text()


def test_10000_keys_come_a_page_at_a_time(window) -> None:
    keys = window.keys
    first = keys_shown(window)
    assert len(first) == PAGE and keys.shown is not None and keys.shown.matched == USERS
    assert keys.position.text().endswith(f"keys 1\u2013{PAGE} of 10,000")
    assert not keys.previous.isEnabled() and keys.next.isEnabled()
    keys.next.click()
    second = keys_shown(window)
    assert len(second) == PAGE and not set(first) & set(second)
    assert keys.position.text().endswith(f"keys {PAGE + 1}\u2013{2 * PAGE} of 10,000")
    keys.previous.click()
    assert keys_shown(window) == first
    assert len(window.keys_model.rows()) <= PAGE  # the view holds a page, never the state


def test_search_and_prefix_narrow_the_keys(window, qtbot) -> None:
    keys = window.keys
    keys.prefix.setChecked(True)
    keys.search.setText("user-999")
    keys.first_page()  # what the typing timer does after SEARCH_DELAY_MS
    assert sorted(keys_shown(window)) == sorted(
        f"user-{n}" for n in range(USERS) if str(n).startswith("999"))
    keys.prefix.setChecked(False)
    keys.search.setText("999")  # contained, not a prefix: user-1999, user-9990...
    keys.first_page()
    assert keys.shown is not None and keys.shown.matched == sum(
        "999" in f"user-{n}" for n in range(USERS + 1) if n != 4)
    row = next(r for r in window.keys_model.rows() if r.key == "user-9995")
    assert (row.subtask, row.value) == ("counts#1", f'[9995, "{"x" * (9995 % 7)}"]')


def test_the_biggest_keys_come_biggest_first(window) -> None:
    window.keys.biggest.setChecked(True)
    rows = window.keys_model.rows()
    assert rows[0].key == "user-3" and rows[0].value == f'[3, "{"changed" * 10}"]'
    assert [r.bytes for r in rows] == sorted((r.bytes for r in rows), reverse=True)
    assert not window.keys.next.isEnabled()


def test_the_diff_of_two_checkpoints_and_the_growth(window) -> None:
    diff = window.diff
    assert [diff.before.itemText(i) for i in range(diff.before.count())] == \
        ["checkpoint 1", "checkpoint 2"]
    assert diff.after.currentText() == "checkpoint 2"
    diff.compare.click()
    assert diff.shown is not None
    assert diff.shown.counts == {"added": 1, "removed": 1, "changed": 1}
    assert {(r.kind, r.key) for r in window.changes_model.rows()} == \
        {("added", "user-10000"), ("removed", "user-4"), ("changed", "user-3")}
    assert "checkpoint 1 \u2192 checkpoint 2: 1 added, 1 removed, 1 changed" in \
        diff.summary.text()
    assert len(window.growth.getPlotItem().listDataItems()) == 1
    assert "2 checkpoints; at checkpoint 2: sum per user (counts): 10,000 keys" in \
        window.growth_line.text()


def test_files_gone_under_the_view_show_why(window, home) -> None:
    folder = paths.cluster_dir(CLUSTER) / "work" / JOB / "checkpoints"
    moved = paths.cluster_dir(CLUSTER).parent / "moved"
    folder.rename(moved)
    try:
        window.keys.next.click()
        assert window.message.isVisibleTo(window)
        assert "no checkpoints of job job-1 in" in window.message.text()
        assert keys_shown(window)  # the page shown before stays
    finally:
        moved.rename(folder)


def test_a_cluster_whose_folder_is_elsewhere_says_so_from_the_child(
        qtbot, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    window = open_window(qtbot, load(None, {"cluster.id": "elsewhere"}))
    assert window.message.isVisibleTo(window)
    assert "holds no checkpoint storage of cluster 'elsewhere'" in window.message.text()
    assert not window.tabs.isEnabled()


def test_a_recording_shows_what_it_holds_and_why_not_the_state(
        qtbot, tmp_path, monkeypatch, recording) -> None:  # noqa: F811
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.setattr(statereading, "run_command", in_process)
    window = open_window(qtbot, None, recording)
    text = window.message.text()
    assert text.startswith("The recording holds its checkpoints' sizes, not their state")
    assert "cluster 'c-state'" in text
    assert [window.snapshot.itemText(i) for i in range(window.snapshot.count())] == \
        ["checkpoint 2 (recorded sizes)", "checkpoint 1 (recorded sizes)"]
    assert [(r.subtask, r.bytes) for r in window.sizes_model.rows()] == \
        [("counts#0", 530), ("counts#1", 500)]
    assert window.sizes_model.index(0, 2).data() == NONE
    keys_tab = window.tabs.indexOf(window.keys)
    assert window.tabs.isEnabled() and not window.tabs.isTabEnabled(keys_tab)
    assert "2 checkpoints; at checkpoint 2: sum per user (counts): 1,030 B" in \
        window.growth_line.text()


def test_the_window_reads_off_the_gui_thread_and_a_missing_folder_is_a_message(
        qtbot, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    bridge = ClusterBridge()
    session = SimpleNamespace(state=SimpleNamespace(active=True),
                              config=load(None, {"cluster.id": "elsewhere"}))
    notices: list[str] = []
    inspection = StateInspection(bridge, session, lambda: None, notices.append)  # type: ignore[arg-type]
    try:
        window = inspection.open(JOB, None)
        assert window is not None
        qtbot.addWidget(window)
        assert "reading its checkpoints" in window.header.text()
        qtbot.waitUntil(window.message.isVisible, timeout=60_000)
        assert "holds no checkpoint storage of cluster 'elsewhere'" in window.message.text()
        session.state.active = False  # no cluster, no recording: nothing to read
        assert inspection.open(JOB, None) is None and notices == [NOTHING_SHOWN]
    finally:
        inspection.shutdown()


def test_the_checkpoints_view_asks_for_the_selected_checkpoint_or_savepoint(qtbot) -> None:
    model, view = view_of(qtbot)
    job = Checkpoints()
    job.complete()
    job.decline("disk full")
    job.coordinator.request_savepoint(stop=False, savepoint=True)
    job.complete()
    job.coordinator.savepoint_written(job.coordinator.history()[-1].checkpoint_id,
                                      "/sp/savepoint-3", job.now + 0.5)
    model.show_job(CHECKPOINTED_JOB)
    model.set_snapshot(CHECKPOINTED_JOB, job.snapshot())
    assert not view.inspect.isEnabled()  # nothing selected
    wanted = []
    view.state_wanted.connect(wanted.append)
    for row in range(3):  # the savepoint, the failed checkpoint, the completed one
        view.table.selectRow(row)
        view.inspect.click()
    assert wanted == ["/sp/savepoint-3", "1"]
    assert view.savepoints() == ["/sp/savepoint-3"]
