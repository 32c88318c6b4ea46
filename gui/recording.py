"""A recording opened in the window: its messages go to the bridge as a live cluster's
would, so every view shows it as it showed the cluster (docs/recorder.md).

A worker thread reads and decodes the file (never the GUI thread) and posts in chunks,
letting the bridge emit each chunk before the next, because the bridge keeps a bounded
backlog of control-plane messages between two ticks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from clusterdeck.core.recorder.replay import RecordedEvent, replay, samples
from clusterdeck.core.recorder.store import FILE_NAME
from clusterdeck.core.rpc.mqtt import Traffic
from clusterdeck.gui.bridge import ClusterBridge

SUFFIX = ".cdrec"  # what `clusterdeck record export` is told to write, by convention
CHUNK = 5000  # messages posted between two flushes: well under the bridge's backlog
FLUSH_WAIT = 30.0  # seconds a chunk may wait for the GUI thread


def is_recording(path: str | Path) -> bool:
    """A file the window opens as a recording rather than submits as a job."""
    path = Path(path)
    return path.suffix == SUFFIX or path.name == FILE_NAME


def open_in_bridge(bridge: ClusterBridge, path: Path,
                   done: Callable[[int, str], None]) -> threading.Thread:
    """Post ``path``'s recording to ``bridge`` on a worker thread; ``done(messages,
    error)`` then runs on the GUI thread (``error`` empty when it all went in)."""
    def work() -> None:
        count, error = 0, ""
        try:
            for item in replay(path):
                post(bridge, item)
                count += 1
                if count % CHUNK == 0:
                    _flush_and_wait(bridge)
            for batch in samples(path):
                bridge.post_samples(batch)
                _flush_and_wait(bridge)
            _flush_and_wait(bridge)  # the views have it all before ``done`` runs
        except Exception as failure:  # shown in the window, not lost in a thread
            error = f"{type(failure).__name__}: {failure}"
        bridge.call_on_gui_thread(lambda: done(count, error))
    thread = threading.Thread(target=work, name="open-recording", daemon=True)
    thread.start()
    return thread


def post(bridge: ClusterBridge, item: RecordedEvent | Traffic) -> None:
    """One recorded message, where the bridge's live subscriptions would put it."""
    if isinstance(item, Traffic):
        bridge.post_traffic(item)
        return
    bridge.route(item.topic, item.message)


def _flush_and_wait(bridge: ClusterBridge) -> None:
    flushed = threading.Event()

    def flush() -> None:
        bridge.flush()
        flushed.set()
    bridge.call_on_gui_thread(flush)
    flushed.wait(FLUSH_WAIT)
