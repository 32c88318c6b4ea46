"""Python's garbage collection, on the Qt main thread only.

The cyclic collector runs on whichever thread allocates past its threshold. In the
desktop app that is often paho's network thread, decoding a message; when the garbage
holds Qt objects, PySide6 destroys them on that thread, and the destructor waits for the
interpreter lock for good: the app freezes (seen in the test suite, where a GUI test's
leftover widgets were collected on an MQTT client's thread decoding a deeply nested
payload). So the app turns automatic collection off and a timer on the main thread
collects instead, by the same thresholds (the PyQt/PySide practice).
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

CHECK_INTERVAL_MS = 500


class MainThreadCollector(QObject):
    """Create once, on the main thread, after the QApplication."""

    def __init__(self, parent: QObject | None = None,
                 interval_ms: int = CHECK_INTERVAL_MS) -> None:
        super().__init__(parent)
        self._thresholds = gc.get_threshold()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect_due)
        self._timer.start(interval_ms)

    def collect_due(self) -> int:
        """Collect the oldest generation whose count passed its threshold; returns the
        generation collected, or -1."""
        counts = gc.get_count()
        for generation in (2, 1, 0):
            if counts[generation] > self._thresholds[generation]:
                gc.collect(generation)
                return generation
        return -1

    def stop(self) -> None:
        """Hand collection back to the interpreter (tests, and the app's shutdown)."""
        self._timer.stop()
        gc.enable()
