"""Follows the log files of a cluster's processes, as ``tail -F`` does, across rotations.

The supervisor writes one ``<process>.log`` per process and rotates it by renaming it to
``<process>.log.1``. A file stays open here until it was read to its end after a new file
took its name, so no line is lost to a rotation, and the last position is handed back to
the caller, so a restarted recorder goes on where it stopped instead of recording twice.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from clusterdeck.core.recorder.store import LogLine

MAX_LINE = 8 * 1024  # longer lines are cut: a recording's rows stay bounded
READ_CHUNK = 1024 * 1024  # per file and poll, so one chatty process cannot starve others


@dataclass
class _Followed:
    process: str
    handle: BinaryIO
    inode: int
    partial: bytes = b""


class LogTail:
    def __init__(self, folder: Path, positions: dict[str, tuple[int, int]] | None = None
                 ) -> None:
        """``positions``: process -> (inode, offset) where an earlier run stopped."""
        self.folder = folder
        self._start_at = dict(positions or {})
        self._followed: dict[str, _Followed] = {}

    def poll(self) -> list[LogLine]:
        """Lines written since the last poll, from every process's log."""
        lines: list[LogLine] = []
        for path in sorted(self.folder.glob("*.log")):
            process = path.name[:-len(".log")]
            followed = self._followed.get(process) or self._open(process, path)
            if followed is None:
                continue
            lines += self._read(followed)
            if self._rotated(followed, path):
                lines += self._read(followed, to_end=True)
                followed.handle.close()
                del self._followed[process]
                reopened = self._open(process, path, fresh=True)
                if reopened is not None:
                    lines += self._read(reopened)
        return lines

    def positions(self) -> dict[str, tuple[int, int]]:
        return {name: (f.inode, f.handle.tell() - len(f.partial))
                for name, f in self._followed.items()}

    def close(self) -> None:
        for followed in self._followed.values():
            followed.handle.close()
        self._followed.clear()

    def _open(self, process: str, path: Path, fresh: bool = False) -> _Followed | None:
        try:
            handle = path.open("rb")
        except OSError:
            return None
        inode = os.fstat(handle.fileno()).st_ino
        known = self._start_at.pop(process, None)
        if not fresh and known is not None and known[0] == inode:
            handle.seek(min(known[1], os.fstat(handle.fileno()).st_size))
        followed = _Followed(process, handle, inode)
        self._followed[process] = followed
        return followed

    @staticmethod
    def _rotated(followed: _Followed, path: Path) -> bool:
        try:
            return path.stat().st_ino != followed.inode
        except OSError:
            return False

    @staticmethod
    def _read(followed: _Followed, to_end: bool = False) -> list[LogLine]:
        data = followed.partial + followed.handle.read(READ_CHUNK)
        *complete, rest = data.split(b"\n")
        if to_end and rest:
            complete.append(rest)
            rest = b""
        followed.partial = rest[:MAX_LINE]  # an endless line keeps its start
        now = time.time()
        return [LogLine(now, followed.process,
                        line[:MAX_LINE].decode("utf-8", errors="replace"))
                for line in complete]
