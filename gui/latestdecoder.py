"""Large payloads decoded off paho's network thread, only the newest of each topic.

A 1,000-subtask job's snapshot is a megabyte of JSON: 40 ms to decode on a quiet core and
a few hundred under load. Decoded on paho's thread it held up every message behind it,
and the window's event-to-paint time was set by it. The bridge hands such a payload here
as it travelled; one daemon thread decodes the newest payload of each topic (a newer one
arriving meanwhile replaces the older, which is never decoded: only the latest snapshot
of a job is ever drawn) and hands the message to the ``deliver`` given with it.

No Qt here: ``deliver`` runs on the decoder's thread, and the bridge's own ``post``
takes it to the GUI thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from clusterdeck.core.rpc import RpcError

log = logging.getLogger(__name__)

Decode = Callable[[bytes], Any]
Deliver = Callable[[Any], None]


class LatestDecoder:
    """Decodes the newest pending payload per topic on one thread of its own.

    ``put`` and ``clear`` may be called from any thread. Pending work is one payload per
    topic (a job's retained snapshot topic: as many as the jobs the cluster keeps).
    """

    def __init__(self, name: str = "clusterdeck-gui-decoder") -> None:
        self._name = name
        self._wake = threading.Condition()
        self._pending: dict[str, tuple[bytes, Decode, Deliver]] = {}
        self._closed = False
        self._thread: threading.Thread | None = None

    def put(self, topic: str, data: bytes, decode: Decode, deliver: Deliver) -> None:
        """Decode ``data`` with ``decode`` and call ``deliver`` with the message, unless a
        newer payload of ``topic`` arrives first."""
        with self._wake:
            if self._closed:
                return
            self._pending[topic] = (data, decode, deliver)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._wake.notify()

    def clear(self) -> None:
        """Forget every payload not yet decoded."""
        with self._wake:
            self._pending.clear()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread after the payload it decodes now; the rest is dropped."""
        with self._wake:
            self._closed = True
            self._pending.clear()
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        """The decoder thread: oldest topic first, each one's newest payload."""
        while True:
            with self._wake:
                while not self._pending and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                topic = next(iter(self._pending))
                data, decode, deliver = self._pending.pop(topic)
            self._decode(topic, data, decode, deliver)

    def _decode(self, topic: str, data: bytes, decode: Decode, deliver: Deliver) -> None:
        try:
            message = decode(data)
        except RpcError as error:  # as paho's thread would have: logged, the next one comes
            log.warning("dropped a message on %s: %s", topic, error)
            return
        except Exception:
            log.exception("a message on %s could not be decoded; dropped", topic)
            return
        try:
            deliver(message)
        except Exception:
            log.exception("a message on %s could not be delivered; dropped", topic)
