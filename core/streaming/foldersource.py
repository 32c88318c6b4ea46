"""A watched folder as a replayable source: the lines of the text files that appear in it,
for ever or until it stays idle (Flink's ``FileSource`` with ``monitorContinuously``,
Spark Structured Streaming's file source).

Which files. The folder's own regular files (not its subfolders) whose names match
``pattern`` (a glob, ``*`` by default), except names starting with ``.`` or ``_``: as in
Hadoop and Spark, those are files still being written (a writer writes ``.name`` and
renames it when done; a clusterdeck file sink's ``.part-*``) or markers (``_SUCCESS``).
A file is read once it is **complete**: its size and modification time stayed the same
from one listing to the next, ``monitor_interval`` seconds apart, so a file written in
place is not read half-way. File *f* belongs to subtask ``blake2b(f) mod parallelism``:
each file is read by one subtask, the same one on every run. A subtask reads its complete
files one after the other in the order of their modification time, then name.

Its position (what a checkpoint keeps, ``FolderPosition``) is the files it finished and
the byte offset in the file it is reading, just after the last line it emitted: restored,
it goes on with the next line of that file, then with every file of its not yet done.
The set of finished files stays bounded (``done_kept`` names, 10,000 by default): a name
is dropped once its file is gone from the folder (deleted or moved away after it was
read, as Spark's ``cleanSource`` does), and beyond the bound the oldest finished files
(by modification time) are forgotten behind a *horizon*: a file that appears later
ordered at or before the horizon is taken as done and skipped, with a warning in the log.
The horizon never passes a file the source knows and has not finished, so only a file
that shows up late with an old modification time (``mv`` of an old file) can be skipped,
and only in a folder of more than ``done_kept`` finished files per subtask.

What is not silently skipped: a file that vanishes, shrinks or changes once it was taken
as complete and before it was read to its end fails the task (``FolderSourceError``), as
does a restore whose file in progress is gone or changed, or a line longer than
``max_line_bytes`` (a clear error rather than a record cut in two). Lines end with
``\\n`` (a ``\\r`` before it is dropped); the last line of a file needs none. Bytes that are
not UTF-8 become U+FFFD, as in Spark's text source, rather than failing the stream for
ever. A finished file that grows later is not read again.

Bounded work: a poll reads at most ``limit`` lines and ``POLL_BYTES`` bytes. Plain Python
and files; the task's slot thread owns a source. File access goes through ``FolderAccess``
so tests can stand in for the filesystem.
"""

from __future__ import annotations

import bisect
import fnmatch
import hashlib
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DONE_KEPT = 10_000       # finished file names a subtask's position keeps at most
MAX_LINE_BYTES = 1 << 20  # a longer line fails the task
POLL_BYTES = 4 << 20     # bytes one poll reads at most
READ_CHUNK = 64 << 10    # bytes one read asks for first


class FolderSourceError(Exception):
    """The watched folder broke a rule the source relies on; the task fails with it."""


@dataclass(frozen=True)
class FileEntry:
    """One file as a listing (or a stat) saw it."""

    name: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class DoneFile:
    name: str
    mtime_ns: int


@dataclass(frozen=True)
class FolderPosition:
    """A subtask's place in the folder, as a checkpoint keeps it.

    ``done``: the finished files still in the folder when last listed, by (mtime, name);
    every file ordered at or before (``horizon_mtime_ns``, ``horizon_name``) counts as
    done too. ``current``: the file being read (its size and mtime when it was taken as
    complete), ``offset`` bytes of it emitted; ``current.name`` "" when none."""

    parallelism: int
    done: tuple[DoneFile, ...] = ()
    horizon_mtime_ns: int = -1
    horizon_name: str = ""
    current: FileEntry = FileEntry("", 0, 0)
    offset: int = 0


@dataclass(frozen=True)
class FolderAccess:
    """How the source touches the filesystem. ``list_files(folder)``: its regular files
    (FileNotFoundError when it is gone); ``stat(path)``: one file, None when gone;
    ``read(path, offset, size)``: up to ``size`` bytes from ``offset``."""

    list_files: Callable[[Path], list[FileEntry]]
    stat: Callable[[Path], FileEntry | None]
    read: Callable[[Path, int, int], bytes]


def _list_local(folder: Path) -> list[FileEntry]:
    entries = []
    with os.scandir(folder) as scan:
        for entry in scan:
            try:
                if entry.is_file():
                    info = entry.stat()
                    entries.append(FileEntry(entry.name, info.st_size, info.st_mtime_ns))
            except FileNotFoundError:  # gone between the listing and its stat
                continue
    return entries


def _stat_local(path: Path) -> FileEntry | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return FileEntry(path.name, info.st_size, info.st_mtime_ns)


def _read_local(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as file:
        file.seek(offset)
        return file.read(size)


LOCAL = FolderAccess(_list_local, _stat_local, _read_local)


def is_visible(name: str, pattern: str) -> bool:
    """A file the source reads at all: not hidden (``.``/``_``) and matching ``pattern``."""
    return not name.startswith((".", "_")) and fnmatch.fnmatchcase(name, pattern)


def owner(name: str, parallelism: int) -> int:
    """The subtask that reads file ``name``: stable across runs and machines (not Python's
    salted ``hash``), and spread well over names that differ in one digit (a CRC is not:
    its low bit is the same for ``f0.txt`` ... ``f7.txt``)."""
    digest = hashlib.blake2b(name.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % parallelism


def _key(entry: FileEntry | DoneFile) -> tuple[int, str]:
    return entry.mtime_ns, entry.name


class FolderSource:
    def __init__(self, folder: Path, subtask: int, parallelism: int, pattern: str = "*",
                 monitor_interval: float = 1.0, stop_when_idle: float | None = None,
                 position: FolderPosition | None = None, access: FolderAccess = LOCAL,
                 done_kept: int = DONE_KEPT, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        """A fresh subtask, or one restored at ``position`` (its file in progress is
        checked at once: FolderSourceError when it is gone or changed)."""
        if not 0 <= subtask < parallelism:
            raise ValueError(f"subtask {subtask} of {parallelism}")
        if not monitor_interval > 0 or math.isinf(monitor_interval):
            raise ValueError("a folder source's monitor_interval is seconds, > 0")
        if stop_when_idle is not None and not stop_when_idle >= 0:
            raise ValueError("a folder source's stop_when_idle is seconds, >= 0")
        position = position or FolderPosition(parallelism)
        if position.parallelism != parallelism:
            raise FolderSourceError(
                f"a position of {position.parallelism} subtasks cannot be restored with "
                f"{parallelism}: files are assigned by parallelism")
        self.folder, self.pattern = folder, pattern
        self.subtask, self.parallelism = subtask, parallelism
        self.monitor_interval, self.stop_when_idle = monitor_interval, stop_when_idle
        self._access, self._done_kept, self._max_line = access, done_kept, max_line_bytes
        self._done = {d.name: d.mtime_ns for d in position.done}
        self._horizon = (position.horizon_mtime_ns, position.horizon_name)
        self._current: FileEntry | None = position.current if position.current.name else None
        self._offset = position.offset if self._current else 0
        self._ready: list[tuple[int, str, int]] = []  # (mtime_ns, name, size), in order
        self._settling: dict[str, tuple[int, int, float]] = {}  # name -> size, mtime, since
        self._next_listing: float | None = None  # None: at the next poll
        self._last_listing: frozenset[FileEntry] | None = None
        self._last_activity: float | None = None
        self._exhausted = False
        if self._current is not None:
            self._check_current("the checkpoint's file in progress")

    # -- the source protocol -----------------------------------------------------------

    @property
    def exhausted(self) -> bool:
        """True once ``stop_when_idle`` passed with nothing to read (never without it)."""
        return self._exhausted

    def position(self) -> FolderPosition:
        done = tuple(sorted((DoneFile(name, mtime) for name, mtime in self._done.items()),
                            key=_key))
        return FolderPosition(self.parallelism, done, *self._horizon,
                              self._current or FileEntry("", 0, 0), self._offset)

    def poll(self, now: float, limit: int) -> list[str]:
        """Up to ``limit`` lines (and ``POLL_BYTES`` bytes); the folder is listed first
        when ``monitor_interval`` passed since the last listing."""
        if self._exhausted:
            return []
        if self._last_activity is None:
            self._last_activity = now
        if self._next_listing is None or now >= self._next_listing:
            self._list(now)
        lines: list[str] = []
        budget = POLL_BYTES
        while len(lines) < limit and budget > 0:
            if self._current is None and not self._open_next():
                break
            read = self._read_current(limit - len(lines), budget)
            lines.extend(read[0])
            budget -= read[1]
        if lines:
            self._last_activity = now
        elif self._idle(now):
            self._exhausted = True
        return lines

    def seconds_to_next(self, now: float) -> float:
        """0 with a file to read; else until the next listing (or the idle end)."""
        if self._current is not None or self._ready or self._next_listing is None:
            return 0.0
        due = self._next_listing
        if self.stop_when_idle is not None and self._last_activity is not None:
            due = min(due, self._last_activity + self.stop_when_idle)
        return max(0.0, due - now)

    # -- listing -----------------------------------------------------------------------

    def _list(self, now: float) -> None:
        self._next_listing = now + self.monitor_interval
        try:
            listed = [e for e in self._access.list_files(self.folder)
                      if is_visible(e.name, self.pattern)]
        except FileNotFoundError:
            raise FolderSourceError(f"the watched folder {self.folder} does not exist") \
                from None
        previous = self._last_listing
        snapshot = frozenset(listed)
        if snapshot != previous:  # any change in the folder keeps it from idling
            self._last_listing = snapshot
            self._last_activity = now
        before = {e.name for e in previous} if previous is not None else None
        mine = {e.name: e for e in listed if owner(e.name, self.parallelism) == self.subtask}
        self._check_still_there(mine)
        self._done = {name: mtime for name, mtime in self._done.items() if name in mine}
        queued = {name for _, name, _ in self._ready}
        current = self._current.name if self._current else ""
        for name in [n for n in self._settling if n not in mine]:
            del self._settling[name]  # deleted while still being written: never complete
        for name, entry in mine.items():
            if name in self._done or name in queued or name == current:
                continue
            if _key(entry) <= self._horizon:  # forgotten, or new and as old as those
                if before is not None and name not in before:
                    log.warning("%s: %s appeared with a modification time older than the "
                                "files this source forgot (more than %d done): taken as "
                                "done, not read", self.folder, name, self._done_kept)
                continue
            seen = self._settling.get(name)
            if seen is not None and seen[:2] == (entry.size, entry.mtime_ns) \
                    and now - seen[2] >= self.monitor_interval:
                del self._settling[name]
                bisect.insort(self._ready, (entry.mtime_ns, name, entry.size))
            elif seen is None or seen[:2] != (entry.size, entry.mtime_ns):
                self._settling[name] = (entry.size, entry.mtime_ns, now)

    def _check_still_there(self, mine: dict[str, FileEntry]) -> None:
        for mtime, name, size in self._ready:
            entry = mine.get(name)
            if entry is None:
                raise FolderSourceError(f"{self.folder / name} was complete and vanished "
                                        "before it was read")
            if (entry.size, entry.mtime_ns) != (size, mtime):
                raise FolderSourceError(f"{self.folder / name} changed after it was complete "
                                        f"(size {size} -> {entry.size}) before it was read")

    def _idle(self, now: float) -> bool:
        """Nothing to read, nothing settling, and no change in the folder (anyone's files:
        subtasks idle out together) for ``stop_when_idle`` seconds."""
        if self.stop_when_idle is None or self._current is not None or self._ready \
                or self._settling or self._last_activity is None:
            return False
        return now - self._last_activity >= self.stop_when_idle

    # -- reading -----------------------------------------------------------------------

    def _open_next(self) -> bool:
        if not self._ready:
            return False
        mtime, name, size = self._ready.pop(0)
        self._current, self._offset = FileEntry(name, size, mtime), 0
        self._check_current("a file taken as complete")
        return True

    def _check_current(self, what: str) -> None:
        current = self._current
        assert current is not None
        path = self.folder / current.name
        now = self._access.stat(path)
        if now is None:
            raise FolderSourceError(f"{path}, {what}, vanished (read up to byte "
                                    f"{self._offset} of {current.size})")
        if (now.size, now.mtime_ns) != (current.size, current.mtime_ns):
            raise FolderSourceError(
                f"{path}, {what}, changed under the source: {current.size} bytes modified "
                f"at {current.mtime_ns} ns became {now.size} bytes at {now.mtime_ns} ns "
                f"(read up to byte {self._offset})")

    def _read_current(self, limit: int, budget: int) -> tuple[list[str], int]:
        """Lines of the current file from the offset, at most ``limit`` of them; the bytes
        consumed. The file is finished (done) once its last byte is consumed."""
        current = self._current
        assert current is not None
        if self._offset == current.size:  # an empty file
            self._finish(current)
            return [], 0
        self._check_current("a file being read")
        path = self.folder / current.name
        data = self._chunk(path, current, min(budget, READ_CHUNK))
        at_end = self._offset + len(data) == current.size
        lines, consumed, start = [], 0, 0
        while len(lines) < limit and start < len(data):
            end = data.find(b"\n", start)
            if end < 0 and not at_end:
                break  # the rest of a line: the next read starts with it
            stop = end if end >= 0 else len(data)
            if stop - start > self._max_line:
                raise self._too_long(path, self._offset + start)
            line = data[start:stop]
            lines.append((line[:-1] if line.endswith(b"\r") else line)
                         .decode("utf-8", "replace"))
            start = consumed = stop + 1 if end >= 0 else len(data)
        self._offset += consumed
        if self._offset == current.size:
            self._finish(current)
        return lines, consumed

    def _chunk(self, path: Path, current: FileEntry, want: int) -> bytes:
        """Bytes from the offset holding at least one whole line (or the file's end):
        a first ``want`` bytes, more (up to ``max_line_bytes`` + 1) for a long line."""
        remaining = current.size - self._offset
        want = max(1, min(remaining, want))
        while True:
            try:
                data = self._access.read(path, self._offset, want)
            except FileNotFoundError:
                data = b""
            if len(data) < want:
                self._check_current("a file being read")
                raise FolderSourceError(f"{path} ended at byte {self._offset + len(data)} "
                                        f"of {current.size}: truncated while read")
            if b"\n" in data or want == remaining:
                return data
            if want > self._max_line:
                raise self._too_long(path, self._offset)
            want = min(remaining, max(want * 4, READ_CHUNK), self._max_line + 1)

    def _too_long(self, path: Path, at: int) -> FolderSourceError:
        return FolderSourceError(f"{path}: the line at byte {at} is longer than "
                                 f"{self._max_line} bytes (the source's max_line_bytes)")

    def _finish(self, current: FileEntry) -> None:
        self._current, self._offset = None, 0
        self._done[current.name] = current.mtime_ns
        self._forget_beyond_bound()

    def _forget_beyond_bound(self) -> None:
        """Keep ``done_kept`` names: the oldest go behind the horizon, but never past a
        file known and not finished (its key would then read as done)."""
        excess = len(self._done) - self._done_kept
        if excess <= 0:
            return
        pending = [(m, n) for m, n, _ in self._ready] + [
            (m, n) for n, (_, m, _) in self._settling.items()]
        if self._current is not None:
            pending.append(_key(self._current))
        floor = min(pending, default=(math.inf, ""))
        for mtime, name in sorted((m, n) for n, m in self._done.items())[:excess]:
            if (mtime, name) >= floor:
                break
            del self._done[name]
            self._horizon = max(self._horizon, (mtime, name))

