"""Each attempt's log lines kept apart: a logging handler that routes records by thread.

A task runs on its own slot thread named after its attempt, so every record logged on
that thread belongs to that attempt. The lines go to the attempt's own file and to a
small ring buffer, whose tail becomes the log excerpt of a failure record.

An attempt that finished within ``HOLD`` having logged only its routine steps (starting,
the splits it read, finished) gets no file of its own: its lines go, in one piece, to
the TaskManager's journal of such attempts, ``<resource-id>.journal`` in the same folder
(rotated to ``.journal.1`` past four times ``taskmanager.attempt-log.max-size``). A file
per attempt cost a 2,000-subtask job of no-op subtasks almost half its rate, and such
logs were pruned again within a second or two; an attempt that failed, was cancelled,
logged anything of its own or ran longer keeps its own file.

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
them a second. That write, and the pruning, are done by one thread of their own, not by
the slot thread that ran the attempt: every file call lets go of the GIL, and getting it
back from a busy TaskManager's other threads took a slot milliseconds per attempt (a
2,000-subtask job ran at half the rate it runs at without attempt logs).
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

from clusterdeck.core.config.settings import Config

THREAD_PREFIX = "task:"
EXCERPT_LINES = 40
TAILS_KEPT = 256  # a TaskManager runs its slots' attempts at once; excerpts are read at once
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_FILES = 1000
STEPS = "clusterdeck.attempt"  # the logger name an attempt's routine steps are shown under
END = ".end"  # after an attempt's ``.log``: the file of its latest lines once it is long
JOURNAL = ".journal"  # after a TaskManager's resource id: its quiet attempts' lines
HOLD = 0.2         # seconds an attempt's lines may wait in memory (flush_held)
HOLD_LINES = 100   # lines held at most before they are written
DRAIN_TIMEOUT = 10.0  # seconds a closing TaskManager waits for its last attempt logs


def thread_name(attempt_id: str) -> str:
    return f"{THREAD_PREFIX}{attempt_id}"


def safe_name(attempt_id: str) -> str:
    return attempt_id.replace("/", "_").replace("#", "-")


class AttemptLogHandler(logging.Handler):
    """Installed once per TaskManager process on the root logger. Several TaskManagers of
    one machine share the folder; each bounds what it writes and prunes what is oldest."""

    def __init__(self, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_files: int = DEFAULT_MAX_FILES, journal: str = "taskmanager") -> None:
        super().__init__()
        self.folder = folder
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self._tails: collections.OrderedDict[str, collections.deque[str]] = \
            collections.OrderedDict()
        self._files: collections.OrderedDict[str, _AttemptFile] = collections.OrderedDict()
        self._guard = threading.Lock()  # records arrive on every slot thread at once
        self._new_logs = 0  # attempt logs begun since the last pruning (the disk thread's)
        self._prune_every = max(1, max_files // 5)
        self._failing = False  # the last write failed (and the process log said so)
        self._journal = _Journal(os.path.join(folder, f"{journal}{JOURNAL}"), 4 * max_bytes)
        self._disk = _DiskThread(self._write_journal)
        self._own_lines: set[str] = set()  # attempts that logged more than their steps

    @classmethod
    def from_config(cls, folder: Path, config: Config, journal: str) -> AttemptLogHandler:
        return cls(folder, config["taskmanager.attempt-log.max-size"],
                   config["taskmanager.attempt-log.max-files"], journal)

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
            self.write(record.threadName[len(THREAD_PREFIX):], self.format(record), own=True)
        except OSError as error:
            self._unwritable(error)

    def _unwritable(self, error: OSError) -> None:
        """Said once in the process log (this handler writes only attempt logs) and
        again whenever the folder becomes writable and then fails again."""
        if not self._failing:
            self._failing = True
            logging.getLogger(__name__).warning("cannot write attempt logs in %s: %s",
                                                self.folder, error)

    def write(self, attempt_id: str, line: str, own: bool = False) -> None:
        """``own``: a line the attempt logged itself, not one of its routine steps."""
        with self._guard:
            if own:
                self._own_lines.add(attempt_id)
            tail = self._tails.get(attempt_id)
            fresh = tail is None  # its first line (a late line after ``forget`` aside)
            if tail is None:
                tail = self._tails[attempt_id] = collections.deque(maxlen=EXCERPT_LINES)
                while len(self._tails) > TAILS_KEPT:
                    self._own_lines.discard(self._tails.popitem(last=False)[0])
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
            self._own_lines.discard(attempt_id)
            self._close(attempt_id)

    def ended(self, attempt_id: str, finished: bool = False) -> None:
        """The attempt's thread is done: its lines are written on the disk thread, to the
        journal if it ``finished`` quietly and quickly, else to its own file (a late line
        opens it again); its tail stays for the excerpt."""
        with self._guard:
            quiet = finished and attempt_id not in self._own_lines
            self._own_lines.discard(attempt_id)
            known = self._files.get(attempt_id)
            if quiet and known is not None and known.only_held():
                del self._files[attempt_id]
                self._disk.put(functools.partial(self._journal.add, known.take_held()))
                return
            self._close(attempt_id)

    def drain(self, timeout: float = DRAIN_TIMEOUT) -> bool:
        """Wait until what ended so far is on disk (or failed to be); False on timeout."""
        return self._disk.drain(timeout)

    def close(self) -> None:
        """Called by ``logging.shutdown`` too: the attempts that ended reach the disk."""
        self._disk.stop(DRAIN_TIMEOUT)
        super().close()

    def _close(self, attempt_id: str) -> None:
        known = self._files.pop(attempt_id, None)
        if known is not None:
            self._disk.put(functools.partial(self._close_file, known))

    def _write_journal(self) -> None:
        """The disk thread."""
        try:
            self._journal.write_pending()
        except OSError as error:
            self._unwritable(error)

    def _close_file(self, known: _AttemptFile) -> None:
        """The disk thread: a new attempt's log first makes room for itself in the folder
        (counted here, not as attempts start: most of them go to the journal)."""
        if known.new_file():
            self._new_logs += 1
            if self._new_logs >= self._prune_every:
                self._new_logs = 0
                with self._guard:
                    active = {safe_name(attempt_id) for attempt_id in self._files}
                self._prune(active)
        try:
            known.close()
        except OSError as error:
            self._unwritable(error)

    def _file(self, attempt_id: str, fresh: bool) -> _AttemptFile:
        """The attempt's file, in memory until it has something to write."""
        known = self._files.get(attempt_id)
        if known is not None:
            self._files.move_to_end(attempt_id)
            return known
        opened = self._files[attempt_id] = _AttemptFile(str(self.folder), safe_name(attempt_id),
                                                        self.max_bytes, fresh)
        while len(self._files) > TAILS_KEPT:
            self._disk.put(functools.partial(self._close_file,
                                             self._files.popitem(last=False)[1]))
        return opened

    def _prune(self, active: set[str]) -> None:
        """The disk thread: delete the oldest attempt logs (by last write) so that the new
        ones until the next pruning make at most ``max_files``; never one of ``active``,
        those this process was writing when it was asked for."""
        if not self.folder.is_dir():
            return  # no log written yet: the folder is made by the first one
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


class _Journal:
    """The routine lines of attempts that finished quietly, a TaskManager's, in one file:
    gathered by the disk thread and written once it has nothing else to do."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._pending: list[str] = []
        self._size: int | None = None  # unknown until the first write

    def add(self, lines: list[str]) -> None:
        self._pending.extend(lines)

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
        try:
            out = os.open(self.path, _APPEND, 0o666)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            out = os.open(self.path, _APPEND, 0o666)
        try:
            _write_all(out, data)
        finally:
            os.close(out)
        self._size += len(data)


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
            try:
                self._out = os.open(path, _APPEND, 0o666)
            except FileNotFoundError:  # the first log of this folder, or it was removed
                os.makedirs(self.folder, exist_ok=True)
                self._out = os.open(path, _APPEND, 0o666)
        _write_all(self._out, data)
        return len(data)


def _write_all(out: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class _DiskThread:
    """One thread that does the disk work of attempts that ended, in the order it was
    asked for; started with the first piece of work."""

    def __init__(self, idle: Callable[[], None]) -> None:
        self._idle = idle  # run whenever no more work is waiting
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def put(self, work: Callable[[], None]) -> None:
        with self._starting:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="attempt-logs",
                                                daemon=True)
                self._thread.start()
        self._work.put(work)

    def drain(self, timeout: float) -> bool:
        done = threading.Event()

        def barrier() -> None:
            try:
                self._idle()  # what was gathered for later goes too
            finally:
                done.set()

        self.put(barrier)
        return done.wait(timeout)

    def stop(self, timeout: float) -> None:
        with self._starting:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._work.put(None)
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
