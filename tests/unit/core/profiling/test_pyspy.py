"""Thread dumps and flame graphs with py-spy (core/profiling/pyspy.py): py-spy's output
read as data, and a real process looked into."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from clusterdeck.core.cli.main import main as cli_main
from clusterdeck.core.profiling import pyspy
from clusterdeck.core.profiling.pyspy import (
    MAX_DEPTH,
    ProfilingError,
    flame_graph,
    parse_collapsed,
    parse_dump,
    thread_dump,
)


def test_collapsed_stacks_make_a_tree_whose_counts_add_up():
    root, stacks, cut = parse_collapsed(
        "main (a.py:1);work (a.py:5);spin (a.py:9) 30\n"
        "main (a.py:1);work (a.py:5) 10\n"
        "main (a.py:1);sleep (b.py:2) 60\n"
        "a line py-spy never writes\n")
    assert (root.samples, stacks, cut) == (100, 3, False)
    main = root.children["main (a.py:1)"]
    assert main.children["work (a.py:5)"].samples == 40
    assert root.hottest(2) == [("sleep (b.py:2)", 60), ("spin (a.py:9)", 30)]


def test_a_process_root_is_named_by_its_program_not_its_command_line():
    root, _, _ = parse_collapsed(
        'process 12:"/home/u/.venv/bin/python -m clusterdeck.core.cli taskmanager --id t-1 '
        '--config /home/u/config.toml";main (a.py:1) 3\n'
        'process 13:"/usr/lib/jvm/bin/java -cp /x Main";run (b.py:1) 1\n')
    assert sorted(root.children) == ["process 12 (clusterdeck.core.cli taskmanager)",
                                     "process 13 (java)"]


def test_an_endless_profile_is_cut_and_says_so(monkeypatch):
    monkeypatch.setattr(pyspy, "MAX_STACKS", 5)
    deep = ";".join(f"f{i}" for i in range(MAX_DEPTH + 50))
    root, stacks, cut = parse_collapsed("\n".join(f"{deep};leaf{i} 1" for i in range(9)))
    assert (stacks, cut, root.samples) == (5, True, 5)
    depth, node = 0, root
    while node.children:
        node, depth = next(iter(node.children.values())), depth + 1
    assert depth == MAX_DEPTH


def test_a_dump_is_read_as_data_and_garbage_is_a_clear_error():
    threads = parse_dump(json.dumps([{"thread_id": 7, "thread_name": "slot-0", "active": True,
                                      "frames": [{"name": "run", "filename": "/x/t.py",
                                                  "line": 3}, "junk"]}, 5]), pid=42)
    assert [(t.name, t.active, t.pid, [f.label for f in t.frames]) for t in threads] == [
        ("slot-0", True, 42, ["run (t.py:3)"])]
    with pytest.raises(ProfilingError, match="could not be read"):
        parse_dump("Error: no")


SPINNER = textwrap.dedent("""
    import threading, time
    def spin_here():
        while True:
            sum(range(1000))
    threading.Thread(target=spin_here, name="spinner", daemon=True).start()
    print("ready", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def spinner():
    process = subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        yield process
    finally:
        process.kill()
        process.wait(10)


@pytest.mark.integration
def test_a_real_process_shows_its_threads_and_where_its_time_goes(spinner):
    threads = thread_dump(spinner.pid)
    assert {"spinner", "MainThread"} <= {t.name for t in threads}
    spinning = next(t for t in threads if t.name == "spinner")
    assert spinning.frames[0].function == "spin_here"

    graph = flame_graph(spinner.pid, seconds=1, rate=50)
    assert graph.root.samples > 10
    assert graph.root.hottest(1)[0][0].startswith("spin_here")


@pytest.mark.integration
def test_the_command_prints_where_the_time_went_and_writes_the_stacks(spinner, tmp_path,
                                                                        capsys):
    stacks = tmp_path / "stacks.txt"
    assert cli_main(["profile", str(spinner.pid), "--seconds", "1", "-o", str(stacks)]) == 0
    out = capsys.readouterr().out
    assert "samples of" in out and "spin_here" in out
    assert all(line.rpartition(" ")[2].isdigit() for line in stacks.read_text().splitlines())
    assert cli_main(["profile", str(spinner.pid), "--threads"]) == 0
    assert "Thread spinner" in capsys.readouterr().out


@pytest.mark.integration
def test_a_process_that_is_gone_is_named_as_gone():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(10)
    with pytest.raises(ProfilingError, match=f"process {gone.pid} is not running"):
        thread_dump(gone.pid)


def test_without_py_spy_the_error_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setattr(pyspy.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProfilingError, match="pip install py-spy"):
        thread_dump(1)
