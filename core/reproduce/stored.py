"""What the JobManager kept of a job, read from its disk: the job store's record (graph,
arguments, result with every failure) and artifact, and the job's work dir (result
partitions, checkpoints). Nothing here needs the cluster to run: a stopped cluster's
folders are enough, which is also why ``reproduce`` runs on the JobManager's machine
(or one that mounts its storage, ``ha.storage-dir``).

Everything read here is treated as hostile: sizes are bounded, the failure chosen must
name a vertex of the job's graph, and paths are only ever built from validated ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdeck.core import ha
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobapi.artifact import sha256_of
from clusterdeck.core.jobmanager.jobstore import BrokenRecordError, JobRecord, JobStore
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.ids import JOB_ID, parse_subtask_id
from clusterdeck.core.protocol.workdir import job_work_dir
from clusterdeck.core.reproduce.folder import ReproductionError

MAX_ARTIFACT_BYTES = 512 * 1024 * 1024
RECORDING_LACKS = (
    "reproducing from a recording is not supported: a recording keeps the messages "
    "(the job's graph, its artifact's upload, deployments, failures) but not the files "
    "a subtask reads: its input files, the result partitions of the subtasks before it, "
    "the checkpoint it was restored from. Run `clusterdeck reproduce JOB` on the "
    "JobManager's machine, whose job store and work dir keep them")
_SUBTASK = re.compile(r"(?P<vertex>[^#/\s]+)(?:[#/](?P<index>\d+))?")


@dataclass(frozen=True)
class StoredJob:
    """One job as its JobManager keeps it on disk."""

    record: JobRecord
    artifact: bytes
    work_dir: Path
    failures: tuple[FailureRecord, ...]


def stored_job(config: Config, job_id: str) -> StoredJob:
    """The job ``job_id`` of the cluster ``config`` names; ReproductionError says why not."""
    if not JOB_ID.fullmatch(job_id):
        raise ReproductionError(f"{job_id[:80]!r} is not a job id")
    storage = ha.storage_dir(config, paths.cluster_dir(config["cluster.id"]))
    jobs = storage / "jobs"
    if not jobs.is_dir():
        raise ReproductionError(
            f"cluster {config['cluster.id']!r} has no job store on this machine ({jobs}): "
            "reproduce reads what the JobManager kept, so run it where the cluster's "
            "JobManager runs (or give --cluster, or ha.storage-dir when it is shared)")
    store = JobStore(jobs)
    try:
        record = store.load(job_id)
    except BrokenRecordError as error:
        raise ReproductionError(f"job {job_id}: {error}") from None
    artifact = _artifact(store.artifact_path(job_id))
    if sha256_of(artifact) != record.artifact_sha256:
        raise ReproductionError(f"job {job_id}: its artifact is not the one submitted")
    history = record.result.failure_history if record.result is not None else ()
    failures = tuple(FailureRecord.from_dict(_plain(entry)) for entry in history)
    return StoredJob(record, artifact, job_work_dir(storage / "work", job_id), failures)


def _artifact(path: Path) -> bytes:
    try:
        with open(path, "rb") as source:
            data = source.read(MAX_ARTIFACT_BYTES + 1)
    except OSError as error:
        raise ReproductionError(f"the job's artifact cannot be read: {error}") from None
    if len(data) > MAX_ARTIFACT_BYTES:
        raise ReproductionError(f"the job's artifact is over {MAX_ARTIFACT_BYTES} bytes")
    return data


def _plain(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ReproductionError("the job's failure history is not a list of failures")
    return entry


def chosen_failure(job: StoredJob, subtask: str | None = None,
                   attempt: int | None = None) -> FailureRecord:
    """The failure to reproduce: by default the root cause's attempt; ``subtask``
    (``VERTEX``, ``VERTEX#INDEX`` or ``VERTEX/INDEX``) and ``attempt`` pick another, the
    newest failure that matches."""
    record = job.record
    if not job.failures:
        state = f"is {record.status}" if record.is_terminal else \
            f"is still {record.status}: its failures are kept once it ended"
        raise ReproductionError(f"job {record.job_id} {state}; there is no failed attempt "
                                "to reproduce")
    candidates = list(job.failures)
    if subtask is not None:
        vertex_id, index = _parse_subtask(subtask)
        candidates = [f for f in candidates if f.vertex_id == vertex_id
                      and (index is None or f.subtask == index)]
    if attempt is not None:
        candidates = [f for f in candidates if f.attempt == attempt]
    if subtask is None and attempt is None:
        candidates = candidates[:1]  # the root cause
    if not candidates:
        listed = ", ".join(sorted({f"{f.vertex_id}#{f.subtask} attempt {f.attempt}"
                                   for f in job.failures}))
        raise ReproductionError(f"job {record.job_id} has no failed attempt like that; "
                                f"its failed attempts: {listed}")
    failure = candidates[-1]
    try:
        vertex = record.graph.vertex(failure.vertex_id)
    except KeyError:
        raise ReproductionError(f"the failure names vertex {failure.vertex_id[:80]!r}, "
                                "which the job does not have") from None
    if not 0 <= failure.subtask < vertex.parallelism or failure.attempt < 0:
        raise ReproductionError(f"the failure of {failure.attempt_id[:120]} is not of an "
                                "attempt of the job (a job that could not start has none)")
    return failure


def _parse_subtask(text: str) -> tuple[str, int | None]:
    match = _SUBTASK.fullmatch(text)
    if match is None:
        raise ReproductionError(f"{text!r} is not a subtask: VERTEX or VERTEX#INDEX")
    if match["index"] is None:
        return match["vertex"], None
    vertex_id, index = parse_subtask_id(f"{match['vertex']}#{match['index']}")
    return vertex_id, index
