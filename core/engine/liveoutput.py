"""What a running PySpark script prints, handed on while it runs.

spark-submit shows a program's output as it is printed; clusterdeck's submitter should
too. The script's slot thread writes here (through ``capture.thread_io``) and the
TaskManager's main thread takes what is new every tick, in pieces of at most ``piece``
characters, with each piece's byte offset in the stream's UTF-8 form: the same bytes as
the output file written when the task ends, so a receiver that missed a piece reads on
from that file at its offset. Unsent output is bounded (``limit`` bytes per task): a
script that prints faster than the feed is sent keeps all of it in its output file, and
the feed skips ahead (a gap the receiver notices by its offsets).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

STREAMS = ("stdout", "stderr")
DEFAULT_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True)
class Piece:
    stream: str
    offset: int  # bytes of the stream's UTF-8 form before this piece
    text: str


class LiveOutput:
    """Written by one slot thread, taken by the TaskManager's main thread."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._written = dict.fromkeys(STREAMS, 0)
        self._pending: list[Piece] = []
        self._pending_bytes = 0

    def write(self, stream: str, text: str) -> None:
        data = text.encode("utf-8", "replace")  # as the output file will hold it
        with self._lock:
            offset = self._written[stream]
            self._written[stream] += len(data)
            if not data or self._pending_bytes + len(data) > self._limit:
                return  # the output file still gets it; the feed skips it
            self._pending.append(Piece(stream, offset, data.decode("utf-8")))
            self._pending_bytes += len(data)

    def take(self, piece: int, most: int) -> list[Piece]:
        """What was printed since the last take: adjacent writes of a stream joined,
        pieces of at most ``piece`` characters, at most ``most`` pieces (the rest waits)."""
        with self._lock:
            pending, self._pending, self._pending_bytes = self._pending, [], 0
        pieces = [cut for joined in _joined(pending) for cut in _cut(joined, piece)]
        if len(pieces) > most:
            with self._lock:
                self._pending[:0] = pieces[most:]
                self._pending_bytes += sum(len(p.text.encode()) for p in pieces[most:])
        return pieces[:most]


def _joined(pieces: list[Piece]) -> list[Piece]:
    joined: list[Piece] = []
    for piece in pieces:
        last = joined[-1] if joined else None
        if last and last.stream == piece.stream and \
                last.offset + len(last.text.encode()) == piece.offset:
            joined[-1] = Piece(last.stream, last.offset, last.text + piece.text)
        else:
            joined.append(piece)
    return joined


def _cut(piece: Piece, size: int) -> list[Piece]:
    cuts, offset = [], piece.offset
    for start in range(0, len(piece.text), size):
        text = piece.text[start:start + size]
        cuts.append(Piece(piece.stream, offset, text))
        offset += len(text.encode())
    return cuts
