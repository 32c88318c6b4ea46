"""An attempt that failed for want of disk space says which disk of which TaskManager.

Spark (a Java ``IOException``), pyarrow and Python all end in ``No space left on
device`` and a path deep in a stack trace; a user reading a job's root cause needs
"TaskManager tm-2's work dir ... is full" instead, and a consumer that could not store a
fetched partition must not blame its producer (a ``PartitionNotFound`` would run the
producer again, and fill the same disk again). Runs on the slot thread.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clusterdeck.core.protocol.failures import DISK_FULL

# strerror(ENOSPC) and (EDQUOT), as Python, the JVM and Hadoop write them into messages
_NO_SPACE = ("No space left on device", "Disk quota exceeded")
# A disk with less than this free when the attempt failed is the full one: an attempt's
# partial files are usually deleted by then, so "free" is rarely exactly 0.
FULL_BELOW = 4 * 1024 * 1024


class DiskFull(Exception):
    """An attempt's failure for want of space, naming the disk by its role."""

    exception_type = DISK_FULL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.user_message = message


@contextmanager
def naming_a_full_disk(taskmanager_id: str, work_dir: str) -> Iterator[None]:
    """Re-raise a failure for want of space as ``DiskFull``, naming which of this
    TaskManager's disks (its job's work dir here, or its temporary folder, where Spark
    spills) is full; any other failure passes unchanged."""
    try:
        yield
    except Exception as error:
        if not _for_want_of_space(error):
            raise
        raise DiskFull(_which_disk(taskmanager_id, work_dir, _first_line(error))) from error


def _for_want_of_space(error: BaseException) -> bool:
    chain: BaseException | None = error
    while chain is not None:
        if isinstance(chain, OSError) and chain.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        chain = chain.__cause__ or chain.__context__
    text = getattr(error, "traceback_text", "") or "".join(traceback.format_exception(error))
    return any(words in text for words in _NO_SPACE)


def _which_disk(taskmanager_id: str, work_dir: str, detail: str) -> str:
    places = {"work dir": work_dir, "temporary folder": tempfile.gettempdir()}
    free = {role: _free(path) for role, path in places.items()}
    full = [role for role, left in free.items() if left is not None and left < FULL_BELOW]
    if full:
        role = full[0]
        return (f"TaskManager {taskmanager_id}'s {role} {places[role]} is full "
                f"({free[role]} bytes free): {detail}")
    seen = ", ".join(f"{role} {places[role]}: {_size(free[role])}" for role in places)
    return f"a disk of TaskManager {taskmanager_id} is full ({seen}): {detail}"


def _free(path: str) -> int | None:
    """Free bytes of the disk ``path`` (or its nearest existing parent) is on."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _size(free: int | None) -> str:
    return "unknown free" if free is None else f"{free} bytes free"


def _first_line(error: BaseException) -> str:
    """The line of the failure that names the path, else its first line, bounded."""
    text = getattr(error, "user_message", "") or str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    named = next((line for line in lines if any(w in line for w in _NO_SPACE)), None)
    return (named or (lines[0] if lines else type(error).__name__))[:300]
