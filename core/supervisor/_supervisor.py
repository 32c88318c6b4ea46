"""The supervisor: starts process specs, watches them and restarts them by the policy.

Threads. One thread, the supervisor thread (named ``clusterdeck-supervisor``), owns every
process's state: it spawns every child (so ``PR_SET_PDEATHSIG`` ties the children to a
thread that lives as long as they do), handles their exits, fires the restart and kill
deadlines and calls the listeners. It blocks on its inbox with a timeout set by the next
deadline, never polls. Public methods post a command to the inbox and wait for it;
snapshots (``processes()``, ``info()``) are read without waiting. Each child has a waiter
thread blocked in ``wait()`` that posts its exit, and a pump thread for its log. The
supervisor thread starts with the first command and ends by itself once nothing is
alive, pending or queued, so a stopped supervisor holds no thread.
"""

from __future__ import annotations

import logging
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from clusterdeck.core.supervisor._logs import ProcessLog
from clusterdeck.core.supervisor._policy import RestartBudget, RestartPolicy
from clusterdeck.core.supervisor._process import ProcessInfo, ProcessSpec, ProcessStatus
from clusterdeck.core.supervisor._spawn import describe_exit, signal_group, spawn

_log = logging.getLogger(__name__)

StatusListener = Callable[[ProcessInfo], None]

_KILL_WAIT = 5.0  # after SIGKILL, how long a stop waits for the kernel to report the exits
_LOG_DRAIN = 2.0  # after a stop, how long the pumps get to write what is left in the pipes


@dataclass(eq=False)
class _Child:
    """One supervised process as the supervisor thread sees it; touched there only."""

    spec: ProcessSpec
    log: ProcessLog
    budget: RestartBudget
    status: ProcessStatus = ProcessStatus.STOPPED
    popen: subprocess.Popen[bytes] | None = None
    started_at: float | None = None
    restarts: int = 0
    last_exit_code: int | None = None
    restart_at: float | None = None  # time.monotonic() of the pending restart
    kill_at: float | None = None     # time.monotonic() of the SIGKILL ending a stop
    stopping: bool = False

    @property
    def alive(self) -> bool:
        """Spawned and its exit not yet handled."""
        return self.popen is not None

    def snapshot(self) -> ProcessInfo:
        return ProcessInfo(
            name=self.spec.name,
            role=self.spec.role,
            pid=self.popen.pid if self.popen is not None else None,
            status=self.status,
            started_at=self.started_at,
            restarts=self.restarts,
            last_exit_code=self.last_exit_code,
            log_path=self.log.path,
        )


@dataclass(frozen=True)
class _Command:
    """A public method's work: ``action(done, *args)`` runs on the supervisor thread and
    resolves ``done``, at once or when the processes it waits for are down."""

    action: Callable[..., None]
    args: tuple[Any, ...]
    done: Future[None]


@dataclass(frozen=True)
class _Exited:
    """Posted by a child's waiter thread once the child has been reaped."""

    name: str
    popen: subprocess.Popen[bytes]
    code: int


@dataclass(frozen=True)
class _Waiter:
    """Work that waits until ``ready()``; then ``then()`` runs and ``done`` resolves."""

    ready: Callable[[], bool]
    done: Future[None]
    then: Callable[[], None] | None = None


class Supervisor:
    """Starts generic process specs, restarts the ones that exit unasked, stops them all.

    It knows nothing about what the processes are. Every child writes stdout and stderr
    to ``log_dir/<name>.log``. Status changes reach listeners (see ``add_listener``).
    Usable as a context manager: leaving the block stops every process.

    Methods may be called from any thread. Called from a listener (that is, from the
    supervisor thread) they cannot wait for the supervisor thread itself: they queue
    their work, return at once, and it runs after the listener returns.
    """

    def __init__(self, config: Mapping[str, Any], log_dir: Path) -> None:
        self._policy = RestartPolicy.from_config(config)
        self._grace: float = config["supervisor.shutdown-grace"]
        self._log_max_bytes: int = config["log.max-bytes"]
        self._log_backups: int = config["log.backup-count"]
        self._log_dir = Path(log_dir)
        self._lock = threading.Lock()  # guards the fields up to _listeners
        self._inbox: queue.SimpleQueue[_Command | _Exited] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._infos: dict[str, ProcessInfo] = {}
        self._logs: dict[str, ProcessLog] = {}
        self._listeners: list[StatusListener] = []
        # Owned by the supervisor thread:
        self._children: dict[str, _Child] = {}
        self._waiters: list[_Waiter] = []

    # -- public surface --------------------------------------------------------------------

    def add(self, spec: ProcessSpec) -> None:
        """Supervise ``spec``, STOPPED until started. Raises ValueError for a name in use."""
        self._command(self._add, spec)

    def start(self) -> None:
        """Start every process that is not up, in the order they were added."""
        self._command(self._start_all)

    def start_process(self, name: str) -> None:
        """Start one process (a FAILED one too, with a fresh restart budget); one that is
        up is left alone."""
        self._command(self._start_one, name)

    def stop(self) -> None:
        """SIGTERM to every process group in the reverse order of ``add``, SIGKILL to those
        still alive after ``supervisor.shutdown-grace``; returns once they are down and
        their logs written. Pending restarts are cancelled; FAILED processes stay FAILED.
        Idempotent."""
        self._command(self._stop_all, timeout=self._grace + _KILL_WAIT)
        if not self._on_supervisor_thread():
            self._close_logs()

    def stop_process(self, name: str) -> None:
        """Stop one process like ``stop()`` does, and return once it is down."""
        self._command(self._stop_one, name, timeout=self._grace + _KILL_WAIT)

    def restart(self, name: str) -> None:
        """Stop one process, then start it again with a fresh restart budget (this is how
        a FAILED process comes back)."""
        self._command(self._restart_one, name, timeout=self._grace + _KILL_WAIT)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the process alone, as fault injection: an exit that follows is
        handled like any crash (restarted by the policy). No-op when it is not alive."""
        self._command(self._kill, name, sig)

    def processes(self) -> list[ProcessInfo]:
        """Snapshots of every process, in the order they were added."""
        with self._lock:
            return list(self._infos.values())

    def info(self, name: str) -> ProcessInfo:
        """The snapshot of one process; KeyError for an unknown name."""
        with self._lock:
            try:
                return self._infos[name]
            except KeyError:
                raise KeyError(f"no process named {name!r}") from None

    def add_listener(self, listener: StatusListener) -> None:
        """Call ``listener(info)`` on every change of a process's snapshot, which includes
        every status change.

        It runs on the supervisor thread: it must return quickly and must not block (a
        GUI marshals the snapshot to its own thread). An exception it raises is logged
        and ignored.
        """
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: StatusListener) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # -- caller side -----------------------------------------------------------------------

    def _command(self, action: Callable[..., None], *args: Any,
                 timeout: float | None = None) -> None:
        done: Future[None] = Future()
        self._post(_Command(action, args, done))
        if self._on_supervisor_thread():
            done.add_done_callback(_log_failure)
            return
        try:
            done.result(timeout)
        except TimeoutError:
            _log.error("supervisor: processes still alive %.1f s after SIGKILL", _KILL_WAIT)

    def _post(self, event: _Command | _Exited) -> None:
        with self._lock:
            self._inbox.put(event)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="clusterdeck-supervisor",
                                                daemon=True)
                self._thread.start()

    def _on_supervisor_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _close_logs(self) -> None:
        deadline = time.monotonic() + _LOG_DRAIN
        with self._lock:
            logs = list(self._logs.values())
        for log in logs:
            log.close(max(0.0, deadline - time.monotonic()))

    # -- the supervisor thread -------------------------------------------------------------

    def _run(self) -> None:
        """The supervisor thread: events in, processes out, until nothing is left."""
        while True:
            try:
                event = self._inbox.get(timeout=self._time_to_next_deadline())
            except queue.Empty:
                event = None
            try:
                if isinstance(event, _Command):
                    self._execute(event)
                elif isinstance(event, _Exited):
                    self._on_exit(event)
                self._fire_deadlines()
                self._settle_waiters()
            except Exception:
                _log.exception("supervisor: unexpected error; carrying on")
            if self._idle():
                with self._lock:
                    if self._inbox.empty():
                        self._thread = None
                        return

    def _execute(self, command: _Command) -> None:
        try:
            command.action(command.done, *command.args)
        except Exception as error:
            if not command.done.done():
                command.done.set_exception(error)

    def _idle(self) -> bool:
        return not self._waiters and not any(
            child.alive or child.restart_at is not None for child in self._children.values())

    def _time_to_next_deadline(self) -> float | None:
        deadlines = [moment for child in self._children.values()
                     for moment in (child.kill_at, child.restart_at) if moment is not None]
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - time.monotonic())

    def _fire_deadlines(self) -> None:
        now = time.monotonic()
        for child in list(self._children.values()):
            if child.kill_at is not None and child.kill_at <= now and child.popen is not None:
                child.kill_at = None
                child.log.note(f"pid {child.popen.pid} still alive {self._grace:g} s after "
                               "SIGTERM: SIGKILL")
                signal_group(child.popen.pid, signal.SIGKILL)
            if child.restart_at is not None and child.restart_at <= now:
                child.restart_at = None
                child.restarts += 1
                self._spawn(child)

    def _when(self, ready: Callable[[], bool], done: Future[None],
              then: Callable[[], None] | None = None) -> None:
        self._waiters.append(_Waiter(ready, done, then))
        self._settle_waiters()

    def _settle_waiters(self) -> None:
        waiting = []
        for waiter in self._waiters:
            if not waiter.ready():
                waiting.append(waiter)
                continue
            try:
                if waiter.then is not None:
                    waiter.then()
                waiter.done.set_result(None)
            except Exception as error:
                waiter.done.set_exception(error)
        self._waiters = waiting

    def _child(self, name: str) -> _Child:
        try:
            return self._children[name]
        except KeyError:
            raise KeyError(f"no process named {name!r}") from None

    def _set(self, child: _Child, status: ProcessStatus) -> None:
        child.status = status
        self._publish(child)

    def _publish(self, child: _Child) -> None:
        info = child.snapshot()
        with self._lock:
            changed = self._infos.get(info.name) != info
            self._infos[info.name] = info
            listeners = list(self._listeners)
        if not changed:
            return
        for listener in listeners:
            try:
                listener(info)
            except Exception:
                _log.exception("supervisor: listener %r failed on %s", listener, info.name)

    # -- commands (supervisor thread) ------------------------------------------------------

    def _add(self, done: Future[None], spec: ProcessSpec) -> None:
        if spec.name in self._children:
            raise ValueError(f"a process named {spec.name!r} is already supervised")
        log = ProcessLog(self._log_dir / f"{spec.name}.log", self._log_max_bytes,
                         self._log_backups)
        child = _Child(spec, log, RestartBudget(self._policy))
        self._children[spec.name] = child
        with self._lock:
            self._logs[spec.name] = log
        self._publish(child)
        done.set_result(None)

    def _start_all(self, done: Future[None]) -> None:
        for child in list(self._children.values()):
            self._start(child)
        done.set_result(None)

    def _start_one(self, done: Future[None], name: str) -> None:
        self._start(self._child(name))
        done.set_result(None)

    def _stop_all(self, done: Future[None]) -> None:
        children = list(self._children.values())
        for child in reversed(children):
            self._begin_stop(child)
        self._when(lambda: not any(child.alive for child in children), done)

    def _stop_one(self, done: Future[None], name: str) -> None:
        child = self._child(name)
        self._begin_stop(child)
        self._when(lambda: not child.alive, done)

    def _restart_one(self, done: Future[None], name: str) -> None:
        child = self._child(name)
        self._begin_stop(child)
        self._when(lambda: not child.alive, done, then=lambda: self._start(child))

    def _kill(self, done: Future[None], name: str, sig: int) -> None:
        child = self._child(name)
        if child.popen is not None:
            child.log.note(f"fault injection: {signal.Signals(sig).name} to pid "
                           f"{child.popen.pid}")
            child.popen.send_signal(sig)
        done.set_result(None)

    # -- lifecycle (supervisor thread) -----------------------------------------------------

    def _start(self, child: _Child) -> None:
        if child.alive:
            return
        child.restart_at = None
        child.restarts = 0
        child.budget.reset()
        self._spawn(child)

    def _spawn(self, child: _Child) -> None:
        spec = child.spec
        self._set(child, ProcessStatus.STARTING)
        try:
            popen = spawn(spec, child.restarts)
        except (OSError, subprocess.SubprocessError) as error:
            child.log.note(f"cannot start {_command_line(spec)}: {error}")
            _log.error("supervisor: cannot start %s: %s", spec.name, error)
            if spec.restart:
                self._schedule_restart(child)
            else:
                self._set(child, ProcessStatus.FAILED)
            return
        assert popen.stdout is not None
        child.log.note(f"started pid {popen.pid}: {_command_line(spec)}")
        child.log.pump(popen.stdout, spec.name)
        threading.Thread(target=self._await_exit, args=(spec.name, popen),
                         name=f"wait-{spec.name}", daemon=True).start()
        child.popen = popen
        child.started_at = time.time()
        self._set(child, ProcessStatus.RUNNING)

    def _await_exit(self, name: str, popen: subprocess.Popen[bytes]) -> None:
        """Runs on the child's waiter thread: reap it, tell the supervisor thread."""
        self._post(_Exited(name, popen, popen.wait()))

    def _on_exit(self, event: _Exited) -> None:
        child = self._children.get(event.name)
        if child is None or child.popen is not event.popen:
            return
        pid = event.popen.pid
        signal_group(pid, signal.SIGKILL)  # what the child left behind in its group
        child.popen = None
        child.kill_at = None
        child.last_exit_code = event.code
        child.log.note(f"pid {pid} exited with {describe_exit(event.code)}")
        if child.stopping:
            child.stopping = False
            self._set(child, ProcessStatus.STOPPED)
        elif not child.spec.restart:
            self._set(child, ProcessStatus.STOPPED)
        else:
            self._schedule_restart(child)

    def _schedule_restart(self, child: _Child) -> None:
        pause = child.budget.next_restart()
        if pause is None:
            child.log.note(f"giving up: {self._policy.max_restarts} restarts within "
                           f"{self._policy.window:g} s")
            self._set(child, ProcessStatus.FAILED)
            return
        child.restart_at = time.monotonic() + pause
        child.log.note(f"restarting in {pause:.2f} s")
        self._set(child, ProcessStatus.RESTARTING)

    def _begin_stop(self, child: _Child) -> None:
        if child.restart_at is not None:
            child.restart_at = None
            self._set(child, ProcessStatus.STOPPED)
        if child.popen is None or child.stopping:
            return
        child.stopping = True
        child.kill_at = time.monotonic() + self._grace
        child.log.note(f"stopping pid {child.popen.pid}: SIGTERM")
        signal_group(child.popen.pid, signal.SIGTERM)


def _command_line(spec: ProcessSpec) -> str:
    """The argv as one line of the log, however many lines a ``-c`` script has."""
    return shlex.join(spec.argv).replace("\n", "\\n")


def _log_failure(done: Future[None]) -> None:
    error = done.exception()
    if error is not None:
        _log.error("supervisor: a command from a listener failed: %s", error)
