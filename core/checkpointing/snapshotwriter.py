"""The asynchronous part of a streaming task's snapshots (Flink's async phase of a
checkpoint): the task copies its state into plain data between two batches (the
synchronous part), sends its barrier on and goes back to its records, while this writer
encodes the copy as JSON and writes it to the checkpoint storage on a worker thread.
Only when the file is whole does the task acknowledge. A task with the embedded state
backend hands over its keyed state's change log as well: uploaded here as a delta
(changelog.py), its chain of shared files named by the snapshot's handle. A chain
grown too long is materialised into a new base on a thread of its own (a merge of files
that may take seconds for large state: the snapshots go on meanwhile), which hands the
base back to the writer thread; the next snapshot names it.

Each outcome (the state's handle, or why it could not be written) comes back as a
``SnapshotWritten`` put on the task's own inbox, so the task reports it from its thread.
Writes run one at a time, in order; at most ``MAX_PENDING`` wait, so a storage slower
than the checkpoint interval makes the task decline new checkpoints instead of holding
ever more copies of its state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from clusterdeck.core.checkpointing.changelog import (
    Changes,
    IncrementalSnapshots,
    MaterialisedBase,
)
from clusterdeck.core.checkpointing.storage import CheckpointStorage
from clusterdeck.core.protocol.checkpoints import SharedStateFile, StateHandle

log = logging.getLogger(__name__)

MAX_PENDING = 2
"""Snapshots of one task being written at once at most (one writing, one waiting)."""


@dataclass(frozen=True)
class SnapshotWritten:
    """A snapshot's outcome, on the task's inbox: its ``handle``, or ``error``.
    ``started`` is the monotonic time its synchronous part began."""

    checkpoint_id: int
    alignment: float
    started: float
    handle: StateHandle | None = None
    error: str = ""


class SnapshotWriter:
    """Writes one task's snapshots on a worker thread, reporting to ``inbox``."""

    def __init__(self, storage: CheckpointStorage, job_id: str, subtask_id: str,
                 inbox: queue.SimpleQueue[Any]) -> None:
        self.storage = storage
        self._job_id = job_id
        self._subtask_id = subtask_id
        self._inbox = inbox
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"snapshot {subtask_id}")
        self.pending = 0  # counted on the task's thread: submitted, outcome not yet taken
        self.incremental = IncrementalSnapshots(storage, job_id, subtask_id)  # worker's
        self._materialiser = ThreadPoolExecutor(1, thread_name_prefix=f"materialise "
                                                                      f"{subtask_id}")
        self._materialising = False  # the worker's: a base is being built

    def submit(self, checkpoint_id: int, state: dict[str, Any], alignment: float,
               started: float, changes: Changes | None = None) -> str:
        """Start writing ``state`` (which nobody changes any more) and the keyed state's
        ``changes`` since the last snapshot (with the embedded backend); "" when under
        way, else why not (then no outcome comes, and the caller keeps the changes)."""
        if self.pending >= MAX_PENDING:
            return (f"{self.pending} earlier snapshots are still being written (the "
                    "checkpoint storage is slower than the checkpoint interval)")
        self.pending += 1
        self._pool.submit(self._write, checkpoint_id, state, alignment, started, changes)
        return ""

    def taken(self) -> None:
        """The task took an outcome off its inbox."""
        self.pending -= 1

    def close(self) -> None:
        """No more snapshots: a write under way finishes (its outcome unread), the
        waiting ones are dropped."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._materialiser.shutdown(wait=False, cancel_futures=True)

    def _write(self, checkpoint_id: int, state: dict[str, Any], alignment: float,
               started: float, changes: Changes | None) -> None:
        """On the worker thread: upload the changes, encode, write, put the outcome on
        the inbox; then start materialising a new base if the chain grew too long."""
        try:
            shared = () if changes is None else self.incremental.write(checkpoint_id,
                                                                        changes)
            data = json.dumps(state).encode()
            handle = self.storage.write_state(self._job_id, checkpoint_id,
                                               self._subtask_id, data)
            outcome = SnapshotWritten(checkpoint_id, alignment, started,
                                      dataclasses.replace(handle, shared=shared))
        except Exception as error:  # whatever it is, the task declines saying so
            outcome = SnapshotWritten(checkpoint_id, alignment, started,
                                      error=f"its snapshot could not be written: {error}")
        self._inbox.put(outcome)
        if changes is not None and not self._materialising \
                and self.incremental.materialisation_due():
            self._materialising = True
            with contextlib.suppress(RuntimeError):  # closed meanwhile: nobody needs it
                self._materialiser.submit(self.incremental.build_base,
                                          self.incremental.chain).add_done_callback(self._built)

    def _built(self, built: Future[MaterialisedBase]) -> None:
        """On the materialising thread: the base goes to the worker thread."""
        with contextlib.suppress(RuntimeError):  # closed meanwhile: nobody needs it
            self._pool.submit(self._take_base, built)

    def _take_base(self, built: Future[MaterialisedBase]) -> None:
        self._materialising = False
        if built.cancelled():
            return
        error = built.exception()
        if error is not None:  # the chain stays as it was: restores read more files
            log.warning("%s: keyed state not materialised: %s", self._subtask_id, error)
            return
        self.incremental.materialised(built.result())

    def restored(self, chain: tuple[SharedStateFile, ...]) -> None:
        """The task restored its keyed state from ``chain`` (before its first snapshot)."""
        self._pool.submit(self.incremental.restored, chain).result()
