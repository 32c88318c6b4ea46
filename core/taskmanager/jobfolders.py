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

Where this machine's user may not create the JobManager's path (another user's home, a
read-only mount), the job's files go to a stand-in folder under this TaskManager's own
data folder instead, named by a hash of the JobManager's path. The path keeps naming
the files in every message; only this machine's disk holds them elsewhere, and
``kept_at`` says where, for the tasks and for the data service alike.

A job's tasks arrive by the hundred a second; ``Claims`` remembers the folder its latest
task claimed for ``CLAIM_FRESH`` seconds, so that the following tasks skip the claim (a
few system calls and a touch of the marker each).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Collection
from pathlib import Path

from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.taskmanager.endpoint import Endpoint

log = logging.getLogger(__name__)

MARKER = ".made-by-taskmanager"
CLAIM_FRESH = 30.0  # seconds a claim stands for the job's next tasks
CLAIMS_KEPT = 64    # work dirs remembered at most


def stand_ins_of(cluster_id: str) -> str:
    """The folder of this machine's stand-in job folders of a cluster."""
    return str(paths.cluster_dir(cluster_id) / "jobs")


def stand_in(work_dir: str, stand_ins: str) -> str:
    """The folder under ``stand_ins`` that holds the job of ``work_dir`` here, if any."""
    return os.path.join(stand_ins, hashlib.sha256(work_dir.encode()).hexdigest()[:24])


def kept_at(work_dir: str, stand_ins: str) -> str:
    """Where this machine keeps the files of the job whose work dir (as the JobManager
    names it) is ``work_dir``: its stand-in once one was made, else that path itself."""
    folder = stand_in(work_dir, stand_ins)
    return folder if os.path.isdir(folder) else work_dir


def claim(work_dir: str, stand_ins: str) -> tuple[str, bool]:
    """Slot thread, before a task writes: the folder to write the job's files to, made
    here if missing (True: this machine's copy is ours to delete); a folder made here is
    marked as used now."""
    folder = stand_in(work_dir, stand_ins)
    if os.path.isdir(folder):
        _used(folder)
        return folder, False
    try:
        os.makedirs(work_dir)
    except FileExistsError:
        if os.access(work_dir, os.W_OK | os.X_OK):
            _used(work_dir)
            return work_dir, False
        return _made(folder, work_dir)
    except OSError as error:
        return _made(folder, work_dir, error)
    (Path(work_dir) / MARKER).touch()
    return work_dir, True


class Claims:
    """Main thread of a TaskExecutor: the folder lately claimed per work dir."""

    def __init__(self, fresh_for: float = CLAIM_FRESH, most: int = CLAIMS_KEPT) -> None:
        self.fresh_for = fresh_for
        self.most = most
        self._kept: dict[str, tuple[str, float]] = {}  # work dir -> (folder, claimed at)

    def fresh(self, work_dir: str, now: float | None = None) -> str | None:
        """The folder a task of ``work_dir`` claimed less than ``fresh_for`` ago, if any."""
        known = self._kept.get(work_dir)
        now = time.monotonic() if now is None else now
        return known[0] if known is not None and now - known[1] < self.fresh_for else None

    def store(self, work_dir: str, folder: str, now: float | None = None) -> None:
        self._kept.pop(work_dir, None)  # re-inserted last: the oldest come first
        self._kept[work_dir] = (folder, time.monotonic() if now is None else now)
        while len(self._kept) > self.most:
            del self._kept[next(iter(self._kept))]


def _made(folder: str, instead_of: str = "", why: object = "not writable") -> tuple[str, bool]:
    try:
        os.makedirs(folder)
    except FileExistsError:
        _used(folder)
        return folder, False
    log.info("this machine may not write %s (%s): keeping that job's files in %s",
             instead_of, why, folder)
    (Path(folder) / MARKER).touch()
    return folder, True


def _used(folder: str) -> None:
    marker = Path(folder) / MARKER
    if marker.exists():
        marker.touch()


def sweep(jobs_folder: str, keep: int, max_age: float, in_use: Collection[str],
          stand_ins: str = "", now: float | None = None) -> list[str]:
    """Worker thread: delete the marked job folders in ``jobs_folder`` beyond the newest
    ``keep`` and older than ``max_age`` seconds, except those of the work dirs ``in_use``
    (kept here at their stand-ins, if any); returns them."""
    now = time.time() if now is None else now
    in_use = {kept_at(work_dir, stand_ins) if stand_ins else work_dir for work_dir in in_use}
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


class JobFolders:
    """A TaskExecutor's job folders: claimed for its tasks, swept by this machine's job
    retention. ``in_use()``: the work dirs of the tasks here now (never swept)."""

    def __init__(self, endpoint: Endpoint, config: Config, stand_ins: str,
                 in_use: Callable[[], list[str]]) -> None:
        self._endpoint = endpoint
        self._keep: int = config["jobstore.retention.max-jobs"]
        self._max_age: float = config["jobstore.retention.max-age"]
        self.stand_ins = stand_ins
        self._in_use = in_use
        self._claims = Claims()

    def fresh(self, work_dir: str) -> str | None:
        """Main thread: the folder a task of ``work_dir`` claimed lately, if any."""
        return self._claims.fresh(work_dir)

    def claim(self, work_dir: str) -> str:
        """Slot thread: where this machine keeps ``work_dir``, made if need be; the main
        thread then remembers it and, if it was made, sweeps beside it."""
        kept, made = claim(work_dir, self.stand_ins)
        self._endpoint.run_async(self._claimed, work_dir, kept, made)
        return kept

    def _claimed(self, work_dir: str, kept: str, made: bool) -> None:
        self._claims.store(work_dir, kept)
        if made:
            self._sweep(os.path.dirname(kept))

    def _sweep(self, jobs_folder: str) -> None:
        """Main thread: a task made a job folder on this machine; apply this machine's
        job retention to such folders, on a worker."""
        swept = self._endpoint.run_in_worker(sweep, jobs_folder, self._keep, self._max_age,
                                             self._in_use(), self.stand_ins,
                                             name="job-retention")
        self._endpoint.on_main_thread(swept, lambda _gone, error: error and log.warning(
            "could not apply job retention to %s: %s", jobs_folder, error))
