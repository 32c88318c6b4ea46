"""Per-thread stdout, stderr and sys.argv for scripts running side by side."""

from __future__ import annotations

import sys
import threading

from clusterdeck.core.engine.capture import thread_io


def test_each_thread_gets_its_own_output_and_arguments():
    results: dict[str, tuple[str, str, list[str]]] = {}
    both_inside = threading.Barrier(2)

    def script(name: str) -> None:
        with thread_io([f"{name}.py", name]) as (out, err):
            both_inside.wait(timeout=10)
            for _ in range(50):
                print(f"out of {name}")
                print(f"err of {name}", file=sys.stderr)
            argv = list(sys.argv)
            both_inside.wait(timeout=10)
        results[name] = (out.getvalue(), err.getvalue(), argv)

    threads = [threading.Thread(target=script, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    for name in ("a", "b"):
        out, err, argv = results[name]
        assert out == f"out of {name}\n" * 50
        assert err == f"err of {name}\n" * 50
        assert argv == [f"{name}.py", name]


def test_other_threads_and_the_afterwards_see_the_real_streams(capsys):
    real_argv = list(sys.argv)
    real_stdout = sys.stdout
    with thread_io(["script.py"]) as (out, _):
        seen: list[object] = []
        outside = threading.Thread(target=lambda: (print("from outside"),
                                                   seen.append(list(sys.argv))))
        outside.start()
        outside.join(timeout=10)
        print("from inside")
    assert out.getvalue() == "from inside\n"
    assert "from outside" in capsys.readouterr().out
    assert seen == [real_argv]
    assert sys.stdout is real_stdout and sys.argv == real_argv


def test_a_script_may_change_its_own_arguments():
    with thread_io(["script.py", "a"]):
        sys.argv += ["b"]
        sys.argv.append("c")
        seen = sys.argv[1:]
    assert seen == ["a", "b", "c"]
