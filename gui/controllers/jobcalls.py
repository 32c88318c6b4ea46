"""Job commands that block, run off the GUI thread.

Submitting uploads an artifact and waits for the Dispatcher's answers; cancelling asks
the Dispatcher; a job's collected rows are read from files that can be large. Each of
these runs on one worker thread (in order: a cancel clicked during an upload waits for
it) and hands its outcome back to the GUI thread through the bridge's
``call_on_gui_thread``. A savepoint (or a stop) waits for a whole checkpoint, minutes at
worst, so it waits on a daemon thread of its own instead: a cancel or a submission is not
held behind it, and a window closed meanwhile does not wait for its answer. Nothing here
touches a widget from a worker.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal

from clusterdeck.core.client.jobclient import SAVEPOINT_TIMEOUT, collected_rows, local_chunks
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.rpc import AskTimeoutError, RemoteError
from clusterdeck.gui.bridge import ClusterBridge

log = logging.getLogger(__name__)
T = TypeVar("T")

ROWS_SHOWN = 100_000
"""The most collected rows the result view holds; the rest are counted, not shown."""


class JobWorker:
    """One worker thread; outcomes come back on the GUI thread."""

    def __init__(self, bridge: ClusterBridge) -> None:
        self.bridge = bridge
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="clusterdeck-gui-jobs")

    def run(self, work: Callable[[], T], done: Callable[[T], None],
            failed: Callable[[BaseException], None]) -> None:
        """``work()`` on the worker; then ``done(result)`` or ``failed(error)`` on the GUI
        thread."""
        self._executor.submit(self._task(work, done, failed))

    def run_apart(self, work: Callable[[], T], done: Callable[[T], None],
                  failed: Callable[[BaseException], None]) -> None:
        """As ``run``, on a daemon thread of its own: for work that waits on the cluster
        for minutes, which must neither hold the worker's queue nor keep the process
        alive once the window closed."""
        threading.Thread(target=self._task(work, done, failed), daemon=True,
                         name="clusterdeck-gui-waiting").start()

    def _task(self, work: Callable[[], T], done: Callable[[T], None],
              failed: Callable[[BaseException], None]) -> Callable[[], None]:
        def task() -> None:  # a worker's thread
            try:
                result = work()
            except Exception as error:
                log.debug("job command failed", exc_info=True)
                self._hand_back(functools.partial(failed, error))
                return
            self._hand_back(functools.partial(done, result))

        return task

    def _hand_back(self, outcome: Callable[[], None]) -> None:
        """A worker's thread: ``outcome`` to the GUI thread, unless the window is gone."""
        with contextlib.suppress(RuntimeError):  # the bridge was deleted with its window
            self.bridge.call_on_gui_thread(outcome)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class SavepointAsk:
    """A savepoint or a stop asked for from the window (``clusterdeck savepoint`` and
    ``stop [--savepoint]``): of which job, and whether the job stops there and the
    checkpoint is kept as a savepoint."""

    job_id: str
    name: str
    stop: bool = False
    keep: bool = True

    @property
    def job(self) -> str:
        return f"{self.name} ({self.job_id})" if self.name else f"job {self.job_id}"

    @property
    def doing(self) -> str:
        """``savepoint``, ``stop with savepoint`` or ``stop``."""
        if not self.stop:
            return "savepoint"
        return "stop with savepoint" if self.keep else "stop"

    def taken(self, done: p.SavepointCompleted) -> str:
        """The answer in one line, the savepoint's folder last (to copy it whole)."""
        if not self.stop:
            return f"savepoint at checkpoint {done.checkpoint_id}: {done.path}"
        stopped = (f"stopped at checkpoint {done.checkpoint_id}; the job finishes once its "
                   f"sinks committed")
        return f"{stopped}; savepoint: {done.path}" if done.path else stopped

    def failed(self, error: BaseException) -> str:
        """Why it was not taken: the Dispatcher's or the JobMaster's reason (the job goes
        on as before), or no answer within the client's timeout."""
        if isinstance(error, AskTimeoutError):
            return (f"{self.doing}: no answer within {SAVEPOINT_TIMEOUT:g} s; the job may "
                    f"still take it (see its checkpoints)")
        reason = error.remote_message if isinstance(error, RemoteError) else str(error)
        return f"{self.doing} failed: {reason}"


class JobCommands(QObject):
    """Cancel a job, take a savepoint of it or stop it, read a job's collected rows. GUI
    thread API; the work runs on the worker (a savepoint on a thread of its own)."""

    notice = Signal(str)
    """Something for the status bar."""
    rows_loaded = Signal(str, object, int)
    """``(job_id, rows, total)``: the first ``ROWS_SHOWN`` collected rows of a job."""
    savepoint_answered = Signal(str, str)
    """``(job_id, line)``: what came of a savepoint or stop asked for here, in one line
    (``SavepointAsk.taken`` or ``.failed``)."""
    waiting_changed = Signal()
    """A savepoint or stop was asked for or answered: ``waiting`` changed."""

    def __init__(self, bridge: ClusterBridge, worker: JobWorker,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.worker = worker
        self.waiting: dict[str, SavepointAsk] = {}
        """Job id -> the savepoint or stop of it not answered yet (one at a time per job,
        as the JobMaster takes them)."""

    def cancel(self, job_id: str) -> None:
        client = self.bridge.client
        if client is None:
            self.notice.emit("no cluster: nothing to cancel")
            return
        self.worker.run(lambda: client.cancel(job_id),
                        lambda summary: self.notice.emit(
                            f"cancel of {summary.name} ({job_id}) requested"),
                        lambda error: self.notice.emit(f"cancel of {job_id} failed: {error}"))

    def savepoint(self, ask: SavepointAsk) -> None:
        """Ask for ``ask`` with the client's default timeout; its progress and its answer
        (the savepoint's folder, or why not) go to the status bar through ``notice``."""
        client = self.bridge.client
        if client is None:
            self.notice.emit(f"no cluster: no {ask.doing}")
            return
        if ask.job_id in self.waiting:
            self.notice.emit(f"a {self.waiting[ask.job_id].doing} of {ask.job} is in "
                             f"progress already")
            return
        self.waiting[ask.job_id] = ask
        self.waiting_changed.emit()
        self.notice.emit(f"{ask.doing} of {ask.job} in progress\u2026")

        def answered(line: str) -> None:
            if self.waiting.get(ask.job_id) is not ask:
                return  # its cluster left the window meanwhile
            del self.waiting[ask.job_id]
            self.waiting_changed.emit()
            self.savepoint_answered.emit(ask.job_id, line)
            self.notice.emit(f"{ask.job}: {line}")

        self.worker.run_apart(lambda: client.savepoint(ask.job_id, ask.stop, ask.keep),
                              lambda done: answered(ask.taken(done)),
                              lambda error: answered(ask.failed(error)))

    def forget_waiting(self) -> None:
        """The window left the cluster (stopped, detached): its savepoints in progress are
        no longer shown, and an answer that still comes is dropped (a closed client
        leaves its asks unanswered: their daemon threads wait on, harmlessly)."""
        if self.waiting:
            self.waiting.clear()
            self.waiting_changed.emit()

    def load_rows(self, result: p.JobResult) -> None:
        """Read ``result``'s collected rows (files under the cluster's work dir, read
        through the JobManager when it is on another machine)."""
        if not result.collected_paths:
            self.rows_loaded.emit(result.job_id, [], 0)
            return
        client = self.bridge.client
        files = client.reader(result.job_id) if client is not None else local_chunks

        def read() -> tuple[list[Any], int]:
            rows = collected_rows(result, files)
            return rows[:ROWS_SHOWN], len(rows)

        self.worker.run(read, lambda found: self.rows_loaded.emit(result.job_id, *found),
                        lambda error: self.notice.emit(_unreadable(result.job_id, error)))


def _unreadable(job_id: str, error: BaseException) -> str:
    if isinstance(error, FileNotFoundError):
        return (f"the collected rows of {job_id} are gone: they were files in its cluster's "
                f"work dir, which no longer has them (a recording does not carry them)")
    return f"cannot read the rows of {job_id}: {error}"
