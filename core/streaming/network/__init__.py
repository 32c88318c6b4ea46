"""The pipelined data plane of streaming tasks: bounded channels with credit-based flow
control between producing and consuming subtasks, on one TaskManager or across several
(Flink's network stack: result partitions and subpartitions, input gates and channels,
credit announced by the receiver; docs/streaming.md, "The data plane").

- A TaskManager runs one ``ChannelServer`` (one listening socket, one IO thread, TLS with
  its data service's certificate beyond loopback). A producing task ``register``s its
  result partition there and gets a ``ResultPartitionWriter``: ``emit`` a data buffer to
  a subpartition (it blocks while that subpartition holds ``buffers_per_channel``: the
  backpressure), ``broadcast_event`` (barriers, in order with the data), ``finish``.
- A consuming task opens an ``InputGate`` over one ``SubpartitionLocation`` per producer
  subtask: ``poll`` the next item of any channel, ``block``/``unblock`` a channel for
  barrier alignment, ``close``.
- Every queue is bounded; every failure is a ``ChannelError`` raised by ``emit`` or
  ``poll``, naming the partition, the subpartition and the peer.

Modules: ``frames`` (the wire format), ``subpartition`` and ``writer`` (the producer's
queues), ``partitionrequest`` and ``server`` (serving them), ``channel`` and ``gate`` (the
consumer), ``ioloop`` (the IO thread), ``tls``, ``errors``.
"""

from clusterdeck.core.streaming.network.channel import DEFAULT_CONNECT_TIMEOUT, SubpartitionLocation
from clusterdeck.core.streaming.network.errors import (
    ChannelCancelled,
    ChannelError,
    ChannelTimeout,
)
from clusterdeck.core.streaming.network.gate import InputGate, Received
from clusterdeck.core.streaming.network.ioloop import IoLoop
from clusterdeck.core.streaming.network.server import (
    ChannelServer,
    ChannelServerAddress,
    partition_capability,
)
from clusterdeck.core.streaming.network.subpartition import BufferKind
from clusterdeck.core.streaming.network.writer import ResultPartitionWriter

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "BufferKind",
    "ChannelCancelled",
    "ChannelError",
    "ChannelServer",
    "ChannelServerAddress",
    "ChannelTimeout",
    "InputGate",
    "IoLoop",
    "Received",
    "ResultPartitionWriter",
    "SubpartitionLocation",
    "partition_capability",
]
