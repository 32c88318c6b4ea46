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

Then checkpoints as a streaming task takes them (``--checkpoints``, at each of
``--sizes`` keys): a running count per key, 1% of the keys updated between two
checkpoints, each checkpoint's synchronous part (what the barrier waits for: the heap's
copy of its values as JSON data; the rocksdb backend's change log taken) and its whole
duration (then encoded and written, as the snapshot writer does: the heap's JSON, the
rocksdb backend's delta and its small JSON) as p50, the bytes written per checkpoint,
and the rocksdb backend's materialisation of a base (every ``MAX_DELTAS`` checkpoints,
on a thread of its own while the checkpoints go on; here in between two).

    python -m benchmarks.state_backends [--keys 100000] [--rounds 3]
        [--checkpoints 20] [--sizes 100000 200000 400000]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import sqlite3
import statistics
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


def checkpoints(backend: str, keys: int, count: int) -> dict[str, float]:
    """p50 of the synchronous part and of the whole checkpoint, in ms; bytes a checkpoint."""
    from clusterdeck.core.checkpointing import CheckpointStorage
    from clusterdeck.core.checkpointing.changelog import IncrementalSnapshots
    from clusterdeck.core.engine.keyedstate import RunningState
    from clusterdeck.core.jobapi.plan import COUNT, UserCode
    from clusterdeck.core.protocol.jobgraph import OperatorSpec
    from clusterdeck.core.streaming.statebackend import KeyedStore

    folder = Path(tempfile.mkdtemp(prefix=f"checkpoints-{backend}-"))
    store = KeyedStore(64 * 1024 * 1024, folder / "store") if backend == "rocksdb" else None
    try:
        storage = CheckpointStorage(folder / "checkpoints")
        snapshots = IncrementalSnapshots(storage, "job", "v#0")
        state = RunningState(OperatorSpec("count", COUNT, "count"), UserCode(), 10 * keys,
                             store)
        names = [f"user-{index}" for index in range(keys)]
        state.merge((name, (1, None)) for name in names)
        rng = random.Random(11)
        synchronous, whole, written, materialised = [], [], [], []
        for checkpoint_id in range(count + 1):
            state.merge((name, (1, None)) for name in rng.sample(names, keys // 100))
            started = time.perf_counter()
            copy = state.snapshot()
            changes = store.changes() if store is not None else None
            taken = time.perf_counter()
            before = snapshots.written
            if changes is not None:
                snapshots.write(checkpoint_id, changes)
            data = json.dumps({"chain": copy}).encode()
            storage.write_state("job", checkpoint_id, "v#0", data)
            ended = time.perf_counter()
            if checkpoint_id == 0:  # the first uploads everything: not a steady one
                continue
            synchronous.append(taken - started)
            whole.append(ended - started)
            written.append(snapshots.written - before + len(data))
            if store is not None and snapshots.materialisation_due():
                started = time.perf_counter()
                snapshots.materialised(snapshots.build_base(snapshots.chain))
                materialised.append(time.perf_counter() - started)
        return {"sync": statistics.median(synchronous) * 1000,
                "whole": statistics.median(whole) * 1000,
                "bytes": statistics.median(written),
                "materialise": statistics.median(materialised) * 1000 if materialised else 0}
    finally:
        if store is not None:
            store.close()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 200_000, 400_000])
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
    print()
    print(f"Checkpoints, 1% of the keys changed between two, p50 of {args.checkpoints}:")
    print()
    print("| backend | keys | synchronous part ms | whole checkpoint ms | bytes a checkpoint "
          "| materialising a base ms |")
    print("|---|---|---|---|---|---|")
    for keys in args.sizes:
        for backend in ("heap", "rocksdb"):
            result = checkpoints(backend, keys, args.checkpoints)
            print(f"| {backend} | {keys:,} | {result['sync']:,.1f} | {result['whole']:,.1f} | "
                  f"{result['bytes']:,.0f} | "
                  + (f"{result['materialise']:,.0f} |" if backend == "rocksdb" else "- |"))


if __name__ == "__main__":
    main()
