"""A vertex's flame graph from the graph (docs/profiling.md, "One vertex's workers"): a
double-click or the vertex's menu asks for it, the live numbers say who runs the vertex,
the inspector samples only those (here a stand-in for py-spy), and the window saves the
graph and compares it with one saved before."""

from __future__ import annotations

import socket
from dataclasses import replace

from PySide6.QtCore import Qt

from clusterdeck.core.profiling.pyspy import FlameNode, parse_collapsed
from clusterdeck.core.profiling.vertexprofile import VertexFlameGraph, VertexWorker
from clusterdeck.core.protocol import messages as p
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.controllers import inspection
from clusterdeck.gui.models.metrics import MetricsStore
from clusterdeck.gui.views.flamegraph import ProfileWindow
from tests.gui.jobsnapshots import mixed_word_count, shown_word_count


def running(subtask: int, *workers: tuple[int, int], vertex: str = "source",
            final: bool = False) -> p.AttemptMetrics:
    return p.AttemptMetrics("job-1", vertex, subtask, 0, f"a-{vertex}-{subtask}", 1, 1, 1,
                            1, 0.5, final, workers=tuple(p.AttemptWorker(*w) for w in workers))


def test_a_double_click_or_the_vertex_menu_asks_for_its_workers_flame_graph(qtbot):
    view, _harness, _snapshot = shown_word_count(qtbot)
    graph = view.graph
    where = graph.mapFromScene(graph.cell("source", 2).sceneBoundingRect().center())

    with qtbot.waitSignal(graph.vertex_profile_wanted, timeout=1000) as wanted:
        qtbot.mouseDClick(graph.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert wanted.args == ["source"]
    assert graph.vertex_at(where) == "source"
    [action] = graph.vertex_menu("reduce").actions()
    assert action.text() == "Flame graph of this vertex's workers"
    with qtbot.waitSignal(graph.vertex_profile_wanted, timeout=1000) as wanted:
        action.trigger()
    assert wanted.args == ["reduce"]


def test_the_live_numbers_keep_which_taskmanager_runs_each_subtask():
    store = MetricsStore()
    store.add([p.TaskManagerMetrics("tm-1", 1.0, (running(0, (10, 11)),)),
               p.TaskManagerMetrics("tm-2", 1.0, (running(1, (20, 21), (22, 0)),))])
    store.add([p.TaskManagerMetrics("tm-1", 2.0, (running(0, vertex="source", final=True),))])

    assert store.attempts("job-1", "source") == [
        ("tm-1", running(0, vertex="source", final=True)), ("tm-2", running(1, (20, 21),
                                                                           (22, 0)))]
    assert store.attempts("job-1", "nothing") == []


def inspector_with(qtbot, monkeypatch, sampled: list) -> tuple[inspection.ProcessInspector,
                                                                list[str]]:
    def fake(name: str, workers: list[VertexWorker], seconds: float) -> VertexFlameGraph:
        sampled.append(list(workers))
        root = parse_collapsed("serve (continuousworker.py:95);parse (job.py:7) 30\n")[0]
        return VertexFlameGraph(name, seconds, 100, root, tuple(workers), (), 1, False)
    monkeypatch.setattr(inspection, "vertex_flame_graph", fake)
    bridge = ClusterBridge()
    inspector = inspection.ProcessInspector(bridge)
    notices: list[str] = []
    inspector.notice.connect(notices.append)
    return inspector, notices


def test_only_the_workers_of_the_vertex_on_this_machine_are_sampled(qtbot, monkeypatch):
    sampled: list = []
    inspector, notices = inspector_with(qtbot, monkeypatch, sampled)
    _harness, snapshot = mixed_word_count()
    snapshot = replace(snapshot, hosts={"tm-1": socket.gethostname(), "tm-2": "far-away"})
    attempts = [("tm-1", running(0, (10, 11))), ("tm-2", running(1, (20, 0))),
                ("tm-1", running(2, (10, 12), vertex="reduce"))]

    with qtbot.waitSignal(inspector.opened, timeout=10_000) as opened:
        inspector.vertex_flame_graph(snapshot, "source", attempts)

    assert sampled == [[VertexWorker("tm-1", 0, 10, 11)]]
    window = opened.args[0]
    assert "30 samples" in window.header.text()
    assert "subtask 1 on tm-1 (thread 11 of pid 10)" in window.header.text()
    assert any("tm-2 runs on far-away" in notice for notice in notices)
    inspector.shutdown()


def test_a_vertex_running_nowhere_here_or_in_a_recording_is_not_sampled(qtbot, monkeypatch):
    sampled: list = []
    inspector, notices = inspector_with(qtbot, monkeypatch, sampled)
    _harness, snapshot = mixed_word_count()
    snapshot = replace(snapshot, hosts={"tm-2": "far-away"})

    inspector.vertex_flame_graph(snapshot, "source", [("tm-2", running(1, (20, 0)))])
    inspector.vertex_flame_graph(snapshot, "source", [], live=True)
    inspector.vertex_flame_graph(snapshot, "source", [("tm-2", running(1, (20, 0)))],
                                 live=False)

    assert sampled == []
    assert "tm-2 runs on far-away" in notices[0]
    assert "no subtask of it is running now" in notices[1]
    assert "a recording's workers are gone" in notices[2]
    inspector.shutdown()


def test_a_graph_saved_and_compared_lists_the_frames_that_changed_most(qtbot, tmp_path):
    before = ProfileWindow("before")
    after = ProfileWindow("after")
    for window in (before, after):
        qtbot.addWidget(window)
    graph = VertexFlameGraph("parse", 5.0, 100, parse_collapsed(
        "serve (w.py:1);parse (job.py:7) 80\nserve (w.py:1);emit (job.py:20) 20\n")[0],
        (VertexWorker("tm-1", 0, 10),), ("tm-2 runs on far-away: ...",), 2, False)
    before.show_vertex_flame_graph(graph)
    saved = tmp_path / "before.collapsed"
    before.save_to(saved)
    after.show_vertex_flame_graph(replace(graph, root=parse_collapsed(
        "serve (w.py:1);parse (job.py:9) 20\nserve (w.py:1);emit (job.py:20) 80\n")[0]))

    after.compare_with(saved)

    table = after.compared
    assert after.tabs.currentWidget() is table
    rows = [[table.item(r, c).text() for c in range(table.columnCount())]
            for r in range(table.rowCount())]
    assert rows[:2] == [["20.0%", "80.0%", "+60.0%", "20.0%", "80.0%", "emit (job.py)"],
                        ["80.0%", "20.0%", "-60.0%", "80.0%", "20.0%", "parse (job.py)"]]
    assert "not sampled: tm-2 runs on far-away" in before.header.text()
    after.compare_with(tmp_path / "missing.collapsed")
    assert "could not be read" in after.header.text()
    assert isinstance(after.root, FlameNode)


def test_a_saved_graph_is_offered_a_file_named_after_its_vertex_and_job():
    from clusterdeck.gui.views.flamegraph import suggested_file
    assert suggested_file("Flame graph of rate_source -> parse's workers (a1015819)") == \
        "rate_source-parse-a1015819.collapsed"
    assert suggested_file("Flame graph of taskmanager-1 (pid 12)") == \
        "taskmanager-1-pid-12.collapsed"
