"""Files in chunks: job artifacts up and down, result files and state snapshots down.

Each chunk is base64 in one message so a file larger than ``rpc.framesize`` still travels;
``offset``/``index`` and ``total`` let the receiver resume and know when it is done.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.rpc import message


@message
@dataclass(frozen=True)
class UploadArtifactChunk:
    """JobClient -> Dispatcher: one base64 piece of a job artifact (a zip), so an artifact
    larger than rpc.framesize still travels; ``sha256`` is of the whole artifact."""

    upload_id: str
    index: int
    total: int
    data: str
    sha256: str


@message
@dataclass(frozen=True)
class ArtifactChunkReceived:
    upload_id: str
    index: int


@message
@dataclass(frozen=True)
class RequestArtifactChunk:
    """TaskExecutor -> Dispatcher: fetch a job's artifact to run its tasks."""

    job_id: str
    index: int


@message
@dataclass(frozen=True)
class ArtifactChunk:
    job_id: str
    index: int
    total: int
    data: str
    sha256: str


@message
@dataclass(frozen=True)
class RequestJobFile:
    """Client -> Dispatcher: a chunk of one of a job's result files (collected rows,
    printed output, the files manifest) from ``offset`` on, for a client that cannot
    read it where it runs (another machine than the JobManager's)."""

    job_id: str
    path: str
    offset: int = 0


@message
@dataclass(frozen=True)
class JobFileChunk:
    """``data``: base64 of at most half ``rpc.framesize`` bytes; ``total``: the file's size."""

    job_id: str
    path: str
    offset: int
    total: int
    data: str


@message
@dataclass(frozen=True)
class RequestStateChunk:
    """TaskExecutor -> JobMaster (ask, fenced): a chunk of the snapshot an attempt is
    deployed to restore (``SubmitTask.restore_state`` of ``checkpoint_id``), from
    ``offset`` on, when the TaskManager cannot see the JobManager's checkpoint folder.
    ``shared``: one of the shared files the snapshot's handle names (its path), instead
    of the snapshot. Answered with a ``JobFileChunk`` whose ``path`` is the file's."""

    job_id: str
    attempt_id: str
    checkpoint_id: int
    offset: int = 0
    shared: str = ""
