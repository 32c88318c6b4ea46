"""Each attempt's log lines kept apart: a logging handler that routes records by thread.

A task runs on its own slot thread named after its attempt, so every record logged on
that thread belongs to that attempt. The lines go to the attempt's own file and to a
small ring buffer, whose tail becomes the log excerpt of a failure record.

Both are bounded, as a TaskManager may run for months: an attempt's log keeps its first
half of ``taskmanager.attempt-log.max-size`` in ``<attempt>.log``, then only its latest
lines, in ``<attempt>.log.end`` rotated to ``.end.1`` (the start says what the task set
out to do, the end why it stopped); at most ``taskmanager.attempt-log.max-files`` attempt
logs are kept in the folder, the oldest deleted as new attempts start (once per fifth
of the limit, down to four fifths: listing a folder of a thousand logs more often cost
a tenth of a short task's time); and the ring buffers of only the latest ``TAILS_KEPT``
attempts stay in memory.

A line reaches the disk when its attempt ends, or at most ``HOLD`` seconds after it was
written (``flush_held``, from the TaskManager's main thread): most attempts of a busy
job end sooner, and one write per attempt is what lets a TaskManager run a thousand of
them a second.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from pathlib import Path
from typing import BinaryIO

from clusterdeck.core.config.settings import Config

THREAD_PREFIX = "task:"
EXCERPT_LINES = 40
TAILS_KEPT = 256  # a TaskManager runs its slots' attempts at once; excerpts are read at once
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_FILES = 1000
STEPS = "clusterdeck.attempt"  # the logger name an attempt's routine steps are shown under
END = ".end"  # after an attempt's ``.log``: the file of its latest lines once it is long
HOLD = 0.2         # seconds an attempt's lines may wait in memory (flush_held)
HOLD_LINES = 100   # lines held at most before they are written


def thread_name(attempt_id: str) -> str:
    return f"{THREAD_PREFIX}{attempt_id}"


def safe_name(attempt_id: str) -> str:
    return attempt_id.replace("/", "_").replace("#", "-")


class AttemptLogHandler(logging.Handler):
    """Installed once per TaskManager process on the root logger. Several TaskManagers of
    one machine share the folder; each bounds what it writes and prunes what is oldest."""

    def __init__(self, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_files: int = DEFAULT_MAX_FILES) -> None:
        super().__init__()
        self.folder = folder
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self._tails: collections.OrderedDict[str, collections.deque[str]] = \
            collections.OrderedDict()
        self._files: collections.OrderedDict[str, _AttemptFile] = collections.OrderedDict()
        self._guard = threading.Lock()  # records arrive on every slot thread at once
        self._new_logs = 0  # attempt logs begun since the last pruning
        self._prune_every = max(1, max_files // 5)
        self._failing = False  # the last write failed (and the process log said so)

    @classmethod
    def from_config(cls, folder: Path, config: Config) -> AttemptLogHandler:
        return cls(folder, config["taskmanager.attempt-log.max-size"],
                   config["taskmanager.attempt-log.max-files"])

    def step(self, attempt_id: str, message: str) -> None:
        """An attempt's routine step (starting, a split, finished), in its own log and
        excerpt only, as a DEBUG line of ``clusterdeck.attempt`` would read. Written here
        and not through ``logging``, whose record, caller lookup and two locks were a
        fifth of a short task's time on its TaskManager."""
        now = time.time()
        stamp = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}," \
                f"{int(now * 1000) % 1000:03d}"
        try:
            self.write(attempt_id, f"{stamp} DEBUG {STEPS}: {message}")
        except OSError as error:  # as logging would: the task goes on without its log line
            self._unwritable(error)

    def emit(self, record: logging.LogRecord) -> None:
        if not record.threadName or not record.threadName.startswith(THREAD_PREFIX):
            return
        try:
            self.write(record.threadName[len(THREAD_PREFIX):], self.format(record))
        except OSError as error:
            self._unwritable(error)

    def _unwritable(self, error: OSError) -> None:
        """Said once in the process log (this handler writes only attempt logs) and
        again whenever the folder becomes writable and then fails again."""
        if not self._failing:
            self._failing = True
            logging.getLogger(__name__).warning("cannot write attempt logs in %s: %s",
                                                self.folder, error)

    def write(self, attempt_id: str, line: str) -> None:
        with self._guard:
            tail = self._tails.get(attempt_id)
            fresh = tail is None  # its first line (a late line after ``forget`` aside)
            if tail is None:
                tail = self._tails[attempt_id] = collections.deque(maxlen=EXCERPT_LINES)
                while len(self._tails) > TAILS_KEPT:
                    self._tails.popitem(last=False)
            tail.append(line)
            self._file(attempt_id, fresh).write(line + "\n")
            self._failing = False

    def flush_held(self) -> None:
        """The TaskManager's main thread, every few tenths of a second while tasks run:
        lines held for ``HOLD`` seconds go to disk, and their attempts' lines from then on
        at once (a task that hangs after its first line shows that line)."""
        with self._guard:
            for opened in self._files.values():
                try:
                    opened.flush(older_than=HOLD)
                except OSError as error:
                    self._unwritable(error)

    def excerpt(self, attempt_id: str) -> tuple[str, ...]:
        with self._guard:
            return tuple(self._tails.get(attempt_id, ()))

    def forget(self, attempt_id: str) -> None:
        with self._guard:
            self._tails.pop(attempt_id, None)
            self._close(attempt_id)

    def ended(self, attempt_id: str) -> None:
        """The attempt's thread is done: close its file (a late line opens it again); its
        tail stays for the excerpt."""
        with self._guard:
            self._close(attempt_id)

    def _close(self, attempt_id: str) -> None:
        known = self._files.pop(attempt_id, None)
        if known is not None:
            self._close_file(known)

    def _close_file(self, known: _AttemptFile) -> None:
        try:
            known.close()
        except OSError as error:  # called on slot threads outside a task's try
            self._unwritable(error)

    def _file(self, attempt_id: str, fresh: bool) -> _AttemptFile:
        """The attempt's file; a new attempt first makes room for its log in the folder."""
        known = self._files.get(attempt_id)
        if known is not None:
            self._files.move_to_end(attempt_id)
            return known
        if fresh:
            self._new_logs += 1
            if self._new_logs >= self._prune_every:
                self._new_logs = 0
                self._prune()
        opened = self._files[attempt_id] = _AttemptFile(str(self.folder), safe_name(attempt_id),
                                                        self.max_bytes, fresh)
        while len(self._files) > TAILS_KEPT:
            self._close_file(self._files.popitem(last=False)[1])
        return opened

    def _prune(self) -> None:
        """Delete the oldest attempt logs (by last write) so that the new ones until the
        next pruning make at most ``max_files``; never one this process is writing."""
        if not self.folder.is_dir():
            return  # no log written yet: the folder is made by the first one
        active = {safe_name(attempt_id) for attempt_id in self._files}
        logs = []
        for entry in os.scandir(self.folder):
            stem = entry.name[:-len(".log")]
            if entry.name.endswith(".log") and stem not in active:
                try:
                    logs.append((entry.stat().st_mtime, stem))
                except FileNotFoundError:
                    continue  # another TaskManager of this machine pruned it meanwhile
        excess = len(logs) + len(active) + self._prune_every - self.max_files
        for _, stem in sorted(logs)[:max(0, excess)]:
            for suffix in (".log", f".log{END}", f".log{END}.1"):
                (self.folder / f"{stem}{suffix}").unlink(missing_ok=True)


class _AttemptFile:
    """One attempt's log on disk: its head, then its end in two files that take turns.

    Lines are held in memory first: most attempts are done within ``HOLD`` and their
    lines go to disk in one write as they end; an attempt that runs longer has its lines
    flushed by ``flush_held`` and written at once from then on, to a file kept open
    while it runs. Opening the file for each line, and a write per line, were a fifth of
    a short task's time on its TaskManager."""

    def __init__(self, folder: str, name: str, max_bytes: int, new: bool = False) -> None:
        self.folder = folder
        self.head = os.path.join(folder, f"{name}.log")
        self.end = self.head + END
        self.head_budget = max_bytes // 2
        self.end_budget = max(1, max_bytes // 4)  # per end file; two of them
        self.head_bytes = 0 if new else _size(self.head)
        self.end_bytes = 0 if new else _size(self.end)
        self.cut = not new and os.path.exists(self.end)
        self._out: BinaryIO | None = None  # open on self.end once cut, else on self.head
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

    def flush(self, older_than: float | None = None) -> None:
        """Write the held lines; with ``older_than``, only if held that long, and then
        every later line at once."""
        if not self._held or (older_than is not None
                              and time.monotonic() - self._held_since < older_than):
            return
        held, self._held = self._held, []
        for text in held:
            self._write_now(text)
        self._through = self._through or older_than is not None

    def close(self) -> None:
        try:
            self.flush()
        finally:
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
            self._out.close()
            self._out = None

    def _append(self, path: str, data: bytes) -> int:
        if self._out is None:
            try:
                self._out = open(path, "ab", buffering=0)  # noqa: SIM115 - see _close_out
            except FileNotFoundError:  # the first log of this folder, or it was removed
                os.makedirs(self.folder, exist_ok=True)
                self._out = open(path, "ab", buffering=0)  # noqa: SIM115
        self._out.write(data)
        return len(data)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
