"""A streaming task's exchanges: its output into its consumers' subpartitions and its
input from its producers, with the checkpoint barriers, watermarks and ends of input that
travel in order with the records (docs/streaming.md, "The data plane").

On the wire (core/streaming/network carries bytes): a data buffer is an Arrow IPC stream
of one record batch, a timestamp column and the records as typed columns or as the
engine's tagged JSON (arrowbuffers.py: every record comes back as it went); an event is a
JSON object, ``{"barrier": n}``, ``{"cancel": n}`` (checkpoint n was declined upstream) or
``{"watermark": t}`` (``"inf"``: event time is over). Whatever a peer sends is checked
when read: a buffer or event that is not one of these fails the task, naming its channel.

A keyed output picks a record's consumer by its key group (core/protocol/keygroups.py):
a stable hash of its key string (BLAKE2b, the same in every process and run; Python's
``hash`` of a string is not) modulo the job's max parallelism, sent to the subtask whose
range of key groups holds it, so a restored job, at its old parallelism or another,
sends every key where its state is. A column batch (columnbatches.py) is routed the same
way without a Python call per record: its rows grouped by their key columns' values, one
representative record of each group keyed and hashed as above, every row of the group
sent where its representative goes (the key is a function of those values alone, so
each row would have gone there); a key function, or key columns of other types, go per
record (the key function run over the rows, the batch still cut as columns). A consuming
gate that takes columns keeps each buffer's record batch as it came.

Slot thread only; the network's own thread is behind the writer and the gate.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from clusterdeck.core.checkpointing.alignment import AlignmentAction, barrier_handler
from clusterdeck.core.engine.arrowbuffers import (
    BufferFormatError,
    decode_columns,
    elements_of,
    encode_buffers,
    encode_columns,
    is_native,
    records_of,
)
from clusterdeck.core.engine.columnbatches import key_groups, representatives
from clusterdeck.core.protocol.checkpoints import CheckpointingMode
from clusterdeck.core.protocol.keygroups import DEFAULT_MAX_PARALLELISM, subtask_of
from clusterdeck.core.protocol.wiring import StreamChannel
from clusterdeck.core.streaming.eventtime import InputWatermarks
from clusterdeck.core.streaming.network import (
    DEFAULT_CONNECT_TIMEOUT,
    BufferKind,
    ChannelError,
    ChannelServer,
    InputGate,
    SubpartitionLocation,
)

Element = tuple[float | None, Any]  # (event timestamp or None, record)
BUFFER_BYTES = 32 * 1024
"""A buffer is cut after this much column data (Flink's 32 KiB memory segment; the channel takes
up to 1 MiB): what waits in a full exchange, and so how long a barrier waits behind it
when a consumer is slow, is a few buffers of this size per channel."""
COLUMN_BUFFER_BYTES = 128 * 1024
"""A column batch's buffers are cut after this much: each buffer costs the same fixed
work whatever it holds (an IPC stream with its schema, a full validation, a frame and a
credit), which at 32 KiB (about a thousand rows of a keyed count) was a third of the
exchange's time; four credits of these per channel still hold only a few milliseconds
of a fast consumer's records (docs/benchmarks.md section 25)."""
EMIT_TIMEOUT = 600.0
"""Seconds an emit waits for a consumer to take its buffers: past it the consumer is
taken as stuck and the task fails (a slow consumer only slows this one down)."""
_FILTERED_CONSUMERS = 4  # a batch split by a filter per consumer up to this many, else sorted


def subpartition_of(key: str, subpartitions: int,
                    max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> int:
    """The consumer subtask owning ``key``'s key group."""
    return subtask_of(key, max_parallelism, subpartitions)


def keyed_subpartitions(batch: pa.RecordBatch, key_of: Callable[[Any], str], count: int,
                        max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> np.ndarray:
    """Each row's subpartition of ``count``: ``subpartition_of(key_of(record))`` of one
    representative record per key (``key_of.fields``, columnbatches.key_groups), or, for
    a key function or key columns that do not allow it, of every record (the function
    run over the rows, one hash per distinct key)."""
    fields = getattr(key_of, "fields", None)
    groups = key_groups(batch, fields) if fields else None
    if groups is None:
        chosen_of: dict[str, int] = {}
        return np.fromiter((chosen_of[key] if key in chosen_of
                            else chosen_of.setdefault(
                                key, subpartition_of(key, count, max_parallelism))
                            for key in map(key_of, records_of(batch))),
                           dtype=np.int64, count=batch.num_rows)
    firsts, of_row = groups
    chosen = np.array([subpartition_of(key_of(record), count, max_parallelism)
                       for record in representatives(batch, firsts)], dtype=np.int64)
    return chosen[of_row]


def _parts(batch: pa.RecordBatch, chosen: np.ndarray,
           count: int) -> list[tuple[int, pa.RecordBatch]]:
    """The rows of each of ``count`` consumers that has any, in order: a filter per
    consumer for a few of them (cheaper than a sort), one stable sort for more."""
    if count == 1:
        return [(0, batch)]
    if count <= _FILTERED_CONSUMERS:
        return [(index, batch.filter(pa.array(mask))) for index in range(count)
                if (mask := chosen == index).any()]
    order = np.argsort(chosen, kind="stable")
    bounds = np.searchsorted(chosen[order], np.arange(count + 1)).tolist()
    return [(index, batch.take(pa.array(order[bounds[index]:bounds[index + 1]])))
            for index in range(count) if bounds[index] < bounds[index + 1]]


class PartitionOutput:
    """A producing task's result partition: one subpartition per consumer subtask."""

    def __init__(self, server: ChannelServer, partition_id: str, subpartitions: int,
                 key_of: Callable[[Any], str] | None, cancelled: Callable[[], bool],
                 max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> None:
        """``key_of``: a record's key string (None: an unkeyed edge, records go round
        robin); ``max_parallelism``: the job's key groups."""
        self.writer = server.register(partition_id, subpartitions, cancelled=cancelled)
        self.key_of = key_of
        self.max_parallelism = max_parallelism
        self._waited: tuple[float, float | None] = (0.0, None)  # before, the wait's start
        self._next = 0

    @property
    def backpressured(self) -> float:
        """Seconds sends waited for a consumer to take buffers so far, the wait going on
        now too: the TaskManager's main thread reads it for the live numbers while the
        slot thread may be waiting (one tuple, replaced whole)."""
        waited, since = self._waited
        return waited + (time.monotonic() - since if since is not None else 0.0)

    def emit(self, elements: Sequence[Element]) -> None:
        """Send ``elements``, each to its key's consumer; waits while a consumer is full
        (the backpressure that slows this task, and so its source)."""
        count = self.writer.subpartitions
        parts: list[list[Element]] = [[] for _ in range(count)]
        if self.key_of is None:
            for element in elements:
                parts[self._next].append(element)
                self._next = (self._next + 1) % count
        else:
            key_of = self.key_of
            chosen: dict[str, int] = {}  # a batch's keys repeat: one hash each
            for element in elements:
                key = key_of(element[1])
                index = chosen.get(key)
                if index is None:
                    index = chosen[key] = subpartition_of(key, count, self.max_parallelism)
                parts[index].append(element)
        for index, part in enumerate(parts):
            for payload in encode_buffers(part, BUFFER_BYTES):
                self._timed(lambda i=index, b=payload: self.writer.emit(i, b, EMIT_TIMEOUT))

    def emit_columns(self, batch: pa.RecordBatch) -> None:
        """``emit`` for a column batch: its rows to the same consumers, in order, as
        buffers cut from the batch itself."""
        count = self.writer.subpartitions
        if not is_native(batch.schema):
            self.emit(elements_of(batch))
            return
        for index, part in _parts(batch, self.subpartitions_of(batch, count), count):
            for payload in encode_columns(part, COLUMN_BUFFER_BYTES):
                self._timed(lambda i=index, b=payload: self.writer.emit(i, b, EMIT_TIMEOUT))

    def subpartitions_of(self, batch: pa.RecordBatch, count: int) -> np.ndarray:
        """Each row's consumer, as ``emit`` would choose it (the module docstring)."""
        if self.key_of is None:
            chosen = (self._next + np.arange(batch.num_rows)) % count
            self._next = (self._next + batch.num_rows) % count
            return chosen
        return keyed_subpartitions(batch, self.key_of, count, self.max_parallelism)

    def barrier(self, checkpoint_id: int) -> None:
        self._event({"barrier": checkpoint_id})

    def cancel_marker(self, checkpoint_id: int) -> None:
        self._event({"cancel": checkpoint_id})

    def watermark(self, watermark: float) -> None:
        self._event({"watermark": "inf" if math.isinf(watermark) else watermark})

    def finish(self) -> None:
        """End of partition: the consumers' inputs from this task are over."""
        self._timed(lambda: self.writer.finish(EMIT_TIMEOUT))

    def release(self, reason: str) -> None:
        self.writer.release(reason)

    def _event(self, event: dict[str, Any]) -> None:
        payload = json.dumps(event).encode()
        self._timed(lambda: self.writer.broadcast_event(payload, EMIT_TIMEOUT))

    def _timed(self, send: Callable[[], None]) -> None:
        waited, started = self._waited[0], time.monotonic()
        self._waited = (waited, started)
        try:
            send()
        finally:
            self._waited = (waited + time.monotonic() - started, None)


@dataclass
class Polled:
    """What a consuming task got in one ``GateInput.poll``: records (in arrival order), then
    what to do after processing them: snapshots to take or checkpoints to decline, the
    new input watermark, and whether every input has ended."""

    elements: list[Element] = field(default_factory=list)
    batches: list[pa.RecordBatch] = field(default_factory=list)  # a columnar gate's
    actions: list[AlignmentAction] = field(default_factory=list)
    watermark: float | None = None
    ended: bool = False
    waited: float = 0.0  # seconds it waited for buffers: not busy (the busy share)


class GateInput:
    """A consuming task's input gate with its barrier alignment and input watermark."""

    def __init__(self, channels: Sequence[StreamChannel], mode: CheckpointingMode,
                 loop: Any = None, consumer: str = "", *, columnar: bool = False,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        """``consumer``: this task's TaskManager, named to its producers; ``columnar``:
        records come as the buffers' record batches (``Polled.batches``), not elements;
        ``connect_timeout``: how long a channel tries to reach its producer."""
        self.columnar = columnar
        self.channels = tuple(channels)
        self.gate = InputGate([SubpartitionLocation(c.host, c.port, c.partition_id,
                                                    c.subpartition, c.capability,
                                                    c.fingerprint, c.taskmanager_id, consumer)
                               for c in channels],
                              loop=loop, connect_timeout=connect_timeout)
        self.barriers = barrier_handler(len(channels), mode)
        self.watermarks = InputWatermarks(len(channels))
        self.ended = False

    def poll(self, timeout: float, limit: int, linger: float = 0.0) -> Polled:
        """Records until ``limit`` or the next event, waiting at most ``timeout`` for the
        first thing and then up to ``linger`` seconds for more (a batch is one Spark job:
        fewer, larger ones, at that much latency); an event ends the poll (the records
        before it go through first)."""
        polled = Polled(ended=self.ended)
        deadline = time.monotonic() + timeout
        lingering: float | None = None  # until when, once the first record came
        rows = 0
        while rows < limit and not self.ended:
            if rows and lingering is None:
                lingering = time.monotonic() + linger
            until = deadline if lingering is None else lingering
            began = time.monotonic()
            wait = max(0.0, until - began)
            received = self.gate.poll(wait)
            polled.waited += time.monotonic() - began
            if received is None:
                break
            if received.kind is BufferKind.DATA:
                batch = _batch(received.payload, self._name_of(received.channel))
                if self.columnar:
                    polled.batches.append(batch)
                else:
                    polled.elements.extend(_elements(batch, self._name_of(received.channel)))
                rows += batch.num_rows
                continue
            self._on_event(received.channel, received.kind, received.payload, polled)
            break
        polled.ended = self.ended
        return polled

    def close(self) -> None:
        self.gate.close()

    def _on_event(self, channel: int, kind: BufferKind, payload: bytes,
                  polled: Polled) -> None:
        now = time.monotonic()
        if kind is BufferKind.END_OF_PARTITION:
            polled.actions += self.barriers.on_end_of_input(channel, now)
            watermark = self.watermarks.on_end_of_input(channel)
            # An ended input no longer holds the others back; but the end of every input
            # is not the end of event time: a stopped source ends its output without
            # one, and windows fired now would come after its last checkpoint.
            polled.watermark = None if watermark == math.inf else watermark
            self.ended = all(self.gate.ended(c) for c in range(len(self.channels)))
        else:
            event = _event(payload, self._name_of(channel))
            if "barrier" in event:
                polled.actions += self.barriers.on_barrier(channel, event["barrier"], now)
            elif "cancel" in event:
                # passed on as the AbortCheckpoint it yields: the task declines, marks on
                polled.actions += self.barriers.on_cancel(channel, event["cancel"])
            else:
                polled.watermark = self.watermarks.on_watermark(channel, event["watermark"])
        for index in range(len(self.channels)):  # exactly-once holds aligned channels back
            if self.barriers.blocked(index):
                self.gate.block(index)
            else:
                self.gate.unblock(index)

    def _name_of(self, channel: int) -> str:
        found = self.channels[channel]
        return f"input channel {channel} ({found.partition_id}, subpartition " \
               f"{found.subpartition})"


def _batch(payload: bytes, where: str) -> pa.RecordBatch:
    try:
        return decode_columns(payload)
    except BufferFormatError as error:
        raise ChannelError(f"{where} sent a buffer that is not records: {error}") from None


def _elements(batch: pa.RecordBatch, where: str) -> list[Element]:
    try:
        return elements_of(batch)
    except BufferFormatError as error:
        raise ChannelError(f"{where} sent a buffer that is not records: {error}") from None


def merged(batches: Sequence[pa.RecordBatch]) -> list[Element] | pa.RecordBatch:
    """A columnar gate's batches as one column batch, in order; as elements when they
    are not all of one schema (producers' records differ in shape) or not typed columns.
    Their ``__record`` texts were not decoded yet: a bad one fails here, as a
    ChannelError."""
    schemas = {batch.schema for batch in batches}
    if len(schemas) == 1 and is_native(batches[0].schema):
        if len(batches) == 1:
            return batches[0]
        return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    elements: list[Element] = []
    for batch in batches:
        elements.extend(_elements(batch, "an input channel"))
    return elements


def _event(payload: bytes, where: str) -> dict[str, Any]:
    try:
        event = json.loads(payload)
        if not isinstance(event, dict) or len(event) != 1:
            raise ValueError("not one event")
        (name, value), = event.items()
        if name in ("barrier", "cancel") and type(value) is int and value > 0:
            return event
        if name == "watermark" and (value == "inf" or (type(value) in (int, float)
                                                      and math.isfinite(value))):
            return {"watermark": math.inf if value == "inf" else float(value)}
        raise ValueError(f"{name}={value!r}")
    except (ValueError, TypeError) as error:
        raise ChannelError(f"{where} sent an event that is not one: {error}") from None
