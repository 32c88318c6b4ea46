"""One consumer's connection at the ChannelServer: its hello checked, then one
subpartition served under the consumer's credit (Flink's ``PartitionRequestServerHandler``
and ``PartitionRequestQueue`` for one channel).

Everything from the network is hostile until the hello passed: the decoder accepts only a
consumer's small frames, the hello must come within ``hello_timeout`` (the TLS handshake
included), and anything wrong is answered with an error frame and the connection closed,
touching no other connection. After the hello, the connection sends what the subpartition
lets it (subpartition.py) while the transport's write buffer is under ``WRITE_HIGH_WATER``.

All methods run on the IO thread but ``wake`` and ``abort``, which hop to it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING

from clusterdeck.core.streaming.network import frames
from clusterdeck.core.streaming.network.errors import ChannelError
from clusterdeck.core.streaming.network.frames import Credit, FrameDecoder, FrameError, Hello
from clusterdeck.core.streaming.network.subpartition import BufferKind, ResultSubpartition

if TYPE_CHECKING:
    from clusterdeck.core.streaming.network.server import ChannelServer
    from clusterdeck.core.streaming.network.writer import ResultPartitionWriter

log = logging.getLogger(__name__)

# Bytes written but not yet taken by the kernel, per connection, before sending pauses:
# with the subpartition's queue, what bounds a producer's memory per channel.
WRITE_HIGH_WATER = 256 * 1024
ABORT_GRACE = 5.0  # seconds a refused peer has to read its error frame before the abort
_KIND = {BufferKind.DATA: frames.FrameKind.BUFFER, BufferKind.EVENT: frames.FrameKind.EVENT}


class PartitionRequestConnection(asyncio.Protocol):
    """A consumer's connection; also the SubpartitionReader of the subpartition it serves."""

    def __init__(self, server: ChannelServer) -> None:
        self._server = server
        self._loop = server.loop
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(frames.MAX_CONTROL_BODY, frames.CONSUMER_KINDS)
        self._hello_deadline: asyncio.TimerHandle | None = None
        self._writer: ResultPartitionWriter | None = None
        self._subpartition: ResultSubpartition | None = None
        self._consumer = ""  # its TaskManager, as its hello named it
        self._paused = False  # the transport's write buffer is over its high-water mark
        self._ended = False  # the end of partition was written
        self._closing = False
        self._handshaking = False  # TLS: the raw transport must carry no plain frame
        # TLS: what was decrypted before start_tls handed us its transport (at most one
        # read: the handshake ended in the same loop iteration).
        self._early: list[bytes] = []
        self.peer = "?"

    # -- the connection's life ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.peer = _peer(transport)
        if not self._server.admit(self):
            log.warning("stream network: refused %s: too many connections", self.peer)
            self._closing = True
            transport.abort()
            return
        self._hello_deadline = self._loop.loop.call_later(
            self._server.hello_timeout, self._hello_too_late)
        if self._server.ssl_context is not None:
            transport.pause_reading()  # no plain byte may reach the decoder before TLS
            self._handshaking = True
            self._loop.loop.create_task(self._start_tls(transport, self._server.ssl_context))
        else:
            transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    async def _start_tls(self, raw: asyncio.Transport, context: ssl.SSLContext) -> None:
        try:
            transport = await self._loop.loop.start_tls(
                raw, self, context, server_side=True,
                ssl_handshake_timeout=self._server.hello_timeout)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as error:
            log.info("stream network: TLS handshake with %s failed: %s", self.peer, error)
            raw.abort()  # connection_lost follows, through the TLS layer
            return
        self._handshaking = False
        if transport is None or self._closing:
            return
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self._transport = transport
        early, self._early = self._early, []
        for data in early:
            self.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._hello_deadline is not None:
            self._hello_deadline.cancel()
        self._server.forget(self)
        if self._subpartition is not None and self._writer is not None and not self._ended:
            cause = exc or "it closed the connection"
            # name the consumer's TaskManager: its loss is the likely cause, not this one
            where = f"on {self._consumer} " if self._consumer else ""
            self._writer.fail(ChannelError(
                f"the consumer of {self._subpartition} {where}({self.peer}) went away before "
                f"its end of partition ({cause}): was {self._consumer or 'it'} lost?"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._pump()

    # -- what the consumer sends ------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        if self._handshaking:
            self._early.append(data)
            return
        try:
            received = self._decoder.feed(data)
        except FrameError as error:
            self.refuse(f"malformed frame: {error}")
            return
        for frame in received:
            if self._closing:
                return
            if isinstance(frame, Hello):
                self._on_hello(frame)
            elif isinstance(frame, Credit):
                if self._subpartition is None:
                    self.refuse("credit before a hello")
                    return
                self._subpartition.add_credit(frame.count)
                self._pump()

    def _on_hello(self, hello: Hello) -> None:
        if self._hello_deadline is None or self._hello_deadline.cancelled():
            self.refuse("a second hello")
            return
        self._hello_deadline.cancel()
        writer, refusal, retryable = self._server.lookup(hello)
        if writer is None:
            self.refuse(refusal, retryable)
            return
        subpartition = writer.subpartition(hello.subpartition)
        try:
            subpartition.attach(self)
        except ChannelError as error:
            self.refuse(str(error))
            return
        self._writer, self._subpartition = writer, subpartition
        self._consumer = hello.consumer
        log.debug("stream network: %s serves %s", self.peer, subpartition)
        self._pump()

    def _hello_too_late(self) -> None:
        self.refuse(f"no hello within {self._server.hello_timeout:g} s")

    # -- sending ----------------------------------------------------------------------------

    def _pump(self) -> None:
        """Write what the subpartition lets us, until it has nothing sendable (it wakes us
        for the next) or the transport's buffer is full (``resume_writing`` goes on)."""
        subpartition, transport = self._subpartition, self._transport
        if subpartition is None or transport is None:
            return
        while not self._paused and not self._closing:
            item = subpartition.take_sendable()
            if item is None:
                return
            kind, payload = item
            if kind is BufferKind.END_OF_PARTITION:
                transport.write(frames.encode(frames.EndOfPartition()))
                self._ended = True
                assert self._writer is not None
                self._writer.subpartition_delivered(subpartition.index)
                self._close()
                return
            transport.write(frames.header(_KIND[kind], len(payload)) + payload)

    def wake(self) -> None:
        """From the producing task's thread: the subpartition has something sendable."""
        self._loop.call_soon(self._pump)

    def abort(self, error: ChannelError) -> None:
        """From any thread: the subpartition failed; tell the consumer why."""
        self._loop.call_soon(self._abort_on_loop, str(error))

    def _abort_on_loop(self, reason: str) -> None:
        if not self._ended:
            self.refuse(reason)

    def refuse(self, reason: str, retryable: bool = False) -> None:
        """Answer an error frame and close; the peer has ABORT_GRACE to read it."""
        if self._closing or self._transport is None:
            return
        if self._handshaking:
            self.kill()
            return
        log.info("stream network: closing the channel of %s: %s", self.peer, reason)
        self._transport.write(frames.encode(frames.ErrorFrame(reason, retryable)))
        self._close()

    def _close(self) -> None:
        """Close after what was written is flushed; abort if the peer does not read it."""
        self._closing = True
        transport = self._transport
        if transport is not None:
            transport.close()
            self._loop.loop.call_later(ABORT_GRACE, transport.abort)

    def kill(self) -> None:
        """The server closes: drop the connection now."""
        self._closing = True
        if self._transport is not None:
            self._transport.abort()


def _peer(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
