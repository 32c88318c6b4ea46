"""The snapshot a restored streaming subtask starts from, for a TaskManager that does not
share the JobManager's work dir (another machine).

Every acknowledged snapshot is on the JobManager's machine: its JobMaster fetched it from
the TaskManager that wrote it before counting the acknowledgement. A subtask restored on a
TaskManager that cannot see that snapshot asks its JobMaster for it a chunk at a time
(``RequestStateChunk``) before it starts, and keeps it where it would have been, and so
for each shared file its handle names (the rocksdb state backend's base and deltas); the
restore then checks their sizes and sha256 as for any snapshot. Runs on the slot thread,
where a blocking ask is fine.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path

from clusterdeck.core.checkpointing import CheckpointStorage, CheckpointStorageError
from clusterdeck.core.checkpointing.storage import atomic_file
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpoints import SharedStateFile, StateHandle
from clusterdeck.core.protocol.gateways import JobMasterGateway
from clusterdeck.core.protocol.ids import subtask_id

log = logging.getLogger(__name__)


def fetch_restore_state(deployment: p.SubmitTask, storage: CheckpointStorage,
                        jobmaster: JobMasterGateway) -> None:
    """Bring the deployment's snapshot, and the shared files its handle names (the rocksdb
    state backend's chain), here if they are not; nothing for a fresh start."""
    handle = deployment.restore_state
    if handle is None:
        return
    _fetch(deployment, storage.state_file(deployment.job_id, handle), handle, "", jobmaster)
    for file in handle.shared:
        _fetch(deployment, storage.shared_file(deployment.job_id, file,
                                               subtask_id(deployment.vertex_id,
                                                          deployment.subtask)),
               file, file.path, jobmaster)


def _fetch(deployment: p.SubmitTask, path: Path, handle: StateHandle | SharedStateFile,
           shared: str, jobmaster: JobMasterGateway) -> None:
    """One file, chunk by chunk into a temporary file renamed once whole (a base of the
    rocksdb backend may be larger than memory)."""
    if path.is_file():
        return
    got, asked = 0, False
    with atomic_file(path) as out:
        while got < handle.size or not asked:
            asked = True
            chunk = jobmaster.request_state_chunk(p.RequestStateChunk(
                deployment.job_id, deployment.attempt_id, deployment.restore_checkpoint,
                got, shared)).result()
            data = base64.b64decode(chunk.data, validate=True)
            if chunk.offset != got or chunk.total != handle.size \
                    or len(data) > handle.size - got or (not data and got < handle.size):
                raise CheckpointStorageError(
                    f"snapshot {handle.path} came from the JobManager as {chunk.total} "
                    f"bytes from {chunk.offset} ({len(data)} in this chunk), not "
                    f"{handle.size} from {got}")
            out.write(data)
            got += len(data)
    log.info("%s: snapshot %s fetched from the JobManager (%d bytes)", deployment.attempt_id,
             handle.path, got)
