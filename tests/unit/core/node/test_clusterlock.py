"""The cluster lock between real processes: one holder, a loser told who holds it, a
JobManager running under its supervisor's lock, and no stale lock after a crash."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from clusterdeck.core.node import clusterlock
from clusterdeck.core.node.clusterlock import ClusterLockedError, LockHolder
from tests.waiting import wait_for

pytestmark = pytest.mark.integration  # lock holders in processes of their own

# Takes the lock, then holds it until its stdin closes or it is killed. With a child:
# starts `sleep` without closing file descriptors, which must not keep the lock alive.
HOLDER = """
import subprocess, sys
from pathlib import Path
from clusterdeck.core.node import clusterlock
lock = clusterlock.acquire(Path(sys.argv[1]), "lab", "supervisor", command="clusterdeck up")
if sys.argv[2] == "with-child":
    print(subprocess.Popen(["sleep", "600"], close_fds=False).pid, flush=True)
sys.stdin.read()
"""


StartHolder = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def start_holder(tmp_path: Path) -> Iterator[StartHolder]:
    """Starts a holder of ``tmp_path``'s lock and returns once it holds it; every holder
    (and its child) is killed at the end of the test."""
    started: list[subprocess.Popen[str]] = []
    children: list[int] = []

    def start(child: bool = False) -> subprocess.Popen[str]:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(tmp_path), "with-child" if child else "-"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(holder)
        if child:
            assert holder.stdout is not None
            children.append(int(holder.stdout.readline()))
        wait_for(lambda: (h := clusterlock.read_holder(tmp_path)) and h.pid == holder.pid,
                 30, f"process {holder.pid} holding the lock")
        return holder

    yield start
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for holder in started:
        holder.kill()
        holder.wait(10)


def refusal(tmp_path: Path, accept_handover: bool = False) -> ClusterLockedError:
    with pytest.raises(ClusterLockedError) as refused:
        clusterlock.acquire(tmp_path, "lab", "jobmanager", accept_handover=accept_handover)
    return refused.value


def test_a_second_process_is_refused_and_told_who_holds_the_lock(
        tmp_path: Path, start_holder: StartHolder) -> None:
    holder = start_holder()
    error = refusal(tmp_path)
    assert error.holder is not None
    assert (error.holder.pid, error.holder.role, error.holder.command) == (
        holder.pid, "supervisor", "clusterdeck up")
    assert str(error).startswith(f"cluster lab is already running: supervisor pid "
                                 f"{holder.pid} on host {error.holder.host} since ")
    assert str(error).endswith("(started by `clusterdeck up`)")


def test_a_refused_process_leaves_the_lock_file_as_the_holder_wrote_it(
        tmp_path: Path, start_holder: StartHolder) -> None:
    start_holder()
    written = clusterlock.lock_path(tmp_path).read_bytes()
    refusal(tmp_path)
    assert clusterlock.lock_path(tmp_path).read_bytes() == written


def test_the_lock_is_free_as_soon_as_its_holder_is_killed(
        tmp_path: Path, start_holder: StartHolder) -> None:
    holder = start_holder()
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    with clusterlock.acquire(tmp_path, "lab", "jobmanager") as lock:
        assert not lock.inherited
        assert clusterlock.read_holder(tmp_path) == lock.holder
        assert lock.holder.pid == os.getpid()


def test_a_child_the_holder_started_does_not_keep_the_lock_after_the_holder_died(
        tmp_path: Path, start_holder: StartHolder) -> None:
    holder = start_holder(child=True)
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    clusterlock.acquire(tmp_path, "lab", "jobmanager").release()


def test_a_jobmanager_with_the_handed_on_token_runs_under_its_supervisors_lock(
        tmp_path: Path, start_holder: StartHolder, monkeypatch: pytest.MonkeyPatch) -> None:
    holder = start_holder()
    token = clusterlock.read_holder(tmp_path).token
    monkeypatch.setenv(clusterlock.HANDOVER_ENV, token)
    with clusterlock.acquire(tmp_path, "lab", "jobmanager", accept_handover=True) as lock:
        assert lock.inherited
        assert lock.holder.pid == holder.pid
    # Releasing a lock it never held left the supervisor's lock alone.
    assert refusal(tmp_path).holder.pid == holder.pid


def test_a_wrong_token_or_a_role_that_takes_no_handover_is_refused(
        tmp_path: Path, start_holder: StartHolder, monkeypatch: pytest.MonkeyPatch) -> None:
    start_holder()
    monkeypatch.setenv(clusterlock.HANDOVER_ENV, "not-the-token")
    refusal(tmp_path, accept_handover=True)
    monkeypatch.setenv(clusterlock.HANDOVER_ENV, clusterlock.read_holder(tmp_path).token)
    refusal(tmp_path)  # a supervisor never runs under somebody else's lock


def test_a_second_lock_in_the_same_process_is_refused_and_release_frees_it(
        tmp_path: Path) -> None:
    first = clusterlock.acquire(tmp_path, "lab", "supervisor", command="clusterdeck gui")
    assert refusal(tmp_path).holder == first.holder
    first.release()
    first.release()
    clusterlock.acquire(tmp_path, "lab", "supervisor").release()


def test_a_lock_file_naming_a_dead_process_names_nobody(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    stale = LockHolder(dead.pid, socket.gethostname(), "supervisor", 0.0, "x", "t")
    clusterlock.lock_path(tmp_path).write_text(json.dumps(asdict(stale)) + "\n")
    assert clusterlock.read_holder(tmp_path) is None
