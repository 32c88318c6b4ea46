"""Opening the State view (gui/views/stateview.py) of a streaming job: from the job's
context menu (its latest checkpoint) or the Checkpoints view (the checkpoint or savepoint
selected there).

Where the state is read: the shown cluster's checkpoint folder on this machine (its
configuration says where: the cluster's folder or ``ha.storage-dir``); of an opened
recording, its cluster's folder if this machine still has it, else what the recording
holds. The reading (``clusterdeck state`` in a child process, gui/models/statereading.py)
is waited for on a worker thread of its own (a vertex's keys are a pass over its state:
job commands must not wait behind it) and each answer comes back to the GUI thread
through the bridge. GUI thread, but for the reading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject

from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.controllers.jobcalls import JobWorker
from clusterdeck.gui.models.statereading import StatePlace, open_state
from clusterdeck.gui.session import ClusterSession, attach_config
from clusterdeck.gui.views.stateview import StateWindow

KEPT_WINDOWS = 8  # the windows opened last stay referenced; older ones close
NOTHING_SHOWN = "no cluster or recording is shown: there is no job state to read"


class StateInspection(QObject):
    """Opens State windows; ``notice`` tells the user why one was not opened."""

    def __init__(self, bridge: ClusterBridge, session: ClusterSession,
                 recording: Callable[[], Path | None], notice: Callable[[str], None],
                 parent: QObject | None = None) -> None:
        """``recording()``: the recording shown instead of a cluster, if any."""
        super().__init__(parent)
        self.session = session
        self.recording = recording
        self.notice = notice
        self.reader = JobWorker(bridge)
        self.windows: list[StateWindow] = []

    def open(self, job_id: str, graph: JobGraphSnapshot | None, which: str = "",
             savepoints: Sequence[str] = ()) -> StateWindow | None:
        """A State window of ``job_id`` showing ``which`` (a checkpoint id, a savepoint's
        folder; empty: the latest checkpoint); ``graph`` names its vertices."""
        recording = None if self.session.state.active else self.recording()
        config = self.session.config if self.session.state.active else None
        if config is None and recording is None:
            self.notice(NOTHING_SHOWN)
            return None
        place = StatePlace(job_id, config, recording)
        title = f"{graph.name} ({job_id})" if graph is not None and graph.name else job_id
        names = {vertex.id: vertex.name for vertex in graph.vertices} if graph else {}
        window = StateWindow(title, names, self.reader.run,
                             lambda: open_state(place, attach_config), savepoints, which)
        self.windows = [*self.windows[-(KEPT_WINDOWS - 1):], window]
        window.show()
        window.raise_()
        return window

    def shutdown(self) -> None:
        self.reader.shutdown()
