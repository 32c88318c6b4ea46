"""Where a job's checkpoints and savepoints lie on this machine, as its JobManager keeps
them: ``<storage>/work/<job id>/checkpoints/`` under the cluster's folder or
``ha.storage-dir``, and the savepoints in ``state.savepoints.dir`` (or ``savepoints``
beside ``work``: core/jobmanager/dispatcher.py). Shared by ``clusterdeck state`` and the
window's State view; blocking file work, on the caller's thread."""

from __future__ import annotations

from pathlib import Path

from clusterdeck.core import ha
from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol.workdir import checkpoints_dir, job_work_dir
from clusterdeck.core.stateinspector.snapshots import InspectorError


def work_root(config: Config) -> Path:
    """The folder of the cluster's job work dirs, where its JobManager runs."""
    return ha.storage_dir(config, paths.cluster_dir(config["cluster.id"])) / "work"


def job_storage(config: Config, job: str) -> tuple[CheckpointStorage, str]:
    """The checkpoint storage of the job (named by its id or its id's beginning), where
    the cluster's JobManager keeps it on this machine; InspectorError says why not."""
    cluster = config["cluster.id"]
    root = work_root(config)
    if not root.is_dir():
        raise InspectorError(
            f"this machine holds no checkpoint storage of cluster {cluster!r} (no {root}): "
            "its checkpoints are where its JobManager runs; inspect them there")
    found = sorted(entry.name for entry in root.iterdir()
                   if entry.name.startswith(job) and entry.is_dir())
    if job in found:
        found = [job]
    if len(found) != 1:
        raise InspectorError(f"no job {job!r} has checkpoints on this machine (in {root})"
                             if not found else
                             f"{job!r} names {len(found)} jobs: {', '.join(found[:5])}")
    return CheckpointStorage(checkpoints_dir(job_work_dir(root, found[0]))), found[0]


def savepoint_root(config: Config) -> Path:
    """``state.savepoints.dir``, or where the JobManager puts savepoints by default."""
    if config["state.savepoints.dir"]:
        return Path(config["state.savepoints.dir"]).expanduser()
    return work_root(config).parent / "savepoints"


def savepoint_folder(config: Config, which: str) -> Path:
    """A savepoint named by its folder (a path) or its name in the cluster's savepoint
    folder."""
    folder = Path(which).expanduser()
    if not folder.is_absolute() and not folder.exists():
        folder = savepoint_root(config) / folder
    return folder
