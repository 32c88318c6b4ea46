"""Looking inside a process from the process table: its threads, a flame graph, its Spark
UI; and the flame graph of the workers running one vertex's subtasks, from the graph
(docs/profiling.md).

py-spy runs on a thread of its own here (a flame graph samples for seconds; job commands
must not wait behind it) and each outcome, the failures included, opens in a window of
its own: a look that could not be taken says why there, never only in a log.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, QUrl, Signal
from PySide6.QtGui import QDesktopServices

from clusterdeck.core.profiling.pyspy import flame_graph, thread_dump, with_workers
from clusterdeck.core.profiling.vertexprofile import (
    on_this_machine,
    vertex_flame_graph,
    vertex_workers,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.models.processmodel import ProcessRow
from clusterdeck.gui.views.flamegraph import ProfileWindow

log = logging.getLogger(__name__)
FLAME_SECONDS = 5.0
KEPT_WINDOWS = 8  # the windows opened last stay referenced; older ones close


class ProcessInspector(QObject):
    notice = Signal(str)
    opened = Signal(object)  # the ProfileWindow just filled in

    def __init__(self, bridge: ClusterBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.windows: list[ProfileWindow] = []
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="clusterdeck-gui-profile")

    def thread_dump(self, row: ProcessRow) -> None:
        pid = self._local_pid(row)
        workers = with_workers(row.name, row.role)
        if pid is not None:
            self._look(f"Threads of {row.name} (pid {pid})",
                       lambda: thread_dump(pid, subprocesses=workers),
                       lambda window, threads: window.show_threads(threads))

    def flame_graph(self, row: ProcessRow, seconds: float = FLAME_SECONDS) -> None:
        pid = self._local_pid(row)
        workers = with_workers(row.name, row.role)
        if pid is not None:
            self.notice.emit(f"sampling {row.name} for {seconds:g} s\u2026")
            self._look(f"Flame graph of {row.name} (pid {pid})",
                       lambda: flame_graph(pid, seconds, subprocesses=workers),
                       lambda window, graph: window.show_flame_graph(graph))

    def vertex_flame_graph(self, snapshot: JobGraphSnapshot, vertex_id: str,
                           attempts: list[tuple[str, p.AttemptMetrics]], live: bool = True,
                           seconds: float = FLAME_SECONDS) -> None:
        """The flame graph of the workers running the vertex's subtasks now, named by
        their attempts' last live numbers (``attempts``: TaskManager id and numbers)."""
        vertex = next((v for v in snapshot.vertices if v.id == vertex_id), None)
        name = vertex.name if vertex is not None else vertex_id
        if not live:
            self.notice.emit(f"{name}: a recording's workers are gone; a vertex's flame "
                             "graph is taken of a running job")
            return
        workers = vertex_workers(attempts, snapshot.job_id, vertex_id)
        local, away = on_this_machine(workers, snapshot.hosts, socket.gethostname())
        if not local:
            self.notice.emit(f"{name}: " + ("; ".join(away) if away else
                                            "no subtask of it is running now"))
            return
        self.notice.emit(f"sampling {len(local)} workers of {name} for {seconds:g} s\u2026")
        self._look(f"Flame graph of {name}'s workers ({snapshot.job_id})",
                   lambda: vertex_flame_graph(name, local, seconds),
                   lambda window, graph: window.show_vertex_flame_graph(graph),
                   away)

    def open_spark_ui(self, name: str, url: str) -> None:
        if not url:
            self.notice.emit(f"{name} has no Spark UI (spark.ui.enabled is false, or its "
                             "Spark has not started)")
        elif QUrl(url).scheme() not in ("http", "https"):  # a message is data: no file:, no
            self.notice.emit(f"{name} gave {url[:80]!r} as its Spark UI: not a web address")
        elif not QDesktopServices.openUrl(QUrl(url)):
            self.notice.emit(f"no browser could open {url}; open it by hand")
        else:
            self.notice.emit(f"opened {name}'s Spark UI at {url}")

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _local_pid(self, row: ProcessRow) -> int | None:
        if row.pid is None:
            self.notice.emit(f"{row.name} has no process running now")
            return None
        if row.host not in ("", socket.gethostname()):
            self.notice.emit(f"{row.name} runs on {row.host}: py-spy sees only processes of "
                             "this machine (run clusterdeck profile there)")
            return None
        return row.pid

    def _look(self, title: str, work: Callable[[], Any],
              show: Callable[[ProfileWindow, Any], None], away: list[str] | None = None
              ) -> None:
        def done(outcome: Any, error: BaseException | None) -> None:  # GUI thread
            window = ProfileWindow(title)
            if error is None:
                show(window, outcome)
                for note in away or ():
                    self.notice.emit(note)
            else:
                window.show_error(f"{type(error).__name__}: {error}" if not str(error)
                                  else str(error))
                self.notice.emit(f"{title}: {error}")
            self.windows = [*self.windows[-(KEPT_WINDOWS - 1):], window]
            window.show()
            self.opened.emit(window)

        def task() -> None:  # the inspector's thread
            try:
                outcome, error = work(), None
            except Exception as failure:
                log.debug("%s failed", title, exc_info=True)
                outcome, error = None, failure
            self.bridge.call_on_gui_thread(lambda: done(outcome, error))
        self._executor.submit(task)

