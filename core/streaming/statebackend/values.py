"""A value per key, as a running aggregate or a process function keeps it: in a dict
(``HeapValues``) or in a ``KeyedStore`` (``StoredValues``, entries ``V`` + the encoded
key), behind the same batch-at-a-time methods, so the keyed state reads and writes a
batch's keys at once whichever backend holds them. Used on the task's slot thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from clusterdeck.core.streaming.statebackend.store import KeyedStore

PREFIX = b"V"


class HeapValues:
    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._values)

    def get_many(self, keys: list[Any]) -> list[Any]:
        """Each key's value, None for a key without one."""
        values = self._values
        return [values.get(key) for key in keys]

    def put_many(self, pairs: Iterable[tuple[Any, Any]], before: list[Any]) -> None:
        """Each key's new value (None: forget the key); ``before``: their values now,
        as ``get_many`` gave them."""
        values = self._values
        for key, value in pairs:
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value

    def entries(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._values.items()))

    def load(self, entries: Iterable[tuple[Any, Any]]) -> None:
        self._values = dict(entries)


class StoredValues:
    def __init__(self, store: KeyedStore, encode: Callable[[Any], bytes],
                 decode: Callable[[bytes], Any]) -> None:
        self.store = store
        self.encode = encode
        self.decode = decode
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def get_many(self, keys: list[Any]) -> list[Any]:
        decode = self.decode
        return [None if data is None else decode(data)
                for data in self.store.get_many([PREFIX + self.encode(key) for key in keys])]

    def put_many(self, pairs: Iterable[tuple[Any, Any]], before: list[Any]) -> None:
        changed = [(key, value, old) for (key, value), old in zip(pairs, before, strict=True)
                   if value is not None or old is not None]  # forgetting nothing is no change
        encode = self.encode
        self.store.write((PREFIX + encode(key), None if value is None else encode(value))
                         for key, value, _ in changed)
        self._count += sum((value is not None) - (old is not None) for _, value, old in changed)

    def entries(self) -> Iterator[tuple[Any, Any]]:
        decode = self.decode
        for key, value in self.store.scan(PREFIX):
            yield decode(key[len(PREFIX):]), decode(value)

    def load(self, entries: Iterable[tuple[Any, Any]]) -> None:
        """A heap backend's snapshot into the (empty) store."""
        encode = self.encode
        self.store.write((PREFIX + encode(key), encode(value)) for key, value in entries)
        self.recount()

    def recount(self) -> None:
        """After the store was restored from a checkpoint's files."""
        self._count = self.store.count(PREFIX)
