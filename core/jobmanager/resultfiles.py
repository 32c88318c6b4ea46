"""A job's result files for clients on any machine, in chunks that fit a message.

The files a finished job's result names (collected rows, what its scripts printed, the
files manifest) are on the JobManager's machine: its JobMaster brings those written on
other machines there before the job is FINISHED (core/jobmanager/datapeers.py). A client
that cannot read them where it runs asks the Dispatcher for them one chunk at a time
(``RequestJobFile``). Only those files are served, whatever a request's path says: under
the job's work dir, in ``collect/`` or ``output/``, or its manifest.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.workdir import FILES_MANIFEST, RESULT_FOLDERS


def chunk_size(framesize: int) -> int:
    """Bytes of a file in one chunk message: half a frame, room for base64 and the rest."""
    return max(1024, framesize // 2)


def servable(work_dir: Path, path: str) -> str:
    """The real path of ``path`` if it is one of the job's result files, else ValueError."""
    root = os.path.realpath(work_dir)
    real = os.path.realpath(path) if os.path.isabs(path) and "\x00" not in path else ""
    inside = os.path.relpath(real, root).split(os.sep) if real else [".."]
    if inside == [FILES_MANIFEST] or (len(inside) == 2 and inside[0] in RESULT_FOLDERS):
        return real
    raise ValueError(f"{path!r} is not a result file of this job (only its collected rows, "
                     f"printed output and files manifest are served)")


def read_chunk(job_id: str, asked: str, real: str, offset: int, size: int) -> p.JobFileChunk:
    """Worker thread: up to ``size`` bytes of the file from ``offset`` on."""
    try:
        with open(real, "rb") as handle:
            total = os.fstat(handle.fileno()).st_size
            if not 0 <= offset <= total:
                raise ValueError(f"offset {offset} is outside the file ({total} bytes)")
            handle.seek(offset)
            data = handle.read(size)
    except FileNotFoundError:
        raise ValueError(f"{asked!r} is not on the JobManager's machine (deleted by job "
                         f"retention, or never brought there)") from None
    return p.JobFileChunk(job_id, asked, offset, total, base64.b64encode(data).decode())
