"""The snapshot a restored streaming subtask starts from, for a TaskManager that does not
share the JobManager's work dir (another machine).

Every acknowledged snapshot is on the JobManager's machine: its JobMaster fetched it from
the TaskManager that wrote it before counting the acknowledgement. A subtask restored on a
TaskManager that cannot see that snapshot asks its JobMaster for it a chunk at a time
(``RequestStateChunk``) before it starts, and keeps it where it would have been; the
restore then checks its size and sha256 as for any snapshot. Runs on the slot thread,
where a blocking ask is fine.
"""

from __future__ import annotations

import base64
import logging

from clusterdeck.core.checkpointing import CheckpointStorage, CheckpointStorageError
from clusterdeck.core.checkpointing.storage import write_whole
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.gateways import JobMasterGateway

log = logging.getLogger(__name__)


def fetch_restore_state(deployment: p.SubmitTask, storage: CheckpointStorage,
                        jobmaster: JobMasterGateway) -> None:
    """Bring the deployment's snapshot here if it is not; nothing for a fresh start."""
    handle = deployment.restore_state
    if handle is None:
        return
    path = storage.state_file(deployment.job_id, handle)
    if path.is_file():
        return
    pieces: list[bytes] = []
    got = 0
    while got < handle.size or not pieces:
        chunk = jobmaster.request_state_chunk(p.RequestStateChunk(
            deployment.job_id, deployment.attempt_id, deployment.restore_checkpoint,
            got)).result()
        data = base64.b64decode(chunk.data, validate=True)
        if chunk.offset != got or chunk.total != handle.size \
                or len(data) > handle.size - got or (not data and got < handle.size):
            raise CheckpointStorageError(
                f"snapshot {handle.path} came from the JobManager as {chunk.total} bytes "
                f"from {chunk.offset} ({len(data)} in this chunk), not {handle.size} from "
                f"{got}")
        pieces.append(data)
        got += len(data)
    write_whole(path, b"".join(pieces))
    log.info("%s: snapshot %s fetched from the JobManager (%d bytes)", deployment.attempt_id,
             handle.path, got)
