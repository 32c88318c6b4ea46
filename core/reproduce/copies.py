"""Copying a failed subtask's input and state into its reproduction folder, within a
budget of bytes.

Every copy lands at a path checked by ``folder.inside``; sources are regular files only
(a link or a device in the cluster's folders is refused, not followed), and a file that
grows while it is copied is cut at the budget, never copied past it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from clusterdeck.core.reproduce.folder import ReproductionError, inside

CHUNK = 1024 * 1024


class InputTooLarge(ReproductionError):
    """The input or state to copy is over the budget; the message names the flag."""


class Budget:
    """Bytes a folder may still take, and what took them (for the message when over)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int, what: str) -> None:
        if self.used + size > self.limit:
            raise InputTooLarge(
                f"{what} would bring the folder's input and state to "
                f"{self.used + size:,} bytes, over the limit of {self.limit:,}: give "
                f"--max-input-bytes {_round_up(self.used + size)} to copy it all")
        self.used += size


def _round_up(size: int) -> int:
    step = 1024 * 1024
    return -(-size // step) * step


def copy_file(source: Path, folder: Path, relative: str, budget: Budget) -> str:
    """Copy the regular file ``source`` to ``relative`` in ``folder``; returns
    ``relative``."""
    try:
        info = os.lstat(source)
    except OSError as error:
        raise ReproductionError(f"{source} cannot be copied: {error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ReproductionError(f"{source} is not a regular file: not copied")
    budget.take(info.st_size, str(source))
    target = inside(folder, relative)
    target.parent.mkdir(parents=True, exist_ok=True)
    left = info.st_size
    with open(source, "rb") as reader, open(target, "xb") as writer:
        while left > 0 and (chunk := reader.read(min(CHUNK, left))):
            writer.write(chunk)
            left -= len(chunk)
    return relative


def copy_tree(source: Path, folder: Path, relative: str, budget: Budget) -> str:
    """Copy the folder ``source`` (its regular files and folders; links are skipped) to
    ``relative`` in ``folder``; returns ``relative``."""
    for root, folders, files in os.walk(source, followlinks=False):
        below = Path(root).relative_to(source).as_posix()
        prefix = relative if below == "." else f"{relative}/{below}"
        inside(folder, prefix).mkdir(parents=True, exist_ok=True)
        folders[:] = [name for name in folders
                      if not os.path.islink(os.path.join(root, name))]
        for name in sorted(files):
            path = Path(root) / name
            if path.is_symlink() or not path.is_file():
                continue
            copy_file(path, folder, f"{prefix}/{name}", budget)
    return relative


def write_bytes(folder: Path, relative: str, data: bytes, budget: Budget) -> str:
    budget.take(len(data), relative)
    target = inside(folder, relative)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return relative
