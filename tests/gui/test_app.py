"""The app's process-level behaviour (gui/app.py): Ctrl-C and SIGTERM quit it."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

from PySide6.QtCore import QTimer

from clusterdeck.gui import app as gui_app


def test_a_sigterm_before_the_event_loop_runs_stops_the_cluster_and_still_quits(qapp) -> None:
    """The signal's handler runs at once, before ``exec()``: a quit called then is one Qt
    ignores, so the quit must wait for the loop (the bundle's smoke test hung here)."""
    stopped: list[bool] = []
    window = SimpleNamespace(session=SimpleNamespace(shutdown=lambda: stopped.append(True)))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    timers_before = set(qapp.findChildren(QTimer))
    deadline = QTimer()
    deadline.setSingleShot(True)
    deadline.timeout.connect(lambda: qapp.exit(1))
    try:
        gui_app._quit_on_signals(qapp, window)
        os.kill(os.getpid(), signal.SIGTERM)  # handled before the next line runs
        assert stopped == [True]
        deadline.start(10_000)
        assert qapp.exec() == 0, "the loop ran until the deadline: the quit was lost"
    finally:
        deadline.stop()
        for timer in set(qapp.findChildren(QTimer)) - timers_before:  # the handlers' waker
            timer.stop()
            timer.deleteLater()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
