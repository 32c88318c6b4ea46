"""The file sink that writes exactly once: output becomes visible only with a completed
checkpoint (two-phase commit, as Flink's ``FileSink``).

Each subtask writes its own files in the sink's folder; only ``part-*`` files are output,
the rest are its work in progress (hidden: their names start with a dot)::

    .part-<subtask>-<n>.<attempt>.inprogress    being written now
    .part-<subtask>-<n>.<attempt>.pending-<c>   closed by checkpoint c's snapshot (phase one)
    part-<subtask>-<n>                          committed: checkpoint c (or a later) completed

``<attempt>`` names the attempt that writes the file: an attempt its TaskManager still
runs after it was replaced (a JobManager failed over, its TaskManager was cut off and
declared lost) never writes into the new attempt's files, and what it leaves is never
committed: it commits only on its JobMaster's word, which goes to the current attempts
alone (the checkpoint coordinator counts only their acknowledgements, and a TaskExecutor
hands a notice only to the attempt it names).

``snapshot(c)`` closes the file being written and names it pending for *c*; the
returned ``SinkState`` (what the checkpoint keeps) lists every file still pending.
``committed(c)`` (the JobMaster said checkpoint *c* completed) renames every pending file
of *c* or older to its ``part-`` name: an aborted checkpoint's files wait for the next
one that completes. ``restore`` starts a subtask again from a completed checkpoint's
state: the files it lists as pending are committed (the checkpoint did complete; the
notice may have been lost with the process), and everything else in progress of this
subtask, written after that checkpoint, is deleted; the next run writes it again. Fenced
by attempt: a restore deletes only its own attempt's work and that of attempts before it
(an earlier epoch, or an earlier attempt in its epoch), never a later one's. A replaced
attempt that starts late (deployed just before its TaskManager was cut off, restoring
after the heal) would otherwise delete the current attempt's files in progress and
pending ones, losing records or failing its next commit.

A rename within one folder is atomic: a reader sees a part file whole or not at all.
Blocking file work: on the task's thread, never an endpoint's main thread.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.protocol.ids import attempt_order


@dataclass(frozen=True)
class PendingFile:
    checkpoint_id: int
    name: str  # the pending file's name in the sink's folder


@dataclass(frozen=True)
class SinkState:
    """A subtask's sink in a checkpoint: the number its next file takes, and the files
    closed for checkpoints not yet known to be complete."""

    subtask: int
    next_file: int
    pending: tuple[PendingFile, ...] = ()


class TwoPhaseFileSink:
    def __init__(self, folder: Path, subtask: int, attempt: str = "a0") -> None:
        """A fresh subtask; ``restore`` for one that resumes from a checkpoint.
        ``attempt``: a short name of the attempt, without dots or slashes."""
        if not re.fullmatch(r"[A-Za-z0-9_-]+", attempt):
            raise ValueError(f"{attempt!r} cannot be part of a file name")
        self.folder = folder
        self.subtask = subtask
        self.attempt = attempt
        self._next_file = 0
        self._pending: list[PendingFile] = []
        self._out: int | None = None  # descriptor of the in-progress file
        self._out_name = ""

    @classmethod
    def restore(cls, folder: Path, state: SinkState, attempt: str = "a0") -> TwoPhaseFileSink:
        sink = cls(folder, state.subtask, attempt)
        sink._next_file = state.next_file
        sink._pending = list(state.pending)
        sink.committed(max((p.checkpoint_id for p in state.pending), default=0))
        kept = {p.name for p in sink._pending}
        for name in sink._earlier_work_in_progress():
            if name not in kept:  # written after the checkpoint: never part of the output
                (folder / name).unlink(missing_ok=True)
        return sink

    def write(self, lines: Iterable[str]) -> None:
        data = "".join(f"{line}\n" for line in lines).encode()
        if not data:
            return
        if self._out is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._out_name = f".part-{self.subtask}-{self._next_file}.{self.attempt}.inprogress"
            self._next_file += 1
            self._out = os.open(self.folder / self._out_name,
                                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(self._out, view):]

    def snapshot(self, checkpoint_id: int) -> SinkState:
        """Phase one: what was written so far is closed, flushed and pending for
        ``checkpoint_id``."""
        if self._out is not None:
            out, self._out = self._out, None
            try:
                os.fsync(out)
            finally:
                os.close(out)
            pending = self._out_name.replace(".inprogress", f".pending-{checkpoint_id}")
            os.replace(self.folder / self._out_name, self.folder / pending)
            self._pending.append(PendingFile(checkpoint_id, pending))
        return SinkState(self.subtask, self._next_file, tuple(self._pending))

    def committed(self, checkpoint_id: int) -> None:
        """Phase two: checkpoint ``checkpoint_id`` completed; its files and older ones
        become output. Repeating it changes nothing."""
        still = []
        for pending in self._pending:
            if pending.checkpoint_id > checkpoint_id:
                still.append(pending)
                continue
            final = self.folder / _final_name(pending.name)
            source = self.folder / pending.name
            if source.exists():
                os.replace(source, final)
            elif not final.exists():
                raise FileNotFoundError(f"pending sink file {pending.name} of checkpoint "
                                        f"{pending.checkpoint_id} is gone from {self.folder}")
        self._pending = still

    def close(self) -> None:
        """The task stops (cancelled or failed): what is in progress stays uncommitted,
        for the next ``restore`` to delete."""
        if self._out is not None:
            out, self._out = self._out, None
            os.close(out)

    def _earlier_work_in_progress(self) -> list[str]:
        """The files in progress or pending of this subtask written by this attempt or an
        earlier one; a name that is no attempt's counts as earlier."""
        pattern = re.compile(
            rf"\.part-{self.subtask}-\d+\.([A-Za-z0-9_-]+)\.(inprogress|pending-\d+)")
        own = attempt_order(self.attempt) or (-1, -1)
        try:
            found = [(entry.name, pattern.fullmatch(entry.name))
                     for entry in os.scandir(self.folder)]
        except FileNotFoundError:
            return []
        return [name for name, match in found
                if match and (attempt_order(match.group(1)) or (-1, -1)) <= own]


def next_free_file(folder: Path, subtask: int) -> int:
    """The number after the highest of any file of ``subtask`` in ``folder``, committed
    or not: where a subtask restored at another parallelism numbers on (an earlier run at
    a larger parallelism may have left files under its number)."""
    pattern = re.compile(rf"\.?part-{subtask}-(\d+)(\..*)?")
    try:
        numbers = [int(found.group(1)) for entry in os.scandir(folder)
                   if (found := pattern.fullmatch(entry.name))]
    except FileNotFoundError:
        return 0
    return max(numbers, default=-1) + 1


def _final_name(pending_name: str) -> str:
    """``.part-3-7.e1a2.pending-12`` -> ``part-3-7``."""
    return pending_name[1:].split(".", 1)[0]
