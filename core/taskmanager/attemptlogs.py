"""Each attempt's log lines kept apart: a logging handler that routes records by thread.

A task runs on its own slot thread named after its attempt, so every record logged on
that thread belongs to that attempt. The lines go to the attempt's own file and to a
small ring buffer, whose tail becomes the log excerpt of a failure record.
"""

from __future__ import annotations

import collections
import logging
import threading
from pathlib import Path

THREAD_PREFIX = "task:"
EXCERPT_LINES = 40


def thread_name(attempt_id: str) -> str:
    return f"{THREAD_PREFIX}{attempt_id}"


def safe_name(attempt_id: str) -> str:
    return attempt_id.replace("/", "_").replace("#", "-")


class AttemptLogHandler(logging.Handler):
    """Installed once per TaskManager process on the root logger."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self._tails: dict[str, collections.deque[str]] = {}
        self._guard = threading.Lock()  # records arrive on every slot thread at once

    def emit(self, record: logging.LogRecord) -> None:
        if not record.threadName or not record.threadName.startswith(THREAD_PREFIX):
            return
        self.write(record.threadName[len(THREAD_PREFIX):], self.format(record))

    def write(self, attempt_id: str, line: str) -> None:
        with self._guard:
            tail = self._tails.setdefault(attempt_id, collections.deque(maxlen=EXCERPT_LINES))
            tail.append(line)
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / f"{safe_name(attempt_id)}.log", "a", encoding="utf-8") as f:
                f.write(line + "\n")

    def excerpt(self, attempt_id: str) -> tuple[str, ...]:
        with self._guard:
            return tuple(self._tails.get(attempt_id, ()))

    def forget(self, attempt_id: str) -> None:
        with self._guard:
            self._tails.pop(attempt_id, None)
