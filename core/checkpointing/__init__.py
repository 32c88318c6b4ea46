"""Checkpoints of streaming jobs: the coordinator the JobMaster runs, the completed-checkpoint
store and the files on disk. Pure but for ``storage.py``; nothing here talks to a broker or
to Spark. docs/streaming.md says what exists and what is still to come."""

from clusterdeck.core.checkpointing.checkpoints import (
    CheckpointRecord,
    CheckpointStatus,
    CompletedCheckpoint,
    SubtaskAck,
)
from clusterdeck.core.checkpointing.coordinator import CheckpointCoordinator, CheckpointTask
from clusterdeck.core.checkpointing.savepoints import SavepointMetadata, Savepoints
from clusterdeck.core.checkpointing.storage import CheckpointStorage, CheckpointStorageError
from clusterdeck.core.checkpointing.store import CompletedCheckpointStore
from clusterdeck.core.protocol.checkpoints import CheckpointingMode, CheckpointOptions, StateHandle

__all__ = [
    "CheckpointCoordinator",
    "CheckpointOptions",
    "CheckpointRecord",
    "CheckpointStatus",
    "CheckpointStorage",
    "CheckpointStorageError",
    "CheckpointTask",
    "CheckpointingMode",
    "CompletedCheckpoint",
    "CompletedCheckpointStore",
    "SavepointMetadata",
    "Savepoints",
    "StateHandle",
    "SubtaskAck",
]
