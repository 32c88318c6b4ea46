"""The wire format of a channel: length-prefixed frames, decoded with every bound checked
before anything is buffered.

A frame is ``length`` (4 bytes, big-endian: the bytes after it), ``kind`` (1 byte) and a
body. A consumer sends ``Hello`` once, then ``Credit`` frames; a producer sends
``DataBuffer``, ``Event`` and ``EndOfPartition`` frames, or one ``ErrorFrame`` before it
closes. A decoder is made for one direction (the kinds it accepts) and one bound on a
body: the server's decoder accepts only a consumer's small frames (``MAX_CONTROL_BODY``),
so a hostile peer can make it buffer at most that much; a consumer's accepts buffers up to
its ``max_buffer_size``. The length is checked before the body is read, so an oversized
frame costs five bytes, not its claimed size.

Pure: no sockets, no threads; the IO thread feeds it what a connection received.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from enum import IntEnum

PROTOCOL_VERSION = 3  # 2: the hello names its consumer; 3: data buffers are Arrow IPC
HEADER = struct.Struct("!IB")  # length of kind + body, kind
# version, subpartition, max buffer size, partition id length, consumer name length
_HELLO = struct.Struct("!HIIHB")
_U32 = struct.Struct("!I")
MAX_PARTITION_ID = 256  # bytes of UTF-8
_CONSUMER = re.compile(r"[A-Za-z0-9._-]{0,64}")  # a TaskManager id, or ""
MAX_CONTROL_BODY = 1024  # what a consumer may send in one frame (a Hello is < 400 bytes)
MAX_REASON = 1024  # characters of an error frame's reason that are kept
MAX_CREDIT = 1 << 16  # one announcement; more is a broken or hostile consumer
_CAPABILITY = re.compile(r"[0-9a-f]{64}")


class FrameKind(IntEnum):
    HELLO = 1
    CREDIT = 2
    BUFFER = 3
    EVENT = 4
    END_OF_PARTITION = 5
    ERROR = 6


CONSUMER_KINDS = frozenset({FrameKind.HELLO, FrameKind.CREDIT})
PRODUCER_KINDS = frozenset({FrameKind.BUFFER, FrameKind.EVENT, FrameKind.END_OF_PARTITION,
                            FrameKind.ERROR})


@dataclass(frozen=True)
class Hello:
    """The consumer's request for one subpartition: the first frame on a connection.
    ``max_buffer_size``: the largest buffer it accepts (the producer refuses the request
    if its partition may send larger ones); ``consumer``: the consumer's TaskManager, for
    the producer to name when the consumer goes away ("" when unknown)."""

    partition_id: str
    subpartition: int
    capability: str
    max_buffer_size: int
    version: int = PROTOCOL_VERSION
    consumer: str = ""


@dataclass(frozen=True)
class Credit:
    """The consumer freed ``count`` more buffer slots: the producer may send that many
    more data buffers."""

    count: int


@dataclass(frozen=True)
class DataBuffer:
    payload: bytes


@dataclass(frozen=True)
class Event:
    """An in-band event (a checkpoint barrier, a cancel marker): needs no credit, never
    overtakes the data buffers queued before it."""

    payload: bytes


@dataclass(frozen=True)
class EndOfPartition:
    """The producer sent its last buffer on this subpartition."""


@dataclass(frozen=True)
class ErrorFrame:
    """The producer refuses or gives up the channel; it closes the connection after this.
    ``retryable``: the partition is not registered yet (Flink's PartitionNotFound), the
    consumer may ask again."""

    reason: str
    retryable: bool = False


Frame = Hello | Credit | DataBuffer | Event | EndOfPartition | ErrorFrame


class FrameError(Exception):
    """The bytes received are not a frame this side accepts: the connection is closed."""


def header(kind: FrameKind, body_size: int) -> bytes:
    """The header of a frame whose body (``body_size`` bytes) is written after it; lets a
    buffer's payload go to the transport without being copied into one frame."""
    return HEADER.pack(body_size + 1, kind)


def encode(frame: Frame) -> bytes:
    """The whole frame, for the small frames and for tests; buffers use ``header``."""
    match frame:
        case Hello():
            partition, consumer = frame.partition_id.encode(), frame.consumer.encode("ascii")
            body = (_HELLO.pack(frame.version, frame.subpartition, frame.max_buffer_size,
                                len(partition), len(consumer)) + partition + consumer
                    + frame.capability.encode("ascii"))
            kind = FrameKind.HELLO
        case Credit():
            body, kind = _U32.pack(frame.count), FrameKind.CREDIT
        case DataBuffer():
            body, kind = frame.payload, FrameKind.BUFFER
        case Event():
            body, kind = frame.payload, FrameKind.EVENT
        case EndOfPartition():
            body, kind = b"", FrameKind.END_OF_PARTITION
        case ErrorFrame():
            body = bytes([frame.retryable]) + frame.reason[:MAX_REASON].encode()
            kind = FrameKind.ERROR
    return header(kind, len(body)) + body


class FrameDecoder:
    """Turns the bytes of one connection into frames, as they arrive in pieces.

    Holds at most one incomplete frame: ``max_body`` + 5 bytes, plus what one ``feed``
    brought. Raises FrameError at the first byte that breaks the format; after that the
    connection is closed and the decoder is not used again."""

    def __init__(self, max_body: int, accepted: frozenset[FrameKind]) -> None:
        self._max_body = max_body
        self._accepted = accepted
        self._pending = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._pending += data
        frames: list[Frame] = []
        view = memoryview(self._pending)
        offset, end = 0, len(self._pending)
        try:
            while end - offset >= HEADER.size:
                length, kind = HEADER.unpack_from(view, offset)
                if length < 1 or length - 1 > self._max_body:
                    raise FrameError(f"a frame of {length} bytes (at most "
                                     f"{self._max_body + 1} accepted)")
                if kind not in self._accepted:
                    raise FrameError(f"a frame of kind {kind}, not accepted here")
                if end - offset - 4 < length:
                    break
                body = bytes(view[offset + HEADER.size:offset + 4 + length])
                frames.append(_decode(FrameKind(kind), body))
                offset += 4 + length
        finally:
            view.release()
        del self._pending[:offset]
        return frames


def _decode(kind: FrameKind, body: bytes) -> Frame:
    if kind is FrameKind.BUFFER:
        return DataBuffer(body)
    if kind is FrameKind.EVENT:
        return Event(body)
    if kind is FrameKind.END_OF_PARTITION:
        if body:
            raise FrameError("an end of partition with a body")
        return EndOfPartition()
    if kind is FrameKind.CREDIT:
        if len(body) != _U32.size:
            raise FrameError("a credit frame of the wrong size")
        (count,) = _U32.unpack(body)
        if not 0 < count <= MAX_CREDIT:
            raise FrameError(f"a credit of {count}")
        return Credit(count)
    if kind is FrameKind.ERROR:
        if not body or body[0] > 1:
            raise FrameError("a malformed error frame")
        return ErrorFrame(body[1:].decode("utf-8", "replace")[:MAX_REASON], bool(body[0]))
    return _decode_hello(body)


def _decode_hello(body: bytes) -> Hello:
    if len(body) < _HELLO.size:
        raise FrameError("a hello frame too short")
    version, subpartition, max_buffer_size, id_size, consumer_size = _HELLO.unpack_from(body)
    rest = body[_HELLO.size:]
    if not 0 < id_size <= MAX_PARTITION_ID or len(rest) < id_size + consumer_size:
        raise FrameError("a hello frame with a malformed partition id")
    try:
        partition_id = rest[:id_size].decode()
        consumer = rest[id_size:id_size + consumer_size].decode("ascii")
        capability = rest[id_size + consumer_size:].decode("ascii")
    except UnicodeDecodeError:
        raise FrameError("a hello frame that is not text where it should be") from None
    if not _CAPABILITY.fullmatch(capability):
        raise FrameError("a hello frame without a well-formed capability")
    if not _CONSUMER.fullmatch(consumer):
        raise FrameError("a hello frame whose consumer is not a TaskManager id")
    return Hello(partition_id, subpartition, capability, max_buffer_size, version, consumer)
