"""A consumer task's inputs: an input gate over one channel per producer subtask
(Flink's ``SingleInputGate``).

The IO thread puts what each channel receives into that channel's queue (``deliver``); the
task's thread takes one item at a time from whichever channel has something (``poll``),
round-robin over the channels with data so a busy one cannot starve the others. Barrier
alignment holds a channel back with ``block``: its items stay queued, its credit is not
returned, and its producer stops once the credit is used up.

Credit: each channel has ``credits`` slots of its own (Flink's exclusive buffers, with no
floating pool: a slot is a count, not preallocated memory, so reserving it costs nothing
and the bound is the same for every channel, whatever its neighbours do). The producer
sends a data buffer only into a free slot; the slot is free again, and announced, once
the task took the buffer.

Memory per channel, at most: ``credits`` data buffers and ``EVENT_ALLOWANCE`` events
queued (reading pauses beyond that; events need no credit), one frame being decoded and
one read (256 KiB), each buffer at most ``max_buffer_size``; so a gate of n channels holds
at most n x (credits + EVENT_ALLOWANCE + 1) x max_buffer_size + n x 256 KiB.

Locking: one Condition, held to move one item or to read the flags; the task waits on it
in ``poll``, the IO thread notifies it. Credit announcements go back to the IO thread in
one batch per wake-up (``_flush``), never from the task's thread to a socket.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

from clusterdeck.core.streaming.network.channel import (
    DEFAULT_CONNECT_TIMEOUT,
    InputChannel,
    SubpartitionLocation,
)
from clusterdeck.core.streaming.network.errors import ChannelError
from clusterdeck.core.streaming.network.ioloop import IoLoop
from clusterdeck.core.streaming.network.subpartition import BufferKind
from clusterdeck.core.streaming.network.writer import DEFAULT_MAX_BUFFER_SIZE

DEFAULT_CREDITS = 4
EVENT_ALLOWANCE = 16


class Received(NamedTuple):
    """What ``poll`` hands the task: which channel, what kind, the bytes."""

    channel: int
    kind: BufferKind
    payload: bytes


class InputGate:
    """Connects its channels at once (on the IO loop); ``poll`` from the task's thread;
    ``close`` when done."""

    def __init__(self, locations: Sequence[SubpartitionLocation], *,
                 credits: int = DEFAULT_CREDITS,
                 max_buffer_size: int = DEFAULT_MAX_BUFFER_SIZE,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 loop: IoLoop | None = None) -> None:
        """``loop``: the process's IO loop, shared with its ChannelServer (one of the
        gate's own if none, stopped by ``close``)."""
        if not locations or credits < 1:
            raise ValueError("an input gate needs at least one channel and one credit")
        self.loop = loop or IoLoop("stream-input-gate")
        self._owns_loop = loop is None
        count = len(locations)
        self._limit = credits + EVENT_ALLOWANCE  # items queued per channel before pausing
        self._cond = threading.Condition(threading.Lock())
        self._queues: list[deque[tuple[BufferKind, bytes]]] = [deque() for _ in locations]
        self._available: deque[int] = deque()  # unblocked channels with data, each once
        self._listed = [False] * count  # in _available
        self._blocked = [False] * count
        self._ended = [False] * count  # the task took the channel's end of partition
        self._credit_due: dict[int, int] = {}  # channel: taken buffers not yet announced
        self._resume_due: set[int] = set()  # channels that fell under _limit
        self._flush_scheduled = False
        self._failure: ChannelError | None = None
        self._closed = False
        self._channels = [
            InputChannel(self, index, location, credits=credits,
                         max_buffer_size=max_buffer_size, connect_timeout=connect_timeout)
            for index, location in enumerate(locations)]
        for channel in self._channels:
            self.loop.call_soon(channel.start)

    @property
    def channels(self) -> int:
        return len(self._channels)

    # -- the consuming task's thread ----------------------------------------------------

    def poll(self, timeout: float) -> Received | None:
        """The next item of any unblocked channel, or None if none came within
        ``timeout`` seconds (at once when every channel ended). Raises the ChannelError
        of the first channel that failed, as soon as it failed (the task fails with it;
        what other channels queued is not handed out any more)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._available:
                self._raise_if_failed()
                remaining = deadline - time.monotonic()
                if all(self._ended) or remaining <= 0:
                    return None
                self._cond.wait(remaining)
            self._raise_if_failed()
            index = self._available.popleft()
            queue = self._queues[index]
            kind, payload = queue.popleft()
            if queue and not self._blocked[index]:
                self._available.append(index)
            else:
                self._listed[index] = False
            if kind is BufferKind.DATA:
                self._credit_due[index] = self._credit_due.get(index, 0) + 1
            elif kind is BufferKind.END_OF_PARTITION:
                self._ended[index] = True
            if len(queue) == self._limit - 1:
                self._resume_due.add(index)
            schedule = not self._flush_scheduled and bool(self._credit_due or
                                                          self._resume_due)
            self._flush_scheduled = self._flush_scheduled or schedule
        if schedule:
            self.loop.call_soon(self._flush)
        return Received(index, kind, payload)

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise ChannelError(str(self._failure)) from self._failure
        if self._closed:
            raise ChannelError("the input gate is closed")

    def block(self, channel: int) -> None:
        """Hold ``channel`` back (barrier alignment): ``poll`` skips it until ``unblock``."""
        with self._cond:
            self._blocked[channel] = True
            if self._listed[channel]:
                self._available.remove(channel)
                self._listed[channel] = False

    def unblock(self, channel: int) -> None:
        with self._cond:
            self._blocked[channel] = False
            if self._queues[channel] and not self._listed[channel]:
                self._available.append(channel)
                self._listed[channel] = True
                self._cond.notify()

    def ended(self, channel: int) -> bool:
        """The task took the end of partition of ``channel``."""
        with self._cond:
            return self._ended[channel]

    @property
    def finished(self) -> bool:
        """Every channel's end of partition was taken."""
        with self._cond:
            return all(self._ended)

    def queued(self, channel: int) -> int:
        """Items waiting in ``channel`` (tests and metrics)."""
        with self._cond:
            return len(self._queues[channel])

    def close(self) -> None:
        """Drop every connection (a producer not finished sees its consumer gone) and
        stop the gate's own IO loop; later polls raise ChannelError."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()

        async def close_channels() -> None:
            for channel in self._channels:
                channel.close()
        # A shared loop stopped already has taken the sockets with it.
        with contextlib.suppress(RuntimeError):
            self.loop.run(close_channels(), timeout=5.0)
        if self._owns_loop:
            self.loop.stop()

    # -- the IO thread --------------------------------------------------------------------

    def deliver(self, channel: int, kind: BufferKind, payload: bytes) -> bool:
        """Queue what ``channel`` received; False when its queue is full (pause reading)."""
        with self._cond:
            queue = self._queues[channel]
            queue.append((kind, payload))
            if not self._listed[channel] and not self._blocked[channel]:
                self._available.append(channel)
                self._listed[channel] = True
                self._cond.notify()
            return len(queue) < self._limit

    def fail(self, channel: int, error: ChannelError) -> None:
        """``channel`` failed: the next poll raises ``error`` (the first failure counts)."""
        with self._cond:
            if self._failure is None and not self._closed:
                self._failure = error
            self._cond.notify_all()

    def _flush(self) -> None:
        """Announce the credit the task freed and resume the channels it drained."""
        with self._cond:
            due, self._credit_due = self._credit_due, {}
            resume, self._resume_due = self._resume_due, set()
            self._flush_scheduled = False
        for index, credit in due.items():
            self._channels[index].announce(credit)
        for index in resume:
            self._channels[index].resume()
