"""The recordings opened last, kept in the GUI's settings for File > Recent Recordings.
GUI thread only (QSettings)."""

from __future__ import annotations

from pathlib import Path

from clusterdeck.gui.views.mainwindow import window_settings

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
