"""Which embedded store keyed state lives in: RocksDB (``rocksdict``), LMDB (``lmdb``) or
SQLite (the standard library), on this machine.

Each store, in a fresh folder, takes ``--keys`` keys of about 20 bytes with values of
about 10 (a key's count, as a window or a running aggregate keeps): ``put`` writes them
all, ``get`` reads them all in a random order, ``update`` reads and writes back each in a
random order (a batch merged into the state), ``iterate`` reads them in key order (a
snapshot of all of it, or the windows a watermark fires). Then the cost of a checkpoint
of each kind the store allows: ``full copy`` (RocksDB's checkpoint of hard links, LMDB's
copy, SQLite's backup API) and ``changed`` (1% of the keys updated, then read back by the
list of what changed: what an incremental checkpoint's synchronous part copies).
Times are the best of ``--rounds``; keys/s = keys / time.

    python -m benchmarks.state_backends [--keys 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import platform
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

CHANGED_SHARE = 0.01


class Store(Protocol):
    def put_all(self, items: list[tuple[bytes, bytes]]) -> None: ...
    def get(self, key: bytes) -> bytes | None: ...
    def update(self, items: list[tuple[bytes, bytes]]) -> None: ...
    def items(self) -> Iterator[tuple[bytes, bytes]]: ...
    def full_copy(self, target: Path) -> None: ...
    def close(self) -> None: ...


class Rocks:
    def __init__(self, folder: Path) -> None:
        from rocksdict import Options, Rdict
        self.db = Rdict(str(folder / "db"), Options(raw_mode=True))

    def put_all(self, items: list[tuple[bytes, bytes]]) -> None:
        from rocksdict import WriteBatch
        batch = WriteBatch(raw_mode=True)
        for key, value in items:
            batch.put(key, value)
        self.db.write(batch)

    def get(self, key: bytes) -> bytes | None:
        return self.db.get(key)

    update = put_all

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.db.items())

    def full_copy(self, target: Path) -> None:
        from rocksdict import Checkpoint
        Checkpoint(self.db).create_checkpoint(str(target))

    def close(self) -> None:
        self.db.close()


class Lmdb:
    def __init__(self, folder: Path) -> None:
        import lmdb
        self.env = lmdb.open(str(folder / "db"), map_size=1 << 30, sync=False)
        self.txn = self.env.begin()  # reads between two writes share one transaction

    def put_all(self, items: list[tuple[bytes, bytes]]) -> None:
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti(items)

    def get(self, key: bytes) -> bytes | None:
        return self.txn.get(key)

    def update(self, items: list[tuple[bytes, bytes]]) -> None:
        self.txn.commit()
        self.put_all(items)
        self.txn = self.env.begin()

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        with self.env.begin() as txn:
            yield from txn.cursor()

    def full_copy(self, target: Path) -> None:
        target.mkdir()
        self.env.copy(str(target))

    def close(self) -> None:
        self.txn.abort()
        self.env.close()


class Sqlite:
    def __init__(self, folder: Path) -> None:
        self.db = sqlite3.connect(folder / "db.sqlite")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("CREATE TABLE state (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID")

    def put_all(self, items: list[tuple[bytes, bytes]]) -> None:
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO state VALUES (?, ?)", items)

    def get(self, key: bytes) -> bytes | None:
        row = self.db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    update = put_all

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.db.execute("SELECT key, value FROM state ORDER BY key"))

    def full_copy(self, target: Path) -> None:
        target.mkdir()
        copy = sqlite3.connect(target / "db.sqlite")
        self.db.backup(copy)
        copy.close()

    def close(self) -> None:
        self.db.close()


STORES: dict[str, Callable[[Path], Store]] = {"rocksdb": Rocks, "lmdb": Lmdb, "sqlite": Sqlite}


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def one_round(kind: str, keys: int) -> dict[str, float]:
    rng = random.Random(7)
    items = [(f"key-{index:012d}-{rng.random():.4f}".encode(), str(index).encode())
             for index in range(keys)]
    shuffled = [key for key, _ in items]
    rng.shuffle(shuffled)
    changed = shuffled[:int(keys * CHANGED_SHARE)]
    folder = Path(tempfile.mkdtemp(prefix=f"state-{kind}-"))
    try:
        store = STORES[kind](folder)
        result = {"put": timed(lambda: store.put_all(items)),
                  "get": timed(lambda: [store.get(key) for key in shuffled])}

        def update() -> None:
            store.update([(key, (store.get(key) or b"0") + b"1") for key in shuffled])
        result["update"] = timed(update)
        result["iterate"] = timed(lambda: sum(1 for _ in store.items()))
        result["full copy"] = timed(lambda: store.full_copy(folder / "copy"))
        store.update([(key, b"changed") for key in changed])
        result["changed"] = timed(lambda: [(key, store.get(key)) for key in changed])
        store.close()
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{time.strftime('%a %b %d %H:%M UTC %Y', time.gmtime())}, {platform.machine()}, "
          f"Python {platform.python_version()}, {args.keys:,} keys, best of {args.rounds}")
    print()
    columns = ["put", "get", "update", "iterate", "full copy", "changed"]
    print("| store | " + " | ".join(f"{name} ms" for name in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for kind in STORES:
        rounds = [one_round(kind, args.keys) for _ in range(args.rounds)]
        best = {name: min(r[name] for r in rounds) for name in columns}
        print(f"| {kind} | " + " | ".join(f"{best[name] * 1000:,.1f}" for name in columns)
              + " |")


if __name__ == "__main__":
    main()
