"""How many records an attempt read and wrote: final once its Spark jobs ran, and so far
while they run, for the live numbers on the ExecutionGraph (docs/metrics.md).

Spark brings an accumulator's additions to the driver as each of its tasks (a partition)
ends, so reading an accumulator while a job runs gives the records of the partitions
done so far, at no cost. A count that needs a Spark job of its own (a table nobody
decoded) is taken only at the end: live numbers must never start Spark work.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any


class Tally:
    """A record count: ``tally()`` is final (call after the Spark jobs), ``so_far()`` is
    what an accumulator holds now (0 when the count is only known at the end)."""

    def __init__(self, final: Callable[[], int], counter: Any = None) -> None:
        self._final = final
        self._counter = counter

    def __call__(self) -> int:
        return self._final()

    def so_far(self) -> int:
        return int(self._counter.value) if self._counter is not None else 0


def so_far(counts: Iterable[Callable[[], int]]) -> int:
    """The records counted so far by those of ``counts`` that can tell without a job."""
    return sum(count.so_far() for count in counts if isinstance(count, Tally))


class LiveCounts:
    """One attempt's records and bytes so far, where its run keeps them (its result takes
    its records from here): written by its slot thread, read by the TaskManager's main
    thread. Each field is one int (or one tuple) replaced whole, so a
    reader sees each whole; the four need not be from the same instant.

    A streaming attempt also tells ``backpressured``, the seconds so far its sends waited
    for its consumers to take buffers (read live from its output through
    ``consumers_waited``, so a wait of many seconds shows as it goes on, not when it
    ends), and keeps ``watermark``, the one it last sent on (a sink's: its input
    watermark; ``math.inf`` once event time is over; None while it has none).

    ``workers()``: the processes and threads running it now, (pid, native thread id or 0
    for the whole process)."""

    def __init__(self) -> None:
        self.records_in = 0    # of the batches done
        self.records_out = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.reading: tuple[Callable[[], int], ...] = ()  # the batch running now
        self.writing: tuple[Callable[[], int], ...] = ()
        self.idle = 0.0  # seconds a long-running (streaming) attempt waited for work
        self.consumers_waited: Callable[[], float] | None = None  # its output's wait
        self.watermark: float | None = None  # event time in seconds; math.inf: over
        # Where it runs, for a flame graph of its vertex (docs/profiling.md): its slot
        # thread as (pid, native thread id), set as that thread takes it up; and the pid of
        # the Spark Python worker running its batches now (a streaming attempt's
        # long-lived Spark task; None while it has none)
        self.slot_thread: tuple[int, int] | None = None
        self.spark_worker: Callable[[], int | None] | None = None

    @property
    def backpressured(self) -> float:
        """Seconds a streaming attempt waited for its consumers so far (0: none)."""
        return self.consumers_waited() if self.consumers_waited is not None else 0.0

    def workers(self) -> tuple[tuple[int, int], ...]:
        """Its slot thread and its Spark Python worker, those it has now."""
        held = [self.slot_thread] if self.slot_thread is not None else []
        worker = self.spark_worker() if self.spark_worker is not None else None
        if worker is not None:
            held.append((worker, 0))
        return tuple(held)

    def now(self) -> tuple[int, int, int, int]:
        """(records in, records out, bytes in, bytes out) so far."""
        reading, writing = self.reading, self.writing
        return (self.records_in + so_far(reading), self.records_out + so_far(writing),
                self.bytes_in, self.bytes_out)


def size_of(paths: Sequence[str]) -> int:
    """Bytes of the files and folder trees named (what is gone counts 0)."""
    total = 0
    for path in paths:
        if os.path.isdir(path):
            for folder, _, names in os.walk(path):
                total += size_of([os.path.join(folder, name) for name in names])
        else:
            with contextlib.suppress(OSError):
                total += os.path.getsize(path)
    return total
