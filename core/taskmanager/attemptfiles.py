"""Attempt logs on disk: one attempt's file, the journal of quick quiet attempts, and the
thread that writes them (``core/taskmanager/attemptlogs.py`` routes the lines).

Everything here runs on the ``attempt-logs`` thread, but for a long attempt's file,
which ``AttemptLogHandler.flush_held`` and its slot thread write under the handler's
lock once its lines are due. Files are written through descriptors: open() in append
mode costs two calls more (a stat and a seek), and a short attempt's log is one write.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable

END = ".end"  # after an attempt's ``.log``: the file of its latest lines once it is long
JOURNAL = ".journal"  # after a TaskManager's resource id: its quiet attempts' lines
HOLD_LINES = 100   # lines held at most before they are written
DISK_BACKLOG = 2048
"""Attempts that ended and wait for the disk thread at most (each holds at most
``HOLD_LINES`` lines): past that the disk is far behind, and what ends is not kept."""
JOURNAL_BATCH = 4096  # lines gathered for the journal at most before they are written


class Journal:
    """The routine lines of attempts that finished quietly, a TaskManager's, in one file:
    gathered by the disk thread and written once it has nothing else to do."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._pending: list[str] = []
        self._size: int | None = None  # unknown until the first write

    def add(self, lines: list[str]) -> None:
        """Gathered until the disk thread is idle, or a batch is full (it may never be
        idle under a stream of short attempts)."""
        self._pending.extend(lines)
        if len(self._pending) >= JOURNAL_BATCH:
            self.write_pending()

    def write_pending(self) -> None:
        if not self._pending:
            return
        data = "".join(self._pending).encode("utf-8", errors="replace")
        self._pending = []
        if self._size is None:
            self._size = _size(self.path)
        if self._size and self._size + len(data) > self.max_bytes:
            os.replace(self.path, self.path + ".1")
            self._size = 0
        out = _open_append(self.path)
        try:
            _write_all(out, data)
        finally:
            os.close(out)
        self._size += len(data)


class AttemptFile:
    """One attempt's log on disk: its head, then its end in two files that take turns.

    Lines are held in memory first: most attempts are done within ``HOLD`` and their
    lines go to disk in one write as they end; an attempt that runs longer has its lines
    flushed by ``flush_held`` and written at once from then on, to a file kept open
    while it runs. Opening the file for each line, and a write per line, were a fifth of
    a short task's time on its TaskManager."""

    def __init__(self, folder: str, name: str, max_bytes: int, new: bool = False) -> None:
        self.head = os.path.join(folder, f"{name}.log")
        self.end = self.head + END
        self.new = new
        self.head_budget = max_bytes // 2
        self.end_budget = max(1, max_bytes // 4)  # per end file; two of them
        self.head_bytes = 0 if new else _size(self.head)
        self.end_bytes = 0 if new else _size(self.end)
        self.cut = not new and os.path.exists(self.end)
        self._out: int | None = None  # descriptor, on self.end once cut, else on self.head
        self._held: list[str] = []
        self._held_since = 0.0    # monotonic time of the oldest held line
        self._through = False     # past HOLD: lines go to disk as they come

    def write(self, text: str) -> None:
        if self._through:
            self._write_now(text)
            return
        if not self._held:
            self._held_since = time.monotonic()
        self._held.append(text)
        if len(self._held) >= HOLD_LINES:
            self.flush()

    def new_file(self) -> bool:
        """A file that did not exist before this attempt: made, or to be made on close."""
        return self.new and bool(self._held or self.head_bytes or self.cut)

    def only_held(self) -> bool:
        """Nothing of this attempt is on disk yet: its lines may go elsewhere whole."""
        return self._out is None and self.head_bytes == 0 and not self.cut \
            and not self._through

    def take_held(self) -> list[str]:
        held, self._held = self._held, []
        return held

    def flush(self, older_than: float | None = None) -> None:
        """Write the held lines; with ``older_than``, only if held that long, and then
        every later line at once."""
        if not self._held or (older_than is not None
                              and time.monotonic() - self._held_since < older_than):
            return
        held, self._held = self._held, []
        self._through = self._through or older_than is not None
        whole = "".join(held).encode("utf-8", errors="replace")
        if not self.cut and self.head_bytes + len(whole) <= self.head_budget:
            self.head_bytes += self._append(self.head, whole)  # the usual case: one write
            return
        for text in held:
            self._write_now(text)

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._close_out()

    def discard(self) -> None:
        """Give up the held lines (the disk is too far behind for them); the file, when
        one is open, is closed as it is."""
        self._held = []
        self._close_out()

    def _write_now(self, text: str) -> None:
        data = text.encode("utf-8", errors="replace")
        if not self.cut and self.head_bytes + len(data) <= self.head_budget:
            self.head_bytes += self._append(self.head, data)
            return
        if not self.cut:
            end_name = os.path.basename(self.end)
            self._append(self.head, (f"[... the log goes on past taskmanager.attempt-log."
                                     f"max-size / 2: its latest lines are in {end_name} "
                                     f"and {end_name}.1]\n").encode())
            self._close_out()
            self.cut = True
        if self.end_bytes and self.end_bytes + len(data) > self.end_budget:
            self._close_out()
            os.replace(self.end, self.end + ".1")
            self.end_bytes = 0
        if len(data) > self.end_budget:  # one line longer than the whole end: its end
            data = b"[...]" + data[-max(1, self.end_budget - 5):]
        self.end_bytes += self._append(self.end, data)

    def _close_out(self) -> None:
        if self._out is not None:
            out, self._out = self._out, None
            os.close(out)

    def _append(self, path: str, data: bytes) -> int:
        """A descriptor and not a file object: open() in append mode costs two calls more
        (a stat and a seek), and a short attempt's log is all one write."""
        if self._out is None:
            self._out = _open_append(path)
        _write_all(self._out, data)
        return len(data)


def _open_append(path: str) -> int:
    try:
        return os.open(path, _APPEND, 0o666)
    except FileNotFoundError:  # the first log of this folder, or it was removed
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, _APPEND, 0o666)


def _write_all(out: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class DiskThread:
    """One thread that does the disk work of attempts that ended, in the order it was
    asked for; started with the first piece of work."""

    def __init__(self, idle: Callable[[], None]) -> None:
        self._idle = idle  # run whenever no more work is waiting
        self._work: queue.Queue[Callable[[], None] | None] = queue.Queue(DISK_BACKLOG)
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def put(self, work: Callable[[], None]) -> bool:
        """Queue ``work``; False, and nothing queued, when ``DISK_BACKLOG`` pieces wait
        already. Never blocks: it is called on slot threads, under the handler's lock."""
        self._start()
        try:
            self._work.put_nowait(work)
        except queue.Full:
            return False
        return True

    def _start(self) -> None:
        with self._starting:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="attempt-logs",
                                                daemon=True)
                self._thread.start()

    def drain(self, timeout: float) -> bool:
        done = threading.Event()

        def barrier() -> None:
            try:
                self._idle()  # what was gathered for later goes too
            finally:
                done.set()

        self._start()
        try:  # behind the work queued so far: waits for room when the queue is full
            self._work.put(barrier, timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def stop(self, timeout: float) -> None:
        with self._starting:
            thread, self._thread = self._thread, None
        if thread is not None:
            try:
                self._work.put(None, timeout=timeout)
            except queue.Full:
                return  # a daemon thread: it ends with the process
            thread.join(timeout)

    def _run(self) -> None:
        while (work := self._work.get()) is not None:
            self._safely(work)
            if self._work.empty():
                self._safely(self._idle)
        self._safely(self._idle)

    @staticmethod
    def _safely(work: Callable[[], None]) -> None:
        try:
            work()
        except Exception:  # a fault of this module: the next attempt's log still goes
            logging.getLogger(__name__).exception("writing attempt logs failed")


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
