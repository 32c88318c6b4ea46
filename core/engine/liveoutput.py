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


class _Run:
    """Contiguous unsent output of one stream: its byte offset and its writes, joined only
    when taken (joining as it goes would copy the run once per write)."""

    def __init__(self, stream: str, offset: int) -> None:
        self.stream = stream
        self.offset = offset
        self.texts: list[str] = []
        self.size = 0  # bytes

    def take(self, size: int) -> list[Piece]:
        return _cut(Piece(self.stream, self.offset, "".join(self.texts)), size)


class LiveOutput:
    """Written by one slot thread, taken by the TaskManager's main thread."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._written = dict.fromkeys(STREAMS, 0)
        self._runs: list[_Run] = []
        self._pending_bytes = 0

    def write(self, stream: str, text: str) -> None:
        data = text.encode("utf-8", "replace")  # as the output file will hold it
        with self._lock:
            offset = self._written[stream]
            self._written[stream] += len(data)
            if not data or self._pending_bytes + len(data) > self._limit:
                return  # the output file still gets it; the feed skips it
            run = next((r for r in reversed(self._runs) if r.stream == stream), None)
            if run is None or run.offset + run.size != offset:
                run = _Run(stream, offset)
                self._runs.append(run)
            run.texts.append(data.decode("utf-8"))
            run.size += len(data)
            self._pending_bytes += len(data)

    def take(self, piece: int, most: int) -> list[Piece]:
        """What was printed since the last take: a stream's adjacent writes joined, in
        pieces of at most ``piece`` characters, at most ``most`` pieces (the rest waits)."""
        with self._lock:
            runs, self._runs, self._pending_bytes = self._runs, [], 0
        pieces = [cut for run in runs for cut in run.take(piece)]
        if len(pieces) > most:
            with self._lock:
                kept = [_Run(x.stream, x.offset) for x in pieces[most:]]
                for run, left in zip(kept, pieces[most:], strict=True):
                    run.texts.append(left.text)
                    run.size = len(left.text.encode())
                self._runs[:0] = kept
                self._pending_bytes += sum(run.size for run in kept)
        return pieces[:most]


def _cut(piece: Piece, size: int) -> list[Piece]:
    cuts, offset = [], piece.offset
    for start in range(0, len(piece.text), size):
        text = piece.text[start:start + size]
        cuts.append(Piece(piece.stream, offset, text))
        offset += len(text.encode())
    return cuts
