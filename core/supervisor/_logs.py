"""A supervised process's log file: its stdout and stderr, written raw, rotated by size.

Each incarnation of a process gets one pipe (stderr merged into stdout) and one pump
thread that reads it for as long as it stays open, so a chatty child never blocks on a
full pipe. The pump writes complete lines through a RotatingFileHandler with no
formatting of its own, so the child's log format stays as it is; a file rotates only
between lines. The supervisor adds a few lines of its own (start, exit, restart), marked
with ``[supervisor]``, so a reader of the log sees what happened to the process.
"""

from __future__ import annotations

import codecs
import logging
import threading
import time
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import BinaryIO

_CHUNK = 64 * 1024
_MARK = "[supervisor]"


class ProcessLog:
    """The log file of one supervised process, shared by all its incarnations.

    Thread-safe: pump threads and the supervisor thread write concurrently; one lock
    keeps each batch of lines whole and orders writes against ``close()``. The file is
    opened on the first write and again on the first write after ``close()``.
    """

    def __init__(self, path: Path, max_bytes: int, backup_count: int) -> None:
        self.path = path
        self._max_bytes = max_bytes
        self._backup_count = backup_count
        self._lock = threading.Lock()
        self._handler: RotatingFileHandler | None = None
        self._pumps: list[threading.Thread] = []

    def pump(self, pipe: BinaryIO, name: str) -> threading.Thread:
        """Start a daemon thread copying ``pipe`` into the log until its end; it closes
        ``pipe``."""
        thread = threading.Thread(target=self._drain, args=(pipe,), name=f"log-{name}",
                                  daemon=True)
        with self._lock:
            self._pumps = [pump for pump in self._pumps if pump.is_alive()]
            self._pumps.append(thread)
        thread.start()
        return thread

    def note(self, message: str) -> None:
        """Add one line of the supervisor's own, e.g. why the process went down."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self._write(f"{stamp} {_MARK} {message}\n")

    def close(self, timeout: float) -> None:
        """Let the pumps finish what is left in their pipes (up to ``timeout``), then
        close the file. Called after the processes are down, on the caller's thread."""
        deadline = time.monotonic() + timeout
        with self._lock:
            pumps = list(self._pumps)
        for pump in pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            if self._handler is not None:
                self._handler.close()
                self._handler = None

    def _drain(self, pipe: BinaryIO) -> None:
        """Runs on the pump thread: read whatever is there, write the complete lines."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        with pipe:
            while chunk := pipe.read1(_CHUNK):
                pending += decoder.decode(chunk)
                cut = pending.rfind("\n") + 1
                if cut == 0 and len(pending) >= _CHUNK:
                    cut = len(pending)  # one very long line: write it in pieces
                if cut:
                    self._write_lines(pending[:cut])
                    pending = pending[cut:]
        pending += decoder.decode(b"", final=True)
        if pending:
            self._write_lines(pending + "\n")

    def _write_lines(self, text: str) -> None:
        """Write ``text`` in batches no longer than a log file, cut between lines, so
        rotation never splits a line (unless one line alone is longer than a file)."""
        limit = min(_CHUNK, self._max_bytes)
        start = 0
        while start < len(text):
            end = len(text)
            if end - start > limit:
                end = text.rfind("\n", start, start + limit) + 1
                if end <= start:
                    end = text.find("\n", start + limit) + 1 or len(text)
            self._write(text[start:end])
            start = end

    def _write(self, text: str) -> None:
        with self._lock:
            if self._handler is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                handler = RotatingFileHandler(self.path, maxBytes=self._max_bytes,
                                              backupCount=self._backup_count,
                                              encoding="utf-8")
                handler.terminator = ""
                handler.setFormatter(logging.Formatter("%(message)s"))
                self._handler = handler
            self._handler.handle(logging.makeLogRecord({"msg": text}))
