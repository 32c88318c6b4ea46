"""The state inspector: a streaming job's keyed state as a checkpoint or a savepoint holds
it, read from the checkpoint storage without the job (Flink's State Processor API, read
only): sizes per vertex and subtask, keys and values paged and searched, the biggest
keys, growth across retained checkpoints, and the difference of two snapshots. Every
query streams the entries (the embedded backend's chain is merged file by file, as the
materialisation of a base reads it); only a heap snapshot, one JSON document per
subtask, is read whole, as its restore reads it. docs/state-inspector.md shows it."""

from clusterdeck.core.stateinspector.entries import Entry, subtask_entries
from clusterdeck.core.stateinspector.queries import (
    Change,
    DiffPage,
    KeyPage,
    SubtaskSize,
    diff,
    growth,
    keys,
    sizes,
    top,
)
from clusterdeck.core.stateinspector.snapshots import (
    InspectorError,
    Snapshot,
    open_checkpoint,
    open_savepoint,
    retained_checkpoints,
)

__all__ = [
    "Change",
    "DiffPage",
    "Entry",
    "InspectorError",
    "KeyPage",
    "Snapshot",
    "SubtaskSize",
    "diff",
    "growth",
    "keys",
    "open_checkpoint",
    "open_savepoint",
    "retained_checkpoints",
    "sizes",
    "subtask_entries",
    "top",
]
