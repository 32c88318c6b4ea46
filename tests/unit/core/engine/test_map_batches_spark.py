"""``map_batches`` in real Spark: a per-record lambda, a batch function (a list of records,
or Arrow columns), a declarative key and the declarative job over column batches
(columnbatches.py) give the same keyed window counts on the same input, each streaming
chain in its long-lived Spark task as in a task; and a batch job's batch functions give
what its map gives, in Spark partitions and in local execution."""

from __future__ import annotations

import math
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark import cloudpickle

from clusterdeck.core.engine.columnbatches import rate_batch
from clusterdeck.core.engine.local import run_local
from clusterdeck.core.engine.streamoperators import StreamChain
from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.loader import LoadedJob, load_job

pytestmark = pytest.mark.integration  # a SparkSession: a JVM
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # its functions go to Spark's
# workers, which cannot import the tests

RECORDS = 1000  # rate source records (index, "key-<index mod 10>"), 100 a second of event
# time: 10 windows of 10 records per key


def key_of(record):
    """The key the rate source's record holds, computed from its index."""
    return f"key-{record[0] % 10}"


def keys_by_batch(records):
    return [(record[0], key_of(record)) for record in records]


def keys_by_columns(table: pa.Table) -> pa.Table:
    index = table["_1"].to_numpy()
    keys = np.char.add("key-", (index % 10).astype(str))
    return pa.table({"index": table["_1"], "key": pa.array(keys.tolist())})


def key_and_count(window):
    return window[0], window[3]


KEYINGS = {  # what comes before the timestamps (a batch function's records would all
    # take the batch's latest time after them), and the key
    "a key function": (None, key_of),
    "a per-record map": (lambda stream: stream.map(
        lambda record: (record[0], key_of(record))), 1),
    "a batch function": (lambda stream: stream.map_batches(keys_by_batch), 1),
    "an arrow batch function": (lambda stream: stream.map_batches(
        keys_by_columns, format="arrow"), 1),
    "the declarative key": (None, 1),
}
AFTER_WINDOW = {
    "map": lambda stream: stream.map(key_and_count),
    "batch": lambda stream: stream.map_batches(
        lambda windows: [key_and_count(window) for window in windows]),
    "arrow": lambda stream: stream.map_batches(
        lambda table: table.select(["_1", "_4"]), format="arrow"),
}


def windowed_job(keying: str, after: str) -> LoadedJob:
    """rate -> [keying's map] -> timestamps -> key -> 1 s window count -> after -> print."""
    env = ExecutionEnvironment("s").set_parallelism(1)
    env.enable_checkpointing(1)
    before, key = KEYINGS[keying]
    stream = env.rate_source(10)
    if before is not None:
        stream = before(stream)
    windows = (stream.assign_timestamps(lambda record: record[0] / 100)
               .key_by(key).window(1.0).count())
    AFTER_WINDOW[after](windows).print()
    graph, code = build_graph(env)
    return LoadedJob(Path("job.py"), (), graph, code)


_open: list[StreamChain] = []


@pytest.fixture(autouse=True)
def _close_chains():
    """Each chain's long-lived Spark task holds one of local[2]'s cores: ended after
    each test, failed or not."""
    yield
    while _open:
        _open.pop().close()


def chain(spark, job: LoadedJob, index: int) -> StreamChain:
    vertex = job.graph.vertices[index]
    made = StreamChain(spark, job, vertex, 0, vertex.parallelism)
    _open.append(made)
    return made


def fired_windows(spark, job: LoadedJob) -> list:
    """The rate source's first ``RECORDS`` records in batches of 300 through the job's
    source vertex, its output through the keyed vertex, every window fired at the end."""
    source = chain(spark, job, 0)
    rate = [(None, (index, f"key-{index % 10}")) for index in range(RECORDS)]
    keyed_input = [element for start in range(0, RECORDS, 300)
                   for element in source.process(rate[start:start + 300])]
    source.close()  # local[2] has a core for one more task: the keyed vertex's
    keyed = chain(spark, job, 1)
    for start in range(0, len(keyed_input), 300):
        assert keyed.process(keyed_input[start:start + 300]) == []
    fired, watermark = keyed.advance(math.inf)
    keyed.close()
    assert watermark == math.inf
    return fired


def test_a_lambda_a_batch_function_and_a_declarative_key_count_the_same_windows(spark):
    expected = [(f"key-{key}", 10) for second in range(RECORDS // 100) for key in range(10)]
    outputs = {(keying, after): fired_windows(spark, windowed_job(keying, after))
               for keying, after in [(keying, "map") for keying in KEYINGS]
               + [("the declarative key", "batch"), ("a batch function", "arrow")]}
    for (keying, after), fired in outputs.items():
        assert [record for _, record in fired] == expected, (keying, after)
    # a window's result is timestamped end - 0.001; a batch function's, with the batch's
    # latest: its last window's
    assert {stamp for stamp, _ in outputs["the declarative key", "batch"]} == {
        RECORDS / 100 - 0.001}
    assert [stamp for stamp, _ in outputs["the declarative key", "map"]][:10] == [0.999] * 10


def with_times(table: pa.Table) -> pa.Table:
    index = table["_1"].to_numpy()
    return pa.table({"index": table["_1"], "key": table["_2"], "time": index / 100})


def test_the_declarative_job_over_columns_counts_what_the_lambda_job_counts(spark):
    """The rate source's Arrow batches through an arrow batch function and timestamps
    from a field (ColumnarChain in the long-lived Spark task), out as column batches, into
    the keyed vertex's vectorised window: the per-record jobs' windows, to the timestamp."""
    env = ExecutionEnvironment("s").set_parallelism(1)
    env.enable_checkpointing(1)
    (env.rate_source(10).map_batches(with_times, format="arrow")
        .assign_timestamps(field=2).key_by(1).window(1.0).count()
        .map(key_and_count).print())
    graph, code = build_graph(env)
    job = LoadedJob(Path("job.py"), (), graph, code)
    source = chain(spark, job, 0)
    assert source.takes_columns
    batches = [source.process(rate_batch(range(start, min(start + 300, RECORDS))))
               for start in range(0, RECORDS, 300)]
    assert all(isinstance(batch, pa.RecordBatch) for batch in batches)
    source.close()
    keyed = chain(spark, job, 1)
    assert keyed.takes_columns
    for batch in batches:
        assert keyed.process(batch) == []
    fired, _ = keyed.advance(math.inf)
    assert [record for _, record in fired] == [
        (f"key-{key}", 10) for second in range(RECORDS // 100) for key in range(10)]
    assert [stamp for stamp, _ in fired][:10] == [0.999] * 10


def test_a_batch_function_after_the_timestamps_gives_its_records_the_batchs_latest(spark):
    env = ExecutionEnvironment("s").set_parallelism(1)
    env.enable_checkpointing(1)
    (env.rate_source(10).assign_timestamps(lambda record: record[0] / 10)
        .map_batches(lambda records: [len(records)]).print())
    graph, code = build_graph(env)
    only = chain(spark, LoadedJob(Path("job.py"), (), graph, code), 0)
    assert only.process([(None, (index, "k")) for index in (4, 30, 7)]) == [(3.0, 3)]


def test_an_arrow_batch_of_records_that_are_not_columns_fails_naming_them(spark):
    env = ExecutionEnvironment("s").set_parallelism(1)
    env.enable_checkpointing(1)
    env.rate_source(10).map(lambda record: {"index": record[0]}).map_batches(
        lambda table: table, format="arrow").print()
    graph, code = build_graph(env)
    only = chain(spark, LoadedJob(Path("job.py"), (), graph, code), 0)
    with pytest.raises(Exception, match="a batch of dict records cannot be Arrow columns"):
        only.process([(None, (0, "k"))])


BATCH_JOB = """
    import os

    import pyarrow as pa

    def squares(table):
        numbers = table["value"].to_numpy()
        return pa.table({"rest": numbers % 7, "square": numbers * numbers})

    def build(env):
        env.set_parallelism(2)  # a source of its own each: chained, so it may run locally
        env.from_range(0, 5000).map(lambda n: (n % 7, n * n)).collect()
        env.from_range(0, 5000).map_batches(lambda ns: [(n % 7, n * n) for n in ns]).collect()
        env.from_range(0, 5000).map_batches(squares, format="arrow").collect()
        env.from_range(0, 3, parallelism=1).map_batches(lambda ns: [os.getpid()],
                                                        parallelism=1).collect()
"""


@pytest.mark.parametrize("local_max_records", [0, 10_000], ids=["in Spark", "locally"])
def test_a_batch_jobs_batch_functions_give_what_its_map_gives(spark, tmp_path,
                                                              local_max_records):
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(BATCH_JOB))
    result = run_local(load_job(path), spark, tmp_path / "work",
                       local_max_records=local_max_records)
    by_map = sorted(map(tuple, result.rows("op-3")))
    assert by_map == sorted((n % 7, n * n) for n in range(5000))
    assert sorted(map(tuple, result.rows("op-6"))) == by_map
    assert sorted(map(tuple, result.rows("op-9"))) == by_map
    ran_here = result.rows("op-12") == [os.getpid()]
    assert ran_here is (local_max_records > 0)
