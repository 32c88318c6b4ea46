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
import threading
import time
from pathlib import Path

from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol.ids import attempt_file_stem
from clusterdeck.core.taskmanager.attemptfiles import (
    DISK_BACKLOG,
    END,
    JOURNAL,
    AttemptFile,
    DiskThread,
    Journal,
)

THREAD_PREFIX = "task:"
EXCERPT_LINES = 40
TAILS_KEPT = 256  # a TaskManager runs its slots' attempts at once; excerpts are read at once
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_FILES = 1000
STEPS = "clusterdeck.attempt"  # the logger name an attempt's routine steps are shown under
HOLD = 0.2         # seconds an attempt's lines may wait in memory (flush_held)
DRAIN_TIMEOUT = 10.0  # seconds a closing TaskManager waits for its last attempt logs


def thread_name(attempt_id: str) -> str:
    return f"{THREAD_PREFIX}{attempt_id}"


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
        self._files: collections.OrderedDict[str, AttemptFile] = collections.OrderedDict()
        self._guard = threading.Lock()  # records arrive on every slot thread at once
        self._new_logs = 0  # attempt logs begun since the last pruning (the disk thread's)
        self._prune_every = max(1, max_files // 5)
        self._failing = False  # the last write failed (and the process log said so)
        self._journal = Journal(os.path.join(folder, f"{journal}{JOURNAL}"), 4 * max_bytes)
        self._disk = DiskThread(self._write_journal)
        self._own_lines: set[str] = set()  # attempts that logged more than their steps
        self._dropped = 0  # lines dropped because the disk thread was too far behind
        self._dropping = False  # dropping now (said once in the process log)

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
        if not record.threadName or not record.threadName.startswith(THREAD_PREFIX) \
                or record.name == __name__:  # this handler's own word, said under its lock
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
                lines = known.take_held()
                if not self._disk.put(functools.partial(self._journal.add, lines)):
                    self._behind(len(lines))
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
            self._put_close(known)

    def _put_close(self, known: AttemptFile) -> None:
        if not self._disk.put(functools.partial(self._close_file, known)):
            self._behind(len(known.take_held()))
            known.discard()

    def _behind(self, lines: int) -> None:
        """The disk thread is ``DISK_BACKLOG`` attempts behind: an attempt's lines are
        dropped (its excerpt stays in memory); said in the process log once per spell."""
        self._dropped += lines
        if not self._dropping:
            self._dropping = True
            logging.getLogger(__name__).warning(
                "attempt logs in %s: the disk is %d attempts behind; the lines of attempts "
                "that end are dropped until it catches up", self.folder, DISK_BACKLOG)

    def _write_journal(self) -> None:
        """The disk thread, when it has nothing else to do."""
        self._caught_up()
        try:
            self._journal.write_pending()
        except OSError as error:
            self._unwritable(error)

    def _caught_up(self) -> None:
        with self._guard:
            if not self._dropping:
                return
            self._dropping, dropped, self._dropped = False, self._dropped, 0
        logging.getLogger(__name__).warning(
            "attempt logs in %s: the disk caught up; %d lines were dropped", self.folder,
            dropped)

    def _close_file(self, known: AttemptFile) -> None:
        """The disk thread: a new attempt's log first makes room for itself in the folder
        (counted here, not as attempts start: most of them go to the journal)."""
        if known.new_file():
            self._new_logs += 1
            if self._new_logs >= self._prune_every:
                self._new_logs = 0
                with self._guard:
                    active = {attempt_file_stem(attempt_id) for attempt_id in self._files}
                self._prune(active)
        try:
            known.close()
        except OSError as error:
            self._unwritable(error)

    def _file(self, attempt_id: str, fresh: bool) -> AttemptFile:
        """The attempt's file, in memory until it has something to write."""
        known = self._files.get(attempt_id)
        if known is not None:
            self._files.move_to_end(attempt_id)
            return known
        opened = self._files[attempt_id] = AttemptFile(
            str(self.folder), attempt_file_stem(attempt_id), self.max_bytes, fresh)
        while len(self._files) > TAILS_KEPT:
            self._put_close(self._files.popitem(last=False)[1])
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
