"""The print sink of a streaming job (Flink's ``DataStream.print()``): each record as a
line of the task's printed output, which ``clusterdeck submit`` shows as it comes and the
job's result names, as a PySpark script's ``print`` is.

With a parallelism above 1 each line starts with the subtask's number from 1 (``2> ...``),
as Flink prints it. Lines are printed when their batch has gone through the operators,
not when a checkpoint completes: **at least once**. After a failover the records since
the last completed checkpoint are read and printed again; nothing is lost.

The attempt's output file (``<work dir>/output/<attempt>.stdout``) gets every byte as it
is printed, and ``feed`` (the task's live output, core/engine/liveoutput.py) the same text,
so the feed's byte offsets are the file's. An unbounded stream's file grows for as long
as it runs, as a Flink TaskManager's ``.out`` file does. The sink keeps only the end of
what it printed (``tail``) in memory. Written on the task's slot thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

TAIL_CHARS = 16 * 1024


class PrintSink:
    def __init__(self, path: Path, subtask: int, parallelism: int,
                 feed: Callable[[str], None] | None = None) -> None:
        self.path = path
        self._prefix = f"{subtask + 1}> " if parallelism > 1 else ""
        self._feed = feed
        self._out: int | None = None
        self._tail = ""
        self.printed = 0  # bytes

    def write(self, lines: Iterable[str]) -> None:
        text = "".join(f"{self._prefix}{line}\n" for line in lines)
        if not text:
            return
        data = text.encode("utf-8", "replace")  # as the live feed counts it
        if self._out is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._out = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                                0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(self._out, view):]
        self.printed += len(data)
        if self._feed is not None:
            self._feed(text)
        self._tail = (self._tail + text)[-TAIL_CHARS:]

    def snapshot(self, checkpoint_id: int) -> None:
        """Nothing to keep: what was printed stays printed."""
        return None

    def committed(self, checkpoint_id: int) -> None:
        """Nothing waits for a checkpoint."""

    def close(self) -> None:
        if self._out is not None:
            out, self._out = self._out, None
            os.close(out)

    @property
    def tail(self) -> str:
        """The end of what was printed (at most ``TAIL_CHARS`` characters)."""
        return self._tail
