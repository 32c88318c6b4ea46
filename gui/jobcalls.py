"""Job commands that block, run off the GUI thread.

Submitting uploads an artifact and waits for the Dispatcher's answers; cancelling asks
the Dispatcher; a job's collected rows are read from files that can be large. Each of
these runs on one worker thread (in order: a cancel clicked during an upload waits for
it) and hands its outcome back to the GUI thread through the bridge's
``call_on_gui_thread``. Nothing here touches a widget from the worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal

from clusterdeck.core.client.jobclient import collected_rows, local_chunks
from clusterdeck.core.protocol import messages as p
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
        def task() -> None:  # the worker's thread
            try:
                result = work()
            except Exception as error:
                log.debug("job command failed", exc_info=True)
                self.bridge.call_on_gui_thread(lambda error=error: failed(error))
                return
            self.bridge.call_on_gui_thread(lambda: done(result))

        self._executor.submit(task)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class JobCommands(QObject):
    """Cancel a job, read a job's collected rows. GUI thread API; the work runs on the
    worker."""

    notice = Signal(str)
    """Something for the status bar."""
    rows_loaded = Signal(str, object, int)
    """``(job_id, rows, total)``: the first ``ROWS_SHOWN`` collected rows of a job."""

    def __init__(self, bridge: ClusterBridge, worker: JobWorker,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.worker = worker

    def cancel(self, job_id: str) -> None:
        client = self.bridge.client
        if client is None:
            self.notice.emit("no cluster: nothing to cancel")
            return
        self.worker.run(lambda: client.cancel(job_id),
                        lambda summary: self.notice.emit(
                            f"cancel of {summary.name} ({job_id}) requested"),
                        lambda error: self.notice.emit(f"cancel of {job_id} failed: {error}"))

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
