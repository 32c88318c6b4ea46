"""A slot thread's own working directory: relative paths there, the process unmoved."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from clusterdeck.core.engine import threadcwd
from clusterdeck.core.engine.threadcwd import ThreadCwdUnavailable, thread_working_directory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="a thread's own working directory needs Linux")


def folder_with_data(root: Path, name: str) -> Path:
    folder = root / name
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "x.txt").write_text(f"the data of {name}")
    return folder


def test_two_threads_open_the_same_relative_path_each_in_its_own_folder(tmp_path):
    folders = {name: folder_with_data(tmp_path, name) for name in ("a", "b")}
    process_cwd = os.getcwd()
    both_inside = threading.Barrier(3)
    seen: dict[str, tuple[str, str]] = {}

    def script(name: str) -> None:
        with thread_working_directory(str(folders[name])):
            both_inside.wait(timeout=10)  # both moved before either reads
            seen[name] = (Path("data/x.txt").read_text(), os.getcwd())
            both_inside.wait(timeout=10)
        seen[f"{name} after"] = ("", os.getcwd())

    threads = [threading.Thread(target=script, args=(name,)) for name in folders]
    for thread in threads:
        thread.start()
    both_inside.wait(timeout=10)
    while_inside = os.getcwd()
    both_inside.wait(timeout=10)
    for thread in threads:
        thread.join(timeout=10)
    assert seen["a"] == ("the data of a", str(folders["a"]))
    assert seen["b"] == ("the data of b", str(folders["b"]))
    assert while_inside == process_cwd
    assert seen["a after"][1] == seen["b after"][1] == process_cwd == os.getcwd()


def test_threads_a_script_starts_work_in_its_folder_too(tmp_path):
    folder = folder_with_data(tmp_path, "a")
    seen: list[str] = []

    def script() -> None:
        with thread_working_directory(str(folder)):
            helper = threading.Thread(target=lambda: seen.append(Path("data/x.txt").read_text()))
            helper.start()
            helper.join(timeout=10)

    thread = threading.Thread(target=script)
    thread.start()
    thread.join(timeout=10)
    assert seen == ["the data of a"]


def test_a_folder_that_cannot_be_entered_raises_and_the_thread_stays_where_it_was(tmp_path):
    outcome: list[object] = []

    def script() -> None:
        try:
            with thread_working_directory(str(tmp_path / "missing")):
                outcome.append("entered")
        except FileNotFoundError as error:
            outcome.append(error)
        outcome.append(os.getcwd())

    thread = threading.Thread(target=script)
    thread.start()
    thread.join(timeout=10)
    assert isinstance(outcome[0], FileNotFoundError)
    assert outcome[1] == os.getcwd()


def test_where_unshare_is_refused_the_thread_keeps_the_process_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(threadcwd, "_libc_unshare", lambda: (lambda flags: -1))
    before = os.getcwd()
    with pytest.raises(ThreadCwdUnavailable, match="unshare"), \
            thread_working_directory(str(tmp_path)):
        pass
    assert os.getcwd() == before
