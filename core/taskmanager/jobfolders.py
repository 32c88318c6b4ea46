"""Job folders a TaskManager made on its own machine, and their retention.

A task writes under its job's work dir, a path on the JobManager's machine. When the
TaskManager shares that folder (same machine, or a shared mount) the JobManager made it
before deploying, and the JobManager's job retention deletes it. When the TaskManager is
on another machine the folder does not exist there until a task makes it, and only the
TaskManagers of that machine can ever delete it: the one that made it leaves a marker
(``MARKER``, touched again by each task that uses it), and each time a TaskManager makes
a job folder it deletes, of the marked folders beside it, those beyond the newest
``jobstore.retention.max-jobs`` and those unused for ``jobstore.retention.max-age`` —
never one of a job with a task running here. Partitions another TaskManager still needs
and loses this way are refetched or recomputed (PartitionNotFound), never read as empty.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Collection
from pathlib import Path

log = logging.getLogger(__name__)

MARKER = ".made-by-taskmanager"


def claim(work_dir: str) -> bool:
    """Slot thread, before a task writes: make the job folder if it is not here (True:
    this machine's copy is ours to delete); mark a folder made here as used now."""
    try:
        os.makedirs(work_dir)
    except FileExistsError:
        marker = Path(work_dir) / MARKER
        if marker.exists():
            marker.touch()
        return False
    (Path(work_dir) / MARKER).touch()
    return True


def sweep(jobs_folder: str, keep: int, max_age: float, in_use: Collection[str],
          now: float | None = None) -> list[str]:
    """Worker thread: delete the marked job folders in ``jobs_folder`` beyond the newest
    ``keep`` and older than ``max_age`` seconds, except those in ``in_use``; returns them."""
    now = time.time() if now is None else now
    marked = []
    with os.scandir(jobs_folder) as entries:
        for entry in entries:
            try:
                used = os.stat(os.path.join(entry.path, MARKER)).st_mtime
            except OSError:
                continue  # not made here, or made by no TaskManager
            marked.append((used, entry.path))
    marked.sort(reverse=True)
    doomed = [path for index, (used, path) in enumerate(marked)
              if (index >= keep or now - used > max_age) and path not in in_use]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
        log.info("deleted job folder %s (job retention of this machine)", path)
    return doomed
