"""One vertex's flame graph (core/profiling/vertexprofile.py): who runs its subtasks, the
thread filter over py-spy's raw output, and the merge, with no process sampled."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from clusterdeck.core.cli.main import main as cli_main
from clusterdeck.core.profiling import vertexprofile
from clusterdeck.core.profiling.pyspy import FlameNode, ProfilingError
from clusterdeck.core.profiling.vertexprofile import (
    VertexWorker,
    add_stacks,
    on_this_machine,
    vertex_flame_graph,
    vertex_workers,
)
from clusterdeck.core.protocol import messages as p


def numbers(subtask: int, attempt: int, *workers: tuple[int, int], final: bool = False,
            vertex_id: str = "map", job_id: str = "job-1") -> p.AttemptMetrics:
    return p.AttemptMetrics(job_id, vertex_id, subtask, attempt, f"a{attempt}-{subtask}",
                            0, 0, 0, 0, 0.0, final,
                            workers=tuple(p.AttemptWorker(*w) for w in workers))


def test_each_subtask_is_run_by_its_newest_attempts_workers():
    heard = [("tm-1", numbers(0, 0, (10, 11))),
             ("tm-1", numbers(1, 0, (10, 12), (20, 0))),
             ("tm-2", numbers(0, 1, (30, 31))),           # subtask 0 restarted on tm-2
             ("tm-1", numbers(0, 0, (10, 11))),           # late news of its old attempt
             ("tm-1", numbers(0, 0, (99, 0), vertex_id="sink")),
             ("tm-1", numbers(2, 0, (40, 41), job_id="job-2"))]

    workers = vertex_workers(heard, "job-1", "map")

    assert workers == [VertexWorker("tm-2", 0, 30, 31), VertexWorker("tm-1", 1, 10, 12),
                       VertexWorker("tm-1", 1, 20, 0)]


def test_an_ended_attempt_runs_nowhere_even_if_a_late_running_report_follows():
    heard = [("tm-1", numbers(0, 0, (10, 11))), ("tm-1", numbers(0, 0, final=True)),
             ("tm-1", numbers(0, 0, (10, 11)))]
    assert vertex_workers(heard, "job-1", "map") == []


def test_workers_a_taskmanager_could_not_have_are_left_out_and_the_count_is_bounded():
    hostile = numbers(0, 0, (0, 0), (-5, 0), (7, -1), *((100 + i, 0) for i in range(50)))
    many = [("tm-1", numbers(s, 0, (1000 + s, 0))) for s in range(1, 200)]

    # of its first ATTEMPT_WORKERS, the three no process can have are dropped
    assert [w.pid for w in vertex_workers([("tm-1", hostile)], "job-1", "map")] == list(
        range(100, 100 + p.ATTEMPT_WORKERS - 3))
    assert len(vertex_workers(many, "job-1", "map")) == vertexprofile.MAX_WORKERS


def test_workers_on_another_machine_are_named_not_sampled():
    workers = [VertexWorker("tm-1", 0, 10), VertexWorker("tm-2", 1, 20),
               VertexWorker("tm-2", 2, 21), VertexWorker("tm-9", 3, 30)]

    local, away = on_this_machine(workers, {"tm-1": "here", "tm-2": "there"}, "here")

    assert local == workers[:1]
    assert away == ["tm-2 runs on there: its subtasks are not in this graph (run "
                    "clusterdeck profile there)",
                    "tm-9 is not in the cluster's overview: its subtasks are not in this "
                    "graph"]


RAW = """\
thread (4123): slot-1;Thread.run (threading.py:982);run_task (runner.py:90);parse (job.py:7) 30
thread (4124): slot-2;Thread.run (threading.py:982);run_task (runner.py:90);enrich (other.py:3) 50
thread (4100): MainThread;<module> (main.py:10);wait (service.py:40) 5
thread (0x7f00aa): slot-3;Thread.run (threading.py:982);parse (job.py:8) 4
"""


def test_only_the_slot_threads_asked_for_are_kept_without_their_thread_frame():
    root = FlameNode("map")

    added, cut = add_stacks(root, RAW, frozenset({4123, 0x7f00aa}))

    assert (added, cut, root.samples) == (2, False, 34)
    assert set(root.children) == {"Thread.run (threading.py:982)"}
    leaves = root.children["Thread.run (threading.py:982)"].children
    assert set(leaves) == {"run_task (runner.py:90)", "parse (job.py:8)"}


def test_a_whole_process_keeps_every_thread():
    root = FlameNode("map")
    assert add_stacks(root, RAW, None) == (4, False)
    assert root.samples == 89


@pytest.mark.parametrize("line", [
    "no count here",
    "Thread.run (threading.py:982);parse (job.py:7) 12",       # no thread frame
    "thread (abc): x;parse (job.py:7) 3",                     # no thread id
    "thread (4123): slot-1;parse (job.py:7) -3",                # a negative count
    "thread (4123): slot-1;parse (job.py:7) 1e9",
    "",
    " 17",
])
def test_lines_py_spy_would_not_write_are_skipped(line):
    root = FlameNode("map")
    assert add_stacks(root, line + "\n", None) == (0, False)
    assert root.samples == 0


def test_endless_output_is_cut_at_the_bound_and_says_so():
    text = "".join(f"thread (1): t;f{i} (job.py:1) 1\n" for i in range(100))
    root = FlameNode("map")
    assert add_stacks(root, text, None, most=10) == (10, True)
    assert len(root.children) == 10


def test_each_process_is_sampled_once_and_the_subtasks_merge_into_one_graph(monkeypatch):
    sampled: list[int] = []

    def record(pid: int, seconds: float, rate: int) -> str:
        sampled.append(pid)
        if pid == 4100:
            return RAW
        if pid == 4200:
            return "thread (4201): MainThread;serve (continuousworker.py:95);parse (job.py:7) 20\n"
        raise ProfilingError(f"process {pid} is not running: gone")
    monkeypatch.setattr(vertexprofile, "_record", record)
    workers = [VertexWorker("tm-1", 0, 4100, 4123), VertexWorker("tm-1", 1, 4100, 4124),
               VertexWorker("tm-1", 0, 4200), VertexWorker("tm-1", 2, 4300)]

    graph = vertex_flame_graph("map", workers, seconds=1)

    assert sorted(sampled) == [4100, 4200, 4300]
    assert graph.root.samples == 30 + 50 + 20
    assert graph.sampled == tuple(workers[:3])
    assert graph.missed == ("subtask 3 on tm-1 (pid 4300): process 4300 is not running: "
                            "gone",)
    assert "serve (continuousworker.py:95)" in graph.root.children


def test_no_worker_to_sample_says_why(monkeypatch):
    monkeypatch.setattr(vertexprofile, "_record", lambda pid, *_: (_ for _ in ()).throw(
        ProfilingError(f"not allowed to look into process {pid}")))
    with pytest.raises(ProfilingError, match="no subtask of map is running on this"):
        vertex_flame_graph("map", [])
    with pytest.raises(ProfilingError, match=r"no worker of map could be sampled: .*"
                                             r"not allowed to look into process 7"):
        vertex_flame_graph("map", [VertexWorker("tm-1", 0, 7)])


TWO_SLOTS = textwrap.dedent("""
    import threading, time
    def spin_in_slot_one():
        while True:
            sum(range(1000))
    def spin_in_slot_two():
        while True:
            sum(range(1000))
    ones = []
    for target in (spin_in_slot_one, spin_in_slot_two):
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        ones.append(thread)
    time.sleep(0.2)
    print(" ".join(str(t.native_id) for t in ones), flush=True)
    time.sleep(120)
""")


@pytest.mark.integration
def test_a_real_processs_slot_thread_is_sampled_alone():
    process = subprocess.Popen([sys.executable, "-c", TWO_SLOTS], stdout=subprocess.PIPE,
                               text=True)
    try:
        one, _two = map(int, process.stdout.readline().split())
        graph = vertex_flame_graph("one", [VertexWorker("tm-1", 0, process.pid, one)],
                                   seconds=1, rate=50)
    finally:
        process.kill()
        process.wait(10)
    frames = str(graph.root)
    assert graph.root.samples > 10
    assert "spin_in_slot_one" in frames and "spin_in_slot_two" not in frames


def test_two_saved_graphs_compare_from_the_command_line_without_a_cluster(tmp_path, capsys):
    before, after = tmp_path / "a.collapsed", tmp_path / "b.collapsed"
    before.write_text("run (r.py:1);parse (job.py:7) 9\nrun (r.py:1) 1\n")
    after.write_text("run (r.py:1);parse (job.py:8) 1\nrun (r.py:1);emit (job.py:3) 9\n")

    assert cli_main(["profile", "--compare", str(before), str(after)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("before: 10 samples, after: 10 samples")
    assert [line.split()[2:] for line in lines[2:4]] == [
        ["+90.0%", "0.0%", "90.0%", "emit", "(job.py)"],
        ["-80.0%", "90.0%", "10.0%", "parse", "(job.py)"]]

    assert cli_main(["profile", "--job", "j", "--compare", str(before), str(after)]) == 1
    assert "samples nothing" in capsys.readouterr().err
    assert cli_main(["profile"]) == 1
    assert "name a PROCESS, or a vertex" in capsys.readouterr().err
    assert cli_main(["profile", "--job", "j"]) == 1
    assert "--job JOB --vertex V go together" in capsys.readouterr().err
