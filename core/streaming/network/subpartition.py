"""One result subpartition: the bounded queue between a producing task and the
connection that serves it to one consumer subtask (Flink's ``PipelinedSubpartition``).

The task's thread appends data buffers and events (``add``); the IO thread takes what may
be sent (``take_sendable``): an event whenever it is at the head, a data buffer only while
the consumer has credit. Events share the queue with the data, so they never overtake a
buffer queued before them.

Bounds, per subpartition: at most ``capacity`` data buffers and ``EVENT_CAPACITY`` events
queued, each at most the partition's ``max_buffer_size``; a full queue makes ``add`` wait
(that wait is the backpressure that reaches the source). Credit is the consumer's count of
free slots; the producer never sends a data buffer beyond it.

Locking: one Condition per subpartition, held only to move one item or count credit (never
while writing to a socket or calling out); emitters wait on it for room, the IO thread
notifies it when it took an item or the subpartition failed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from enum import Enum
from typing import Protocol

from clusterdeck.core.streaming.network.errors import (
    ChannelCancelled,
    ChannelError,
    ChannelTimeout,
)

EVENT_CAPACITY = 16  # events queued per subpartition at most (barriers are rare)
CANCEL_POLL = 0.05  # seconds: how often a waiting emitter looks at its cancellation


class BufferKind(Enum):
    """What a channel carries, in the order it was produced."""

    DATA = "data"
    EVENT = "event"
    END_OF_PARTITION = "end-of-partition"


class SubpartitionReader(Protocol):
    """The connection serving a subpartition, as the subpartition sees it; both methods
    are called from any thread and hop to the IO thread themselves."""

    def wake(self) -> None:
        """Something became sendable: take it."""

    def abort(self, error: ChannelError) -> None:
        """The subpartition failed: tell the consumer and close."""


class ResultSubpartition:
    """The queue of one subpartition and its consumer's credit."""

    def __init__(self, partition_id: str, index: int, capacity: int) -> None:
        self.partition_id = partition_id
        self.index = index
        self.capacity = capacity
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[tuple[BufferKind, bytes]] = deque()
        self._data = 0  # data buffers in _queue
        self._events = 0  # events and the end of partition in _queue
        self._credit = 0  # data buffers the consumer can take now
        self._reader: SubpartitionReader | None = None
        self._starved = False  # the reader found nothing sendable: wake it for the next
        self._ended = False  # the end of partition was queued: nothing more may be added
        self._failure: ChannelError | None = None

    def __str__(self) -> str:
        return f"subpartition {self.index} of partition {self.partition_id}"

    # -- the producing task's thread ------------------------------------------------------

    def add(self, kind: BufferKind, payload: bytes, deadline: float,
            cancelled: Callable[[], bool]) -> None:
        """Queue one item after everything queued before it, waiting for room until
        ``deadline`` (monotonic seconds). Raises ChannelError if the subpartition failed,
        ChannelTimeout at the deadline, ChannelCancelled once ``cancelled()``."""
        with self._cond:
            while True:
                if self._failure is not None:
                    raise ChannelError(str(self._failure)) from self._failure
                if self._ended:
                    raise ChannelError(f"{self} has ended: nothing can be added after its "
                                       f"end of partition")
                if self._has_room(kind):
                    break
                if cancelled():
                    raise ChannelCancelled(f"cancelled while waiting for room in {self}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChannelTimeout(f"{self}: its consumer took nothing for the whole "
                                         f"timeout ({self.capacity} buffers queued)")
                self._cond.wait(min(remaining, CANCEL_POLL))
            self._queue.append((kind, payload))
            if kind is BufferKind.DATA:
                self._data += 1
            else:
                self._events += 1
                self._ended = kind is BufferKind.END_OF_PARTITION
            reader = self._reader if self._starved and self._sendable() else None
            if reader is not None:
                self._starved = False
        if reader is not None:
            reader.wake()

    def _has_room(self, kind: BufferKind) -> bool:
        if kind is BufferKind.DATA:
            return self._data < self.capacity
        return self._events < EVENT_CAPACITY

    def queued(self) -> int:
        """Items queued now (for tests and metrics: the bound is ``capacity`` +
        ``EVENT_CAPACITY``)."""
        with self._cond:
            return len(self._queue)

    # -- the IO thread ------------------------------------------------------------------

    def attach(self, reader: SubpartitionReader) -> None:
        """A consumer's connection serves this subpartition from now on; raises
        ChannelError if one already does or it failed (a subpartition is read once)."""
        with self._cond:
            if self._failure is not None:
                raise ChannelError(str(self._failure))
            if self._reader is not None:
                raise ChannelError(f"{self} is already being consumed")
            self._reader = reader
            self._starved = True

    def add_credit(self, count: int) -> None:
        with self._cond:
            self._credit += count

    def take_sendable(self) -> tuple[BufferKind, bytes] | None:
        """The next item the reader may send now, or None (then it is woken when there
        is one: by ``add``, or by the reader itself when credit arrives)."""
        with self._cond:
            if not self._sendable():
                self._starved = True
                return None
            kind, payload = self._queue.popleft()
            if kind is BufferKind.DATA:
                self._data -= 1
                self._credit -= 1
            else:
                self._events -= 1
            self._cond.notify()  # the emitter waiting for room, if any
            return kind, payload

    def _sendable(self) -> bool:
        return bool(self._queue) and (self._queue[0][0] is not BufferKind.DATA
                                      or self._credit > 0)

    # -- any thread -----------------------------------------------------------------------

    def fail(self, error: ChannelError) -> None:
        """The subpartition cannot go on: what is queued is dropped, waiting and later
        emitters raise ``error``, and its consumer is told. The first failure counts."""
        with self._cond:
            if self._failure is not None:
                return
            self._failure = error
            self._queue.clear()
            self._data = self._events = 0
            reader = self._reader
            self._cond.notify_all()
        if reader is not None:
            reader.abort(error)

    @property
    def failure(self) -> ChannelError | None:
        with self._cond:
            return self._failure
