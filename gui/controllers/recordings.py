"""A flight recording (docs/recorder.md) shown instead of a cluster: File > Open
Recording, a recording dropped on the window, and File > Recent Recordings, whose list is
kept in the GUI's settings. GUI thread only (QSettings, the window)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog

from clusterdeck.core.recorder.store import FILE_NAME
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.recording import SUFFIX, open_in_bridge
from clusterdeck.gui.session import ClusterSession
from clusterdeck.gui.views.mainwindow import MainWindowView, window_settings

RECENT_KEY = "recordings/recent"
RECENT_KEPT = 8


def recent_recordings() -> list[Path]:
    """The recordings opened last, newest first, that still exist."""
    value = window_settings().value(RECENT_KEY, [])
    paths_seen = [value] if isinstance(value, str) else list(value or [])
    return [Path(p) for p in paths_seen if isinstance(p, str) and Path(p).is_file()]


def remember_recording(path: Path) -> None:
    kept = [str(path.resolve())] + [str(p) for p in recent_recordings()
                                    if p != path.resolve()]
    window_settings().setValue(RECENT_KEY, kept[:RECENT_KEPT])


class RecordingOpener(QObject):
    """Opens recordings in the window while no cluster is shown; ``notice`` tells the user
    why one was not opened."""

    def __init__(self, window: MainWindowView, bridge: ClusterBridge, session: ClusterSession,
                 notice: Callable[[str], None]) -> None:
        super().__init__(window)
        self.window = window
        self.bridge = bridge
        self.session = session
        self.notice = notice
        self.recording: Path | None = None
        """The recording shown instead of a cluster, if any."""

    def open(self, path: Path) -> None:
        """Show ``path`` offline, every view fed from the file. Refused while a cluster is
        shown."""
        if self.session.state.active:
            self.notice(f"{path.name} not opened: stop or detach the cluster first")
            return
        self.bridge.reset()
        self.recording = path
        remember_recording(path)
        self.window.setWindowTitle(f"clusterdeck \u2014 recording {path.name} (offline)")
        self.window.session_label.setText(f"recording {path.name}: offline, no cluster")
        self.window.statusBar().showMessage(f"Opening the recording {path.name}...")
        open_in_bridge(self.bridge, path, functools.partial(self._opened, path))
        self.window.logs.show_recording(path, live=False)

    def choose(self) -> None:
        """File > Open Recording...: pick a recording file."""
        path, _ = QFileDialog.getOpenFileName(
            self.window, "Open a recording", str(Path.cwd()),
            f"Recordings (*{SUFFIX} {FILE_NAME});;All files (*)")
        if path:
            self.open(Path(path))

    def forget(self) -> None:
        """A cluster is shown now, not the recording."""
        self.recording = None

    def fill_recent_menu(self) -> None:
        """File > Recent Recordings, as it opens."""
        menu = self.window.recent_menu
        menu.clear()
        recent = recent_recordings()
        for path in recent:
            action = menu.addAction(str(path))
            action.setEnabled(not self.session.state.active)
            action.triggered.connect(functools.partial(self._open_recent, path))
        if not recent:
            menu.addAction("(none yet)").setEnabled(False)

    def _open_recent(self, path: Path, _checked: bool = False) -> None:
        self.open(path)

    def _opened(self, path: Path, count: int, error: str) -> None:
        if error:
            self.notice(f"{path.name} could not be read: {error}")
            return
        self.window.statusBar().showMessage(f"Recording {path.name}: {count:,} messages. "
                                            "This is what was recorded, not a running "
                                            "cluster.")
