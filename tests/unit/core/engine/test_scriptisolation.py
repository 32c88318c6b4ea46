"""What a script changes on its thread that the process shares — environment variables,
imported modules, threads — is put back or named when it ends; no Spark is needed."""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import SimpleNamespace

import pytest

from clusterdeck.core.engine import scriptisolation


class _NoViews:
    def listTables(self, database: str | None = None) -> list:
        return []


NO_SPARK = SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: default),
                           catalog=_NoViews())


@pytest.fixture
def watching():
    scriptisolation.patch()
    try:
        yield
    finally:
        scriptisolation.unpatch()


def on_a_slot_thread(script) -> list[str]:
    """Run ``script`` isolated on a thread of its own, as a slot does; the warnings."""
    warnings: list[str] = []
    failure: list[BaseException] = []

    def slot() -> None:
        try:
            with scriptisolation.isolated(NO_SPARK, warnings.append):
                script()
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=slot, name="task:test")
    thread.start()
    thread.join(timeout=30)
    if failure:
        raise failure[0]
    return warnings


def test_environment_variables_the_script_set_or_removed_get_their_old_values(
        watching, monkeypatch) -> None:
    monkeypatch.setenv("ISOLATION_CHANGED", "before")
    monkeypatch.setenv("ISOLATION_REMOVED", "kept")
    monkeypatch.delenv("ISOLATION_ADDED", raising=False)

    def script() -> None:
        os.environ["ISOLATION_CHANGED"] = "by the script"
        os.environ["ISOLATION_CHANGED"] = "twice"
        os.environ["ISOLATION_ADDED"] = "new"
        del os.environ["ISOLATION_REMOVED"]
        os.environ.update(ISOLATION_ADDED="again")

    on_a_slot_thread(script)
    assert os.environ["ISOLATION_CHANGED"] == "before"
    assert os.environ["ISOLATION_REMOVED"] == "kept"
    assert "ISOLATION_ADDED" not in os.environ


def test_a_variable_set_by_another_thread_meanwhile_is_left_alone(watching,
                                                                 monkeypatch) -> None:
    monkeypatch.delenv("ISOLATION_OTHER", raising=False)
    on_a_slot_thread(lambda: os.environ.__setitem__("ISOLATION_OTHER", "not a script's"))
    os.environ["ISOLATION_OTHER"] = "the taskmanager's"  # this thread runs no script
    on_a_slot_thread(lambda: None)
    assert os.environ["ISOLATION_OTHER"] == "the taskmanager's"


def test_os_environ_is_the_plain_mapping_again_once_unpatched() -> None:
    scriptisolation.patch()
    scriptisolation.unpatch()
    assert type(os.environ) is os._Environ


def test_modules_imported_from_the_scripts_folder_are_forgotten_and_its_path_removed(
        tmp_path) -> None:
    (tmp_path / "isolation_helper.py").write_text("loads = 1\n")
    with scriptisolation.importable_from(tmp_path):
        import isolation_helper  # noqa: F401 - imported as the script would
        assert "isolation_helper" in sys.modules
    assert "isolation_helper" not in sys.modules
    assert str(tmp_path) not in sys.path


def test_threads_the_script_left_running_are_named_in_a_warning_not_stopped(watching) -> None:
    release = threading.Event()
    started: list[threading.Thread] = []

    def script() -> None:
        finished = threading.Thread(target=lambda: None, name="finished-worker")
        finished.start()
        finished.join()
        lingering = threading.Thread(target=release.wait, name="lingering-worker",
                                     daemon=True)
        lingering.start()
        started.append(lingering)

    try:
        warnings = on_a_slot_thread(script)
        assert started[0].is_alive()
    finally:
        release.set()
        started[0].join(timeout=10)
    assert len(warnings) == 1
    assert "1 thread(s) running" in warnings[0] and "lingering-worker" in warnings[0]
    assert "finished-worker" not in warnings[0]


def test_threads_started_outside_a_script_are_not_reported(watching) -> None:
    thread = threading.Thread(target=lambda: None)
    thread.start()   # this thread runs no script: nothing records it
    thread.join()
    assert on_a_slot_thread(lambda: None) == []


def test_signal_handlers_cannot_be_set_from_a_slot_thread(watching) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(ValueError, match="main thread"):
        on_a_slot_thread(lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_script_is_alone_only_when_no_other_ran_at_any_time_beside_it(watching) -> None:
    first_in = threading.Event()
    second_done = threading.Event()
    trails: dict[str, object] = {}

    def first() -> None:
        trails["first"] = scriptisolation._trail()
        first_in.set()
        second_done.wait(30)

    def second() -> None:
        trails["second"] = scriptisolation._trail()

    outer = threading.Thread(target=on_a_slot_thread, args=(first,))
    outer.start()
    first_in.wait(30)
    on_a_slot_thread(second)
    second_done.set()
    outer.join(30)
    assert not trails["first"].alone and not trails["second"].alone
    on_a_slot_thread(lambda: trails.__setitem__("third", scriptisolation._trail()))
    assert trails["third"].alone
