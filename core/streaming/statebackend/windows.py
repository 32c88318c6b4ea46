"""The open windows of a keyed window operator in a ``KeyedStore``: what ``KeyedWindows``
(windowstate.py) keeps in a dict, with the same methods, for state larger than memory.

A window's entry is ``W`` + its end + its start (8 bytes each, ordered as the floats are)
+ the encoded key, so the windows a watermark fires are one scan from the smallest end
on, not a pass over all of them. The late count, how far windows fired and how many are
open are small: kept here and carried in the snapshot's JSON; the entries go through the
store's change log. Used on the task's slot thread only.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from clusterdeck.core.streaming.eventtime import Window
from clusterdeck.core.streaming.statebackend.store import KeyedStore

PREFIX = b"W"
_FLOAT = struct.Struct(">d")
_BOUNDS = 1 + 2 * _FLOAT.size

Encode = Callable[[Any], bytes]
Decode = Callable[[bytes], Any]
Combine = Callable[[Any, Any], Any]


def ordered(number: float) -> bytes:
    """A float as 8 bytes that sort as the floats do (sign flipped, negatives inverted)."""
    (bits,) = struct.unpack(">Q", _FLOAT.pack(number))
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits >> 63 else bits | 1 << 63
    return bits.to_bytes(8, "big")


def unordered(data: bytes) -> float:
    bits = int.from_bytes(data, "big")
    bits = bits ^ 1 << 63 if bits >> 63 else bits ^ 0xFFFF_FFFF_FFFF_FFFF
    return _FLOAT.unpack(bits.to_bytes(8, "big"))[0]


def window_key(entry: bytes) -> bytes:
    """The encoded key of a window's entry."""
    return entry[_BOUNDS:]


class StoredWindows:
    def __init__(self, store: KeyedStore, combine: Combine, encode: Encode,
                 decode: Decode) -> None:
        """``combine(aggregate, partial)``; ``encode``/``decode``: a key or an aggregate
        to bytes and back (the same key always to the same bytes)."""
        self.store = store
        self.combine = combine
        self.encode = encode
        self.decode = decode
        self._fired_to = -math.inf
        self.late = 0
        self.open_windows = 0

    @property
    def fired_to(self) -> float:
        return self._fired_to

    def count_late(self, records: int) -> None:
        self.late += records

    def merge_many(self, batch: list[tuple[tuple[Any, Window], Any]],
                   check: Callable[[int], None]) -> None:
        """Fold each ``((key, window), partial)`` into its window (a fired window's are
        dropped, as ``KeyedWindows.merge`` does); ``check(open windows after)`` first,
        which raises to refuse the batch before anything changed."""
        partials: dict[bytes, tuple[Any, Any]] = {}
        combine = self.combine
        for (key, window), partial in batch:
            if window[1] <= self._fired_to:
                continue
            slot = PREFIX + ordered(window[1]) + ordered(window[0]) + self.encode(key)
            if slot in partials:
                partials[slot] = (key, combine(partials[slot][1], partial))
            else:
                partials[slot] = (key, partial)
        slots = list(partials)
        before = self.store.get_many(slots)
        new = sum(1 for value in before if value is None)
        check(self.open_windows + new)
        decode, encode = self.decode, self.encode
        self.store.write(
            (slot, encode(partials[slot][1] if old is None
                          else combine(decode(old), partials[slot][1])))
            for slot, old in zip(slots, before, strict=True))
        self.open_windows += new

    def fire(self, watermark: float) -> list[tuple[Any, Window, Any]]:
        """``(key, window, aggregate)`` of every window ending at or before
        ``watermark``, by end then start then key (as text), deleted from the store."""
        if watermark <= self._fired_to:
            return []
        due: list[tuple[bytes, Any, Window, Any]] = []
        for slot, value in self.store.scan(PREFIX):
            end = unordered(slot[1:9])
            if end > watermark:
                break
            window = (unordered(slot[9:_BOUNDS]), end)
            due.append((slot, self.decode(slot[_BOUNDS:]), window, self.decode(value)))
        self._fired_to = watermark
        self.store.write((slot, None) for slot, _, _, _ in due)
        self.open_windows -= len(due)
        due.sort(key=lambda entry: (entry[2][1], entry[2][0], repr(entry[1])))
        return [(key, window, aggregate) for _, key, window, aggregate in due]

    def snapshot(self) -> dict[str, Any]:
        """The small part, as JSON data (the windows are in the store's change log)."""
        fired_to = None if math.isinf(self._fired_to) else self._fired_to
        return {"fired_to": fired_to, "late": self.late, "stored": self.open_windows}

    def restore(self, state: dict[str, Any]) -> None:
        """After the store was restored: the small part, checked against the store."""
        fired_to = state["fired_to"]
        self._fired_to = -math.inf if fired_to is None else float(fired_to)
        self.late = int(state["late"])
        self.open_windows = self.store.count(PREFIX)
        if self.open_windows != state["stored"]:
            raise ValueError(f"the restored state holds {self.open_windows} open windows, "
                             f"its checkpoint {state['stored']}")

    def load(self, open_windows: list[tuple[Any, Window, Any]]) -> None:
        """Windows from a heap backend's snapshot into the (empty) store."""
        self.store.write((PREFIX + ordered(window[1]) + ordered(window[0]) + self.encode(key),
                          self.encode(aggregate)) for key, window, aggregate in open_windows)
        self.open_windows = self.store.count(PREFIX)
