"""A TaskManager's channel server: the producer side of every result partition its tasks
write, over one listening socket and one IO thread (Flink's ``NettyServer`` with its
``ResultPartitionManager``).

A task registers its partition (``register``) and emits into the writer it gets back; a
consumer anywhere connects, presents the partition's capability in its hello and is
served its one subpartition (partitionrequest.py). A capability is the HMAC of the
partition id under the TaskManager's data key (core/dataservice/capability.py), so the
server keeps no list of tokens; the ``partition:`` prefix keeps a partition's capability
from ever opening a data-service folder (those are absolute paths) and the other way round.

A consumer that asks for a partition not registered yet gets a retryable error (Flink's
PartitionNotFound) and asks again until its own deadline (channel.py); one asking for a
partition that was consumed or released gets a final error (the last ``GONE_REMEMBERED``
are remembered).

Memory of the process: at most ``max_connections`` connections, each with at most one
control frame (``frames.MAX_CONTROL_BODY``) and ``WRITE_HIGH_WATER`` bytes of output
buffered, plus the queues of the registered partitions (writer.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from clusterdeck.core.dataservice import capability
from clusterdeck.core.dataservice.selfsigned import SelfSigned
from clusterdeck.core.streaming.network import tls
from clusterdeck.core.streaming.network.channel import DEFAULT_CONNECT_TIMEOUT
from clusterdeck.core.streaming.network.errors import ChannelError
from clusterdeck.core.streaming.network.frames import MAX_PARTITION_ID, PROTOCOL_VERSION, Hello
from clusterdeck.core.streaming.network.ioloop import IoLoop
from clusterdeck.core.streaming.network.partitionrequest import PartitionRequestConnection
from clusterdeck.core.streaming.network.writer import (
    DEFAULT_BUFFERS_PER_CHANNEL,
    DEFAULT_MAX_BUFFER_SIZE,
    ResultPartitionWriter,
)

DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_HELLO_TIMEOUT = 10.0
GONE_REMEMBERED = 1024


def partition_capability(key: str, partition_id: str) -> str:
    """What a consumer presents to read ``partition_id`` from the TaskManager of ``key``."""
    return capability.capability(key, f"partition:{partition_id}")


@dataclass(frozen=True)
class ChannelServerAddress:
    """Where a started server listens: what its TaskManager announces."""

    host: str
    port: int
    fingerprint: str = ""  # of its TLS certificate; "" without TLS (loopback)


class ChannelServer:
    """One per TaskManager process. ``start`` binds, ``register`` serves a partition,
    ``close`` ends every connection. Callable from any thread."""

    def __init__(self, key: str, *, loop: IoLoop | None = None,
                 certificate: SelfSigned | None = None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 hello_timeout: float = DEFAULT_HELLO_TIMEOUT, owner: str = "",
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        """``loop``: the process's IO loop, shared with its input gates (one of its own
        if none, stopped by ``close``); ``certificate``: TLS with it, pinned by its
        fingerprint (the data service's, core/dataservice/selfsigned.py); ``owner``: its
        TaskManager's id, which its tasks' input gates name to their producers;
        ``connect_timeout``: how long those gates try to reach a producer
        (``taskmanager.data.connect-timeout``)."""
        self.key = key
        self.owner = owner
        self.connect_timeout = connect_timeout
        self.loop = loop or IoLoop("stream-channel-server")
        self._owns_loop = loop is None
        self.ssl_context = tls.server_context(certificate) if certificate else None
        self._fingerprint = certificate.fingerprint if certificate else ""
        self.max_connections = max_connections
        self.hello_timeout = hello_timeout
        # The registry is read on the IO thread (a hello) and written by tasks: one lock,
        # held for a dictionary operation at a time.
        self._lock = threading.Lock()
        self._partitions: dict[str, ResultPartitionWriter] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()
        self._connections: set[PartitionRequestConnection] = set()  # the IO thread's
        self._server: asyncio.Server | None = None
        self._closed = False

    def start(self, bind: str = "127.0.0.1", advertised_host: str | None = None,
              port: int = 0) -> ChannelServerAddress:
        async def listen() -> int:
            family = socket.AF_INET6 if ":" in bind else socket.AF_INET
            server = await self.loop.loop.create_server(
                lambda: PartitionRequestConnection(self), bind, port, family=family,
                backlog=128)
            self._server = server
            return int(server.sockets[0].getsockname()[1])
        bound = self.loop.run(listen(), timeout=10.0)
        return ChannelServerAddress(advertised_host or bind, bound, self._fingerprint)

    # -- a producing task's thread ------------------------------------------------------

    def register(self, partition_id: str, subpartitions: int, *,
                 buffers_per_channel: int = DEFAULT_BUFFERS_PER_CHANNEL,
                 max_buffer_size: int = DEFAULT_MAX_BUFFER_SIZE,
                 cancelled: Callable[[], bool] = lambda: False) -> ResultPartitionWriter:
        """Serve a new partition of ``subpartitions`` (one per consumer subtask) from now
        on; see ResultPartitionWriter for the other arguments."""
        if not partition_id or len(partition_id.encode()) > MAX_PARTITION_ID:
            raise ValueError(f"a partition id is 1 to {MAX_PARTITION_ID} bytes of UTF-8")
        writer = ResultPartitionWriter(
            partition_id, subpartitions, buffers_per_channel=buffers_per_channel,
            max_buffer_size=max_buffer_size, cancelled=cancelled, on_done=self._forget)
        with self._lock:
            if self._closed:
                raise ChannelError("the channel server is closed")
            if partition_id in self._partitions:
                raise ValueError(f"partition {partition_id} is registered already")
            self._partitions[partition_id] = writer
            self._gone.pop(partition_id, None)
        return writer

    def _forget(self, writer: ResultPartitionWriter) -> None:
        """Any thread: ``writer`` is done (consumed or failed); later hellos for it get a
        final answer instead of waiting for it."""
        failure = writer.failure
        with self._lock:
            if self._partitions.get(writer.partition_id) is writer:
                del self._partitions[writer.partition_id]
            self._gone[writer.partition_id] = (str(failure) if failure else
                                               "it was consumed completely")
            while len(self._gone) > GONE_REMEMBERED:
                self._gone.popitem(last=False)

    # -- the IO thread --------------------------------------------------------------------

    def admit(self, connection: PartitionRequestConnection) -> bool:
        if self._closed or len(self._connections) >= self.max_connections:
            return False
        self._connections.add(connection)
        return True

    def forget(self, connection: PartitionRequestConnection) -> None:
        self._connections.discard(connection)

    def lookup(self, hello: Hello) -> tuple[ResultPartitionWriter | None, str, bool]:
        """The writer a hello asks for, or None, why not and whether to ask again later.
        The capability is checked first: without it, a peer learns nothing."""
        if hello.version != PROTOCOL_VERSION:
            return None, (f"protocol version {hello.version} asked, this TaskManager "
                          f"speaks {PROTOCOL_VERSION}"), False
        if not hmac.compare_digest(
                partition_capability(self.key, hello.partition_id), hello.capability):
            return None, f"no capability for partition {hello.partition_id}", False
        with self._lock:
            writer = self._partitions.get(hello.partition_id)
            gone = self._gone.get(hello.partition_id)
        if writer is None and gone is not None:
            return None, f"partition {hello.partition_id} is gone: {gone}", False
        if writer is None:
            return None, f"partition {hello.partition_id} is not registered (yet)", True
        if hello.subpartition >= writer.subpartitions:
            return None, (f"partition {hello.partition_id} has {writer.subpartitions} "
                          f"subpartitions, not {hello.subpartition + 1}"), False
        if writer.max_buffer_size > hello.max_buffer_size:
            return None, (f"partition {hello.partition_id} sends buffers of up to "
                          f"{writer.max_buffer_size} bytes, the consumer takes "
                          f"{hello.max_buffer_size}"), False
        return writer, "", False

    @property
    def connections(self) -> int:
        """Connections open now (tests and metrics)."""
        return len(self._connections)

    # -- any thread -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening, drop every connection (their consumers see them lost), fail
        every registered partition; stop the IO loop if it is this server's own."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writers = list(self._partitions.values())
        for writer in writers:
            writer.fail(ChannelError(f"partition {writer.partition_id}: the channel server "
                                     f"closed"))

        async def shut() -> None:
            server = self._server
            if server is not None:
                server.close()
            for connection in list(self._connections):
                connection.kill()
        # A shared loop stopped already has taken the sockets with it.
        with contextlib.suppress(RuntimeError):
            self.loop.run(shut(), timeout=5.0)
        if self._owns_loop:
            self.loop.stop()
