"""The producing task's side of one result partition (Flink's ``ResultPartitionWriter``).

A partition has one subpartition per consumer subtask; the task emits each data buffer to
the subpartition its partitioner chose, and broadcasts events (barriers, cancel markers)
to all. All of it runs on the task's own thread; the ChannelServer's IO thread takes what
it may send from each subpartition (subpartition.py).

Memory: at most ``subpartitions`` x (``buffers_per_channel`` + EVENT_CAPACITY) x
``max_buffer_size`` bytes queued here, whatever the consumers do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from clusterdeck.core.streaming.network.errors import ChannelError
from clusterdeck.core.streaming.network.subpartition import BufferKind, ResultSubpartition

DEFAULT_BUFFERS_PER_CHANNEL = 8
DEFAULT_MAX_BUFFER_SIZE = 1024 * 1024
# Backpressure may last as long as a consumer is slow or aligning, so the default is long;
# a cancelled task stops waiting within CANCEL_POLL, not at the timeout.
DEFAULT_EMIT_TIMEOUT = 300.0


class ResultPartitionWriter:
    """Made by ``ChannelServer.register``; serves its subpartitions until every one sent
    its end of partition to its consumer, or until ``release``."""

    def __init__(self, partition_id: str, subpartitions: int, *,
                 buffers_per_channel: int = DEFAULT_BUFFERS_PER_CHANNEL,
                 max_buffer_size: int = DEFAULT_MAX_BUFFER_SIZE,
                 cancelled: Callable[[], bool] = lambda: False,
                 on_done: Callable[[ResultPartitionWriter], None] = lambda _: None) -> None:
        """``cancelled``: asked while ``emit`` waits for room, so a cancelled task stops
        waiting; ``on_done``: called once, from any thread, when the partition needs
        serving no more (the server forgets it)."""
        if subpartitions < 1 or buffers_per_channel < 1 or max_buffer_size < 1:
            raise ValueError("a partition needs at least one subpartition, one buffer per "
                             "channel and a positive buffer size")
        self.partition_id = partition_id
        self.max_buffer_size = max_buffer_size
        self._subpartitions = [ResultSubpartition(partition_id, index, buffers_per_channel)
                               for index in range(subpartitions)]
        self._cancelled = cancelled
        self._on_done = on_done
        self._lock = threading.Lock()  # guards _delivered and _done only
        self._delivered: set[int] = set()
        self._done = False

    @property
    def subpartitions(self) -> int:
        return len(self._subpartitions)

    def subpartition(self, index: int) -> ResultSubpartition:
        return self._subpartitions[index]

    # -- the producing task's thread ----------------------------------------------------

    def emit(self, subpartition: int, payload: bytes,
             timeout: float = DEFAULT_EMIT_TIMEOUT) -> None:
        """Queue one data buffer for ``subpartition``, waiting while it holds
        ``buffers_per_channel`` already. Raises ValueError for a buffer over
        ``max_buffer_size``, ChannelTimeout, ChannelCancelled, or the ChannelError that
        failed the partition (a consumer gone, the partition released)."""
        if len(payload) > self.max_buffer_size:
            raise ValueError(f"a buffer of {len(payload)} bytes for partition "
                             f"{self.partition_id}: at most {self.max_buffer_size} (split "
                             f"the records over several buffers)")
        self._subpartitions[subpartition].add(BufferKind.DATA, payload,
                                              time.monotonic() + timeout, self._cancelled)

    def broadcast_event(self, event: bytes, timeout: float = DEFAULT_EMIT_TIMEOUT) -> None:
        """Queue ``event`` in every subpartition after what is queued there; it needs no
        credit, so a consumer gets it as soon as it took the data before it."""
        if len(event) > self.max_buffer_size:
            raise ValueError(f"an event of {len(event)} bytes for partition "
                             f"{self.partition_id}: at most {self.max_buffer_size}")
        self._broadcast(BufferKind.EVENT, event, timeout)

    def finish(self, timeout: float = DEFAULT_EMIT_TIMEOUT) -> None:
        """The end of partition on every subpartition: nothing may be emitted after it.
        Returns once it is queued; it reaches each consumer after all that came before."""
        self._broadcast(BufferKind.END_OF_PARTITION, b"", timeout)

    def _broadcast(self, kind: BufferKind, payload: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for subpartition in self._subpartitions:
            subpartition.add(kind, payload, deadline, self._cancelled)

    # -- any thread ---------------------------------------------------------------------

    def release(self, reason: str = "the producing task released it") -> None:
        """Give the partition up (the task failed or was cancelled): queued buffers are
        dropped, connected consumers get an error naming ``reason``, the server forgets
        the partition. Nothing happens if every consumer already got its end."""
        self.fail(ChannelError(f"partition {self.partition_id} was released: {reason}"))

    def fail(self, error: ChannelError) -> None:
        """Fail every subpartition with ``error`` (one consumer gone fails the partition:
        as in Flink, the producer and its consumers fail over together)."""
        with self._lock:
            if self._done:
                return
            self._done = True
        for subpartition in self._subpartitions:
            subpartition.fail(error)
        self._on_done(self)

    @property
    def failure(self) -> ChannelError | None:
        """The first failure of a subpartition, if any."""
        return next((s.failure for s in self._subpartitions if s.failure is not None), None)

    @property
    def delivered(self) -> bool:
        """Every subpartition sent its end of partition to its consumer."""
        with self._lock:
            return len(self._delivered) == len(self._subpartitions)

    # -- the IO thread --------------------------------------------------------------------

    def subpartition_delivered(self, index: int) -> None:
        """The end of partition of ``index`` was written to its consumer's connection."""
        with self._lock:
            self._delivered.add(index)
            last = len(self._delivered) == len(self._subpartitions) and not self._done
            if last:
                self._done = True
        if last:
            self._on_done(self)
