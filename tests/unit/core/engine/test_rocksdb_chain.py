"""A streaming vertex's keyed state in the rocksdb backend, as its task drives it: the
same output as the heap's, a chain restored from its incremental files (the store's
change log uploaded at each snapshot) going on exactly as an unbroken one, and a heap
snapshot restoring into the store. One local SparkSession serves the module; each chain's
long-lived Spark task holds one of its two cores, so a test has at most two chains open
at a time."""

from __future__ import annotations

import math

import pytest

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.checkpointing.changelog import IncrementalSnapshots, chain_entries
from clusterdeck.core.streaming.statebackend import KeyedStore
from tests.unit.core.engine.test_streamoperators import (
    _close_chains,  # noqa: F401 (the autouse fixture: every chain ended after its test)
    chain,
    deduplicated,
    elements,
    job_of,
    through_json,
)

pytestmark = pytest.mark.integration  # a SparkSession: a JVM


@pytest.fixture
def stores(tmp_path):
    opened: list[KeyedStore] = []

    def open_store() -> KeyedStore:
        opened.append(KeyedStore(256 * 1024, tmp_path / f"store-{len(opened)}"))
        return opened[-1]
    yield open_store
    for store in opened:
        store.close()


def sliding_average(env):
    (env.rate_source(10).assign_timestamps(lambda record: record[0])
        .key_by(lambda record: [record[1], record[0] % 2])   # a list key
        .window(4, 2).aggregate(lambda: (0, 0), lambda acc, r: (acc[0] + r[0], acc[1] + 1),
                                lambda a, b: (a[0] + b[0], a[1] + b[1]),
                                lambda acc: acc[0] / acc[1])
        .print())


BATCHES = [elements((1, "a"), (2, "a"), (3, "b")),
           elements((5, "a"), (1, "b"), (6, "b"), (-1, "a")),    # -1: late
           elements((9, "a"), (10, "a"), (2, "b"), (0, "b"), (1, "a")),   # 0, 1: late
           elements((11, "b"), (12, "a"), (13, "a"))]
WATERMARKS = [2.0, 5.0, 8.0, 11.0]


def run(chain_, batches, watermarks):
    out = []
    for batch, watermark in zip(batches, watermarks, strict=True):
        out.extend(chain_.process(batch))
        out.extend(chain_.advance(watermark)[0])
    return out


def test_windows_in_rocksdb_restored_from_a_chain_of_deltas_go_on_exactly(
        spark, stores, tmp_path):
    job = job_of(sliding_average)
    heap = chain(spark, job)
    expected = run(heap, BATCHES, WATERMARKS) + heap.advance(math.inf)[0]
    heap.close()

    storage = CheckpointStorage(tmp_path / "checkpoints")
    snapshots = IncrementalSnapshots(storage, "job", "v#0")
    store = stores()
    first = chain(spark, job, store=store)
    head = []
    for checkpoint_id, (batch, watermark) in enumerate(zip(BATCHES[:3], WATERMARKS[:3],
                                                           strict=True), start=1):
        head += run(first, [batch], [watermark])
        state = through_json(first.snapshot())
        files = snapshots.write(checkpoint_id, store.changes())
    assert "open" not in state["windows"] and state["windows"]["stored"] > 0
    assert len(files) == 3
    first.close()

    restored_store = stores()   # as a task restores: its chain, the files, the rest
    restored = chain(spark, job_of(sliding_average), store=restored_store)
    restored_store.apply(chain_entries(storage, "job", "v#0", files))
    restored.restore(state)
    assert restored.late_records == 3
    tail = run(restored, BATCHES[3:], WATERMARKS[3:]) + restored.advance(math.inf)[0]
    assert head + tail == expected


def test_process_values_in_rocksdb_answer_as_the_heaps_and_a_heap_snapshot_restores_in(
        spark, stores):
    job = job_of(deduplicated)
    batches = [[(1.0, ((1, 2), 1)), (2.0, ("b", 2))],
               [(3.0, ((1, 2), 3)), (4.0, ("b", 4)), (5.0, ("d", 5))],
               [(6.0, ("b", "done")), (7.0, ("b", 7))]]
    heap, stored = chain(spark, job), chain(spark, job, store=stores())
    assert [heap.process(batch) for batch in batches] == \
        [stored.process(batch) for batch in batches]
    assert stored.snapshot()["values"] == {"stored": 3}
    heap.close()
    stored.close()

    from_heap = chain(spark, job, store=stores())
    first = chain(spark, job)
    first.process(batches[0])
    from_heap.restore(through_json(first.snapshot()))   # heap state into the store
    assert [from_heap.process(batch) for batch in batches[1:]] == \
        [first.process(batch) for batch in batches[1:]]


def test_a_running_count_in_rocksdb_counts_as_the_heaps(spark, stores):
    job = job_of(lambda env: env.rate_source(10).key_by(1).count().print())
    heap, stored = chain(spark, job), chain(spark, job, store=stores())
    for batch in (elements((1, "a"), (2, "b"), (3, "a")), elements((4, "a"), (5, "c"))):
        assert heap.process(batch) == stored.process(batch)
