"""One input channel of a consumer: a connection to the TaskManager that serves one
subpartition it reads (Flink's ``RemoteInputChannel`` with its ``PartitionRequestClient``).

It asks for the subpartition with a hello carrying the capability, announces its credit
(the free buffer slots the gate keeps for it), and hands every frame to its gate in the
order it came. A producer that sends a data buffer beyond the credit breaks the protocol:
the channel fails rather than buffer it.

Connecting: a partition not registered yet at the producer (it answers a retryable error,
Flink's PartitionNotFound) and a refused connection (its server not listening yet) are
asked again with a backoff of 50 ms doubling to 1 s, until ``connect_timeout`` after the
first try; then the channel fails naming the last answer. Everything else fails at once.

Runs on the IO thread only; the gate calls ``announce``, ``resume`` and ``close`` there.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterdeck.core.streaming.network import frames, tls
from clusterdeck.core.streaming.network.errors import ChannelError
from clusterdeck.core.streaming.network.frames import (
    Credit,
    DataBuffer,
    EndOfPartition,
    ErrorFrame,
    Event,
    FrameDecoder,
    FrameError,
    Hello,
)
from clusterdeck.core.streaming.network.subpartition import BufferKind

if TYPE_CHECKING:
    from clusterdeck.core.streaming.network.gate import InputGate

log = logging.getLogger(__name__)

FIRST_BACKOFF = 0.05
MAX_BACKOFF = 1.0
DEFAULT_CONNECT_TIMEOUT = 60.0  # taskmanager.data.connect-timeout's default


@dataclass(frozen=True)
class SubpartitionLocation:
    """What a consumer subtask is told about one of its inputs: where the subpartition is
    served and the capability that opens it (the JobMaster makes it from the producing
    TaskManager's data key, ``server.partition_capability``)."""

    host: str
    port: int
    partition_id: str
    subpartition: int
    capability: str
    fingerprint: str = ""  # the producer's TLS certificate; "" for plain TCP (loopback)
    taskmanager_id: str = ""  # the producer's, to name it when the channel breaks
    consumer: str = ""  # this side's TaskManager, told to the producer in the hello

    def __str__(self) -> str:
        where = f"{self.host}:{self.port}" + (f" on {self.taskmanager_id}"
                                              if self.taskmanager_id else "")
        return f"subpartition {self.subpartition} of partition {self.partition_id} at {where}"

    @property
    def producer(self) -> str:
        return f"the producer's TaskManager {self.taskmanager_id}" if self.taskmanager_id \
            else "the producer"


class InputChannel(asyncio.Protocol):
    """The connection of channel ``index`` of ``gate``; one protocol object for all of
    its connection attempts, one connection at a time."""

    def __init__(self, gate: InputGate, index: int, location: SubpartitionLocation, *,
                 credits: int, max_buffer_size: int, connect_timeout: float) -> None:
        self.index = index
        self.location = location
        self._gate = gate
        self._loop = gate.loop.loop
        self._credits = credits
        self._max_buffer_size = max_buffer_size
        self._connect_timeout = connect_timeout
        self._transport: asyncio.Transport | None = None
        self._decoder = self._new_decoder()
        self._outstanding = 0  # credit announced and not used by a buffer yet
        self._retry = ""  # why this connection ends in another try, if it does
        self._deadline = 0.0  # of connecting, loop time
        self._backoff = FIRST_BACKOFF  # before the next try after a retryable refusal
        self._ended = False
        self._closed = False  # failed, or closed by the gate
        self._connecting: asyncio.Task[None] | None = None

    def __str__(self) -> str:
        return f"channel {self.index} ({self.location})"

    def _new_decoder(self) -> FrameDecoder:
        body = max(self._max_buffer_size, 4 * frames.MAX_REASON + 1)
        return FrameDecoder(body, frames.PRODUCER_KINDS)

    # -- connecting -------------------------------------------------------------------------

    def start(self) -> None:
        self._deadline = self._loop.time() + self._connect_timeout
        self._connecting = self._loop.create_task(self._connect("", 0.0))

    async def _connect(self, why: str, delay: float) -> None:
        """Until connected or ``_deadline``: a refused connection is tried again. Failed
        at the deadline, the producer's TaskManager is called unreachable when its last
        try got no connection (not when it answered that the partition is not there)."""
        context = tls.client_context() if self.location.fingerprint else None
        delay = delay or FIRST_BACKOFF
        unanswered = False
        while not self._closed:
            await asyncio.sleep(min(delay, max(0.0, self._deadline - self._loop.time()))
                                if why else 0.0)
            remaining = self._deadline - self._loop.time()
            if remaining <= 0:
                self._fail(f"nothing served within {self._connect_timeout:g} s: {why}",
                           unreachable=unanswered)
                return
            try:
                await asyncio.wait_for(self._loop.create_connection(
                    lambda: self, self.location.host, self.location.port, ssl=context,
                    server_hostname=self.location.host if context else None), remaining)
                return
            except (OSError, ssl.SSLError, TimeoutError) as error:
                why, unanswered = f"{type(error).__name__}: {error}", True
            delay = min(2 * delay, MAX_BACKOFF)

    # -- the connection ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self._closed:
            transport.abort()
            return
        if self.location.fingerprint and not tls.pinned(transport, self.location.fingerprint):
            self._fail("the producer showed a certificate other than the one it registered")
            return
        self._decoder = self._new_decoder()
        self._outstanding = self._credits
        transport.write(frames.encode(Hello(
            self.location.partition_id, self.location.subpartition,
            self.location.capability, self._max_buffer_size,
            consumer=self.location.consumer)) + frames.encode(
            Credit(self._credits)))

    def data_received(self, data: bytes) -> None:
        if self._closed or self._ended or self._retry:
            return
        try:
            received = self._decoder.feed(data)
        except FrameError as error:
            self._fail(f"malformed frame from the producer: {error}")
            return
        for frame in received:
            if self._closed or self._ended or self._retry:
                return
            self._on_frame(frame)

    def _on_frame(self, frame: frames.Frame) -> None:
        keep_reading = True
        if isinstance(frame, DataBuffer):
            if self._outstanding <= 0:
                self._fail("the producer sent a buffer without credit")
                return
            self._outstanding -= 1
            keep_reading = self._gate.deliver(self.index, BufferKind.DATA, frame.payload)
        elif isinstance(frame, Event):
            keep_reading = self._gate.deliver(self.index, BufferKind.EVENT, frame.payload)
        elif isinstance(frame, EndOfPartition):
            self._ended = True
            self._gate.deliver(self.index, BufferKind.END_OF_PARTITION, b"")
        elif isinstance(frame, ErrorFrame):
            if frame.retryable:
                self._retry = frame.reason  # a fresh connection once this one is closed
                assert self._transport is not None
                self._transport.close()
            else:
                self._fail(f"the producer refused: {frame.reason}")
            return
        if not keep_reading and self._transport is not None:
            self._transport.pause_reading()  # resumed by the gate once the task took some

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._retry and not self._closed:
            why, self._retry = self._retry, ""
            log.debug("stream network: %s: %s; asking again", self, why)
            self._backoff = min(2 * self._backoff, MAX_BACKOFF)
            self._connecting = self._loop.create_task(self._connect(why, self._backoff))
        elif not self._ended and not self._closed:
            # as Flink's RemoteTransportException: the peer is the likely cause, say so
            self._fail(f"the connection to {self.location.producer} was lost before the end "
                       f"of partition ({exc or 'closed by the peer'}): was it lost?")

    # -- the gate, on the IO thread ---------------------------------------------------------

    def announce(self, credit: int) -> None:
        """The task took ``credit`` buffers of this channel: their slots are free again."""
        if self._transport is None or self._closed or self._ended:
            return  # nothing more will come on this connection: the credit has no use
        self._outstanding += credit
        self._transport.write(frames.encode(Credit(credit)))

    def resume(self) -> None:
        if self._transport is not None and not self._closed:
            self._transport.resume_reading()

    def close(self) -> None:
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
        if self._transport is not None:
            self._transport.abort()

    def _fail(self, why: str, unreachable: bool = False) -> None:
        """``unreachable``: its producer's TaskManager served nothing within the connect
        timeout, and the failure says so."""
        if self._closed:
            return
        self.close()
        producer = self.location.taskmanager_id
        self._gate.fail(self.index, ChannelError(f"{self}: {why}", unreachable=(
            producer,) if unreachable and producer else ()))
