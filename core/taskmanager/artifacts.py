"""Fetching a job's artifact from the Dispatcher, in chunks, checked against its sha256.

Runs on a worker thread; the TaskExecutor keeps one Future per job, so the slots of one
job share a single download.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path

from clusterdeck.core.jobapi.artifact import unpack_artifact
from clusterdeck.core.jobapi.loader import LoadedJob, load_job
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.gateways import DispatcherGateway

log = logging.getLogger(__name__)


def load_artifact(dispatcher: DispatcherGateway, task: p.SubmitTask, root: Path) -> LoadedJob:
    """Fetch the task's job artifact and load it, bound to the graph it was submitted as."""
    entry = fetch_artifact(dispatcher, task.job_id, task.artifact_sha256, root)
    return load_job(entry, task.args, expected=task.graph)


def fetch_artifact(dispatcher: DispatcherGateway, job_id: str, sha256: str,
                   root: Path) -> Path:
    """Download and unpack the artifact of ``job_id``; returns the job file's path."""
    pieces: list[bytes] = []
    total = 1
    while len(pieces) < total:
        chunk = dispatcher.request_artifact_chunk(
            p.RequestArtifactChunk(job_id, len(pieces))).result()
        total = chunk.total
        pieces.append(base64.b64decode(chunk.data, validate=True))
    data = b"".join(pieces)
    entry = unpack_artifact(data, root / job_id / sha256[:16], sha256)
    log.info("artifact of job %s fetched (%d bytes)", job_id, len(data))
    return entry
