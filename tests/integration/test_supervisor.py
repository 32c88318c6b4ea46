"""The supervisor with real child processes (small ``python -c`` scripts).

Every test waits on conditions with deadlines; every supervisor is stopped at the end.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from clusterdeck.core.config.settings import Config
from clusterdeck.core.supervisor import (
    ProcessInfo,
    ProcessSpec,
    ProcessStatus,
    Supervisor,
    _supervisor,
)
from clusterdeck.core.supervisor._spawn import signal_group
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

REPO = Path(__file__).resolve().parents[2]

FAST = {
    "supervisor.restart-backoff": "50 ms",
    "supervisor.max-backoff": "400 ms",
    "supervisor.max-restarts": 3,
    "supervisor.restart-window": "1 min",
    "supervisor.shutdown-grace": "1 s",
}

SLEEP = "import time; time.sleep(600)"


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-u", "-c", textwrap.dedent(code))


def wait_until(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    wait_for(condition, timeout, what or "the condition")


def is_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def make_supervisor(log_dir: Path) -> Iterator[Callable[..., Supervisor]]:
    made: list[Supervisor] = []

    def make(**overrides: object) -> Supervisor:
        supervisor = Supervisor(Config({**FAST, **overrides}), log_dir)
        made.append(supervisor)
        return supervisor

    yield make
    for supervisor in made:
        supervisor.stop()


@pytest.fixture
def supervisor(make_supervisor: Callable[..., Supervisor]) -> Supervisor:
    return make_supervisor()


def status(supervisor: Supervisor, name: str) -> ProcessStatus:
    return supervisor.info(name).status


def log_text(supervisor: Supervisor, name: str) -> str:
    path = supervisor.info(name).log_path
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_a_crashed_child_is_restarted_with_doubling_backoff_and_counted(supervisor, tmp_path):
    counter = tmp_path / "crashes"
    supervisor.add(ProcessSpec("worker", "worker", python(f"""
        import pathlib, sys, time
        counter = pathlib.Path({str(counter)!r})
        crashes = int(counter.read_text()) if counter.exists() else 0
        if crashes < 2:
            counter.write_text(str(crashes + 1))
            sys.exit(3)
        time.sleep(600)
    """)))
    changes: list[tuple[float, ProcessStatus]] = []
    supervisor.add_listener(lambda info: changes.append((time.monotonic(), info.status)))

    supervisor.start()
    wait_until(lambda: supervisor.info("worker").restarts == 2
               and status(supervisor, "worker") is ProcessStatus.RUNNING, what="two restarts")

    info = supervisor.info("worker")
    assert info.last_exit_code == 3
    assert is_alive(info.pid)
    statuses = [change[1] for change in changes]
    assert statuses == [ProcessStatus.STARTING, ProcessStatus.RUNNING] + [
        ProcessStatus.RESTARTING, ProcessStatus.STARTING, ProcessStatus.RUNNING] * 2
    pauses = [changes[i + 1][0] - changes[i][0] for i, (_, state) in enumerate(changes)
              if state is ProcessStatus.RESTARTING]
    # The listener hears RESTARTING a little after the pause began: a few ms of slack.
    assert pauses[0] >= 0.045
    assert pauses[1] >= 0.095
    text = log_text(supervisor, "worker")
    assert text.count("exited with code 3") == 2
    assert "restarting in 0.05 s" in text and "restarting in 0.10 s" in text


def test_a_child_crashing_in_a_loop_ends_failed_after_max_restarts(supervisor):
    supervisor.add(ProcessSpec("crasher", "worker", python("import sys; sys.exit(1)")))

    supervisor.start()
    wait_until(lambda: status(supervisor, "crasher") is ProcessStatus.FAILED, what="FAILED")

    info = supervisor.info("crasher")
    assert (info.restarts, info.pid, info.last_exit_code) == (3, None, 1)
    assert "giving up: 3 restarts within 60 s" in log_text(supervisor, "crasher")


def test_restart_brings_a_failed_process_back_with_a_fresh_count(make_supervisor, tmp_path):
    supervisor = make_supervisor(**{"supervisor.max-restarts": 1})
    healed = tmp_path / "healed"
    supervisor.add(ProcessSpec("flaky", "worker", python(f"""
        import os, sys, time
        if not os.path.exists({str(healed)!r}):
            sys.exit(1)
        time.sleep(600)
    """)))
    supervisor.start()
    wait_until(lambda: status(supervisor, "flaky") is ProcessStatus.FAILED, what="FAILED")

    healed.touch()
    supervisor.restart("flaky")

    info = supervisor.info("flaky")
    assert (info.status, info.restarts) == (ProcessStatus.RUNNING, 0)
    assert is_alive(info.pid)


def test_stop_ends_a_child_that_ignores_sigterm_with_sigkill_after_the_grace(make_supervisor):
    supervisor = make_supervisor(**{"supervisor.shutdown-grace": "500 ms"})
    supervisor.add(ProcessSpec("stubborn", "worker", python("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready")
        time.sleep(600)
    """)))
    supervisor.start()
    pid = supervisor.info("stubborn").pid
    wait_until(lambda: "ready" in log_text(supervisor, "stubborn").splitlines(),
               what="SIGTERM ignored")

    began = time.monotonic()
    supervisor.stop()
    took = time.monotonic() - began

    info = supervisor.info("stubborn")
    assert 0.5 <= took < 3.0
    assert (info.status, info.pid, info.last_exit_code) == (ProcessStatus.STOPPED, None, -9)
    assert not is_alive(pid)
    assert "SIGTERM: SIGKILL" in log_text(supervisor, "stubborn")


def test_stop_ends_a_well_behaved_child_with_sigterm_without_waiting_the_grace(make_supervisor):
    supervisor = make_supervisor(**{"supervisor.shutdown-grace": "5 s"})
    supervisor.add(ProcessSpec("polite", "worker", python(SLEEP)))
    supervisor.add(ProcessSpec("idle", "worker", python(SLEEP)))
    supervisor.start()

    began = time.monotonic()
    supervisor.stop()

    assert time.monotonic() - began < 3.0
    assert [(info.status, info.last_exit_code) for info in supervisor.processes()] == [
        (ProcessStatus.STOPPED, -15), (ProcessStatus.STOPPED, -15)]


def test_stop_signals_the_processes_in_the_reverse_order_of_add(supervisor, monkeypatch):
    for name in ("broker", "jobmanager", "taskmanager-1"):
        supervisor.add(ProcessSpec(name, name.split("-")[0], python(SLEEP)))
    supervisor.start()
    pids = {info.pid: info.name for info in supervisor.processes()}
    sent: list[str] = []

    def recording(pid: int, sig: int) -> None:
        if sig == signal.SIGTERM:
            sent.append(pids[pid])
        signal_group(pid, sig)

    monkeypatch.setattr(_supervisor, "signal_group", recording)
    supervisor.stop()

    assert sent == ["taskmanager-1", "jobmanager", "broker"]


def test_stop_is_idempotent_and_cancels_pending_restarts(make_supervisor):
    supervisor = make_supervisor(**{"supervisor.restart-backoff": "30 s",
                                    "supervisor.max-backoff": "30 s"})
    supervisor.add(ProcessSpec("crasher", "worker", python("import sys; sys.exit(2)")))
    supervisor.start()
    wait_until(lambda: status(supervisor, "crasher") is ProcessStatus.RESTARTING,
               what="RESTARTING")

    supervisor.stop()
    supervisor.stop()

    assert status(supervisor, "crasher") is ProcessStatus.STOPPED


def test_leaving_the_with_block_stops_every_child_and_the_supervisor_thread(log_dir):
    with Supervisor(Config(FAST), log_dir) as supervisor:
        supervisor.add(ProcessSpec("sleeper", "worker", python(SLEEP)))
        supervisor.start()
        pid = supervisor.info("sleeper").pid

    assert status(supervisor, "sleeper") is ProcessStatus.STOPPED
    assert not is_alive(pid)
    wait_until(lambda: not any(thread.name == "clusterdeck-supervisor"
                               for thread in threading.enumerate()), what="thread end")


def test_kill_is_handled_like_a_crash_and_restarts_the_child(supervisor):
    supervisor.add(ProcessSpec("victim", "taskmanager", python(SLEEP)))
    supervisor.start()
    first = supervisor.info("victim").pid

    supervisor.kill("victim")
    wait_until(lambda: supervisor.info("victim").restarts == 1
               and status(supervisor, "victim") is ProcessStatus.RUNNING, what="restart")

    info = supervisor.info("victim")
    assert info.last_exit_code == -signal.SIGKILL
    assert info.pid != first
    assert not is_alive(first)
    assert "fault injection: SIGKILL" in log_text(supervisor, "victim")


def test_a_child_that_exits_with_restart_off_is_stopped(supervisor):
    supervisor.add(ProcessSpec("once", "job", python("print('done')"), restart=False))

    supervisor.start()
    wait_until(lambda: status(supervisor, "once") is ProcessStatus.STOPPED
               and supervisor.info("once").last_exit_code == 0, what="exit")

    assert supervisor.info("once").restarts == 0


def test_a_command_that_cannot_start_fails_with_the_reason_in_its_log(supervisor, tmp_path):
    supervisor.add(ProcessSpec("ghost", "worker", (str(tmp_path / "missing"),),
                               restart=False))

    supervisor.start()

    assert status(supervisor, "ghost") is ProcessStatus.FAILED
    assert "cannot start" in log_text(supervisor, "ghost")


def test_output_and_errors_go_to_the_log_as_written_and_rotate(make_supervisor, log_dir):
    supervisor = make_supervisor(**{"log.max-bytes": 4096, "log.backup-count": 2})
    supervisor.add(ProcessSpec("chatty", "worker", python("""
        import sys
        print("2024-05-01 12:00:00 INFO own format kept")
        print("to stderr", file=sys.stderr)
        for index in range(2000):
            print(f"line {index:05d}")
    """), restart=False))

    supervisor.start()
    wait_until(lambda: status(supervisor, "chatty") is ProcessStatus.STOPPED, what="exit")
    supervisor.stop()

    assert sorted(path.name for path in log_dir.iterdir()) == [
        "chatty.log", "chatty.log.1", "chatty.log.2"]
    assert all(path.stat().st_size <= 4096 for path in log_dir.iterdir())
    assert "line 01999\n" in (log_dir / "chatty.log").read_text(encoding="utf-8")


def test_the_log_keeps_the_childs_own_format_and_stderr(supervisor):
    supervisor.add(ProcessSpec("formatted", "worker", python("""
        import sys
        print("2024-05-01 12:00:00 INFO own format kept")
        print("to stderr", file=sys.stderr)
    """), restart=False))

    supervisor.start()
    wait_until(lambda: status(supervisor, "formatted") is ProcessStatus.STOPPED, what="exit")
    supervisor.stop()

    lines = log_text(supervisor, "formatted").splitlines()
    assert "2024-05-01 12:00:00 INFO own format kept" in lines
    assert "to stderr" in lines


def test_a_child_that_prints_a_lot_never_blocks(supervisor):
    supervisor.add(ProcessSpec("firehose", "worker", python("""
        import sys
        line = "x" * 99 + "\\n"
        for _ in range(40_000):
            sys.stdout.write(line)
            sys.stderr.write(line)
    """), restart=False))

    supervisor.start()
    wait_until(lambda: status(supervisor, "firehose") is ProcessStatus.STOPPED,
               timeout=20, what="8 MB written")

    assert supervisor.info("firehose").last_exit_code == 0


def test_env_and_cwd_reach_the_child(supervisor, tmp_path):
    supervisor.add(ProcessSpec("configured", "worker", python("""
        import os
        print(os.environ["CLUSTERDECK_TEST"], os.getcwd(), "PATH" in os.environ)
    """), env={"CLUSTERDECK_TEST": "hello"}, cwd=str(tmp_path), restart=False))

    supervisor.start()
    wait_until(lambda: status(supervisor, "configured") is ProcessStatus.STOPPED, what="exit")
    supervisor.stop()

    assert f"hello {tmp_path} True\n" in log_text(supervisor, "configured")


def test_each_child_leads_its_own_session_and_process_group(supervisor):
    supervisor.add(ProcessSpec("leader", "worker", python(SLEEP)))

    supervisor.start()

    pid = supervisor.info("leader").pid
    assert os.getpgid(pid) == pid
    assert os.getsid(pid) == pid


def test_what_a_child_leaves_in_its_group_dies_with_it(supervisor):
    supervisor.add(ProcessSpec("parent", "worker", python(f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", {SLEEP!r}])
        print("grandchild", child.pid)
    """), restart=False))

    supervisor.start()
    wait_until(lambda: status(supervisor, "parent") is ProcessStatus.STOPPED, what="exit")
    supervisor.stop()

    grandchild = int(log_text(supervisor, "parent").split("grandchild ")[1].split()[0])
    wait_until(lambda: not is_alive(grandchild), timeout=5, what="grandchild gone")


def test_listeners_see_snapshots_and_may_call_the_supervisor(supervisor):
    seen: list[ProcessInfo] = []

    def stop_once_running(info: ProcessInfo) -> None:
        seen.append(info)
        if info.status is ProcessStatus.RUNNING:
            supervisor.stop_process(info.name)

    supervisor.add_listener(stop_once_running)
    supervisor.add(ProcessSpec("brief", "worker", python(SLEEP)))
    supervisor.start()
    wait_until(lambda: status(supervisor, "brief") is ProcessStatus.STOPPED
               and supervisor.info("brief").last_exit_code is not None, what="stopped")

    assert [info.status for info in seen] == [ProcessStatus.STOPPED, ProcessStatus.STARTING,
                                              ProcessStatus.RUNNING, ProcessStatus.STOPPED]
    assert seen[2].pid is not None and seen[3].pid is None


def test_unknown_names_and_duplicate_specs_are_refused(supervisor):
    supervisor.add(ProcessSpec("one", "worker", python(SLEEP)))

    with pytest.raises(ValueError, match="already supervised"):
        supervisor.add(ProcessSpec("one", "worker", python(SLEEP)))
    with pytest.raises(KeyError):
        supervisor.start_process("two")
    with pytest.raises(KeyError):
        supervisor.info("two")


# Three sleeping children, one of them killed and restarted first: a restarted child must
# die with the supervisor too.
SUPERVISOR_SCRIPT = """
import json, sys, threading
from pathlib import Path
from clusterdeck.core.config.settings import Config
from clusterdeck.core.supervisor import ProcessSpec, ProcessStatus, Supervisor

supervisor = Supervisor(Config({"supervisor.restart-backoff": "10 ms"}), Path(sys.argv[1]))
restarted = threading.Event()
supervisor.add_listener(lambda info: info.restarts == 1 and info.status is
                        ProcessStatus.RUNNING and restarted.set())
for index in range(3):
    supervisor.add(ProcessSpec(f"sleeper-{index}", "sleeper",
                               (sys.executable, "-c", "import time; time.sleep(600)")))
supervisor.start()
supervisor.kill("sleeper-0")
if not restarted.wait(10):
    sys.exit("sleeper-0 was not restarted")
print(json.dumps([info.pid for info in supervisor.processes()]), flush=True)
threading.Event().wait()
"""


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError(f"no line from the supervisor within {timeout} s")
    return process.stdout.readline()


def test_no_child_outlives_a_supervisor_killed_with_sigkill(log_dir):
    host = subprocess.Popen([sys.executable, "-c", SUPERVISOR_SCRIPT, str(log_dir)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(read_line(host, timeout=15))
        assert len(pids) == 3
        assert all(is_alive(pid) and psutil.Process(pid).ppid() == host.pid for pid in pids)

        host.kill()
        host.wait(5)

        wait_until(lambda: not any(is_alive(pid) for pid in pids), timeout=5,
                   what="children of the killed supervisor to die")
    finally:
        host.kill()
        host.wait(5)
        host.stdout.close()
