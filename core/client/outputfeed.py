"""Showing what a job's PySpark script prints while it runs, as spark-submit does.

The JobMaster passes on what a running script printed (``JobOutput`` on
``events/output/<job-id>``, core/engine/liveoutput.py). The feed is best effort: QoS 1
may repeat a piece, and a piece may be missing (the client subscribed late, the script
printed faster than the feed is sent). Every piece carries its byte offset in the output
file that will hold all of it, so each byte is shown once and in order: a repeat is
dropped, and after a gap that file's feed stops; when the job has ended, the rest is
read from the file from where the feed stopped (``shown``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from clusterdeck.core.protocol import messages as p


class OutputFeed:
    """Receives on the MQTT thread and writes through ``write(stream, text)``."""

    def __init__(self, write: Callable[[str, str], None]) -> None:
        self._write = write
        self._lock = threading.Lock()
        self._shown: dict[str, int] = {}  # output file -> bytes of it written so far
        self._behind: set[str] = set()
        self._open = True

    def receive(self, _topic: str, message: Any) -> None:
        if not isinstance(message, p.JobOutput):
            return
        data = message.text.encode("utf-8")
        with self._lock:
            at = self._shown.get(message.path, 0)
            if not self._open or message.path in self._behind or \
                    message.offset + len(data) <= at:
                return
            if message.offset > at:
                self._behind.add(message.path)  # a piece went missing: the file has it
                return
            self._shown[message.path] = message.offset + len(data)
            self._write(message.stream, data[at - message.offset:].decode("utf-8", "replace"))

    def close(self) -> dict[str, int]:
        """Stop showing (late pieces are dropped); per output file, the bytes shown."""
        with self._lock:
            self._open = False
            return dict(self._shown)
