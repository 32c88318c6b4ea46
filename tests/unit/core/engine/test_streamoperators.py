"""A streaming vertex's operators as its task drives them: batches of (timestamp, record)
elements in, input watermarks told, windows fired in order, running aggregates per batch,
state through JSON into a fresh chain, and the key strings the exchange hashes. One
local SparkSession serves the module; each chain runs its batches in a long-lived Spark
task of its own, as in a task, ended after each test."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from clusterdeck.core.engine.columnar import ColumnarWindowPartials
from clusterdeck.core.engine.keyedstate import StateLimitExceeded
from clusterdeck.core.engine.records import KEY_SEPARATOR
from clusterdeck.core.engine.streamoperators import StreamChain, output_key
from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.loader import LoadedJob

pytestmark = pytest.mark.integration  # a SparkSession: a JVM


def job_of(declare) -> LoadedJob:
    """The job a ``build(env)`` body declares, as a TaskManager loads it."""
    env = ExecutionEnvironment("s").set_parallelism(1)
    env.enable_checkpointing(1)
    declare(env)
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


def chain(spark, job: LoadedJob, index: int = -1, **options) -> StreamChain:
    """The chain of the job's vertex ``index`` (the keyed one: the last)."""
    vertex = job.graph.vertices[index]
    made = StreamChain(spark, job, vertex, 0, vertex.parallelism, **options)
    _open.append(made)
    return made


def through_json(state):
    return json.loads(json.dumps(state, allow_nan=False))


def windowed(size, slide=None, then=None):
    """rate -> timestamps -> key_by(1) -> window count [-> then] -> print."""
    def declare(env):
        stream = (env.rate_source(10).assign_timestamps(lambda record: record[0])
                  .key_by(1).window(size, slide).count())
        (stream.map(then) if then else stream).print()
    return job_of(declare)


def elements(*pairs):
    """(timestamp, key) pairs as the exchange hands them: records (index, key)."""
    return [(float(t), (t, key)) for t, key in pairs]


def test_a_tumbling_count_fires_its_windows_in_order_as_the_watermark_passes_them(spark):
    keyed = chain(spark, windowed(10))
    assert keyed.process(elements((1, "b"), (2, "a"), (9, "a"))) == []
    assert keyed.process(elements((12, "a"), (15, "b"), (25, "a"))) == []
    assert keyed.advance(9.5) == ([], 9.5)
    fired, watermark = keyed.advance(20.0)
    assert watermark == 20.0
    assert [record for _, record in fired] == [
        ("a", 0.0, 10.0, 2), ("b", 0.0, 10.0, 1), ("a", 10.0, 20.0, 1), ("b", 10.0, 20.0, 1)]
    assert [timestamp for timestamp, _ in fired] == [9.999, 9.999, 19.999, 19.999]
    assert keyed.advance(20.0) == ([], 20.0) and keyed.advance(15.0) == ([], 20.0)
    assert keyed.advance(math.inf) == ([(29.999, ("a", 20.0, 30.0, 1))], math.inf)


def test_sliding_windows_count_a_record_in_each_window_it_falls_into(spark):
    keyed = chain(spark, windowed(10, 5, then=lambda out: f"{out[0]}@{out[1]:g}={out[3]}"))
    keyed.process(elements((3, "a"), (7, "a"), (12, "a")))
    fired, _ = keyed.advance(math.inf)
    assert [record for _, record in fired] == ["a@-5=1", "a@0=2", "a@5=2", "a@10=1"]


def test_late_records_are_dropped_and_counted_while_open_windows_still_take_them(spark):
    keyed = chain(spark, windowed(10, 5))
    keyed.process(elements((4, "a"), (11, "a")))
    fired, _ = keyed.advance(10.0)   # [-5, 5) and [0, 10) fire
    assert [record[1:] for _, record in fired] == [(-5.0, 5.0, 1), (0.0, 10.0, 1)]
    keyed.process(elements((2, "a"), (8, "a"), (13, "b")))   # 2 is late; 8 is in [5, 15)
    assert keyed.late_records == 1
    fired, _ = keyed.advance(math.inf)
    assert [record for _, record in fired] == [
        ("a", 5.0, 15.0, 2), ("b", 5.0, 15.0, 1), ("a", 10.0, 20.0, 1), ("b", 10.0, 20.0, 1)]


def test_a_source_vertex_assigns_timestamps_and_carries_its_own_watermark(spark):
    job = job_of(lambda env: env.rate_source(10).assign_timestamps(
        lambda record: record[0] / 10, max_out_of_orderness=0.5).filter(
        lambda record: record[0] % 2 == 0).map(lambda record: record[1]).key_by(
        lambda key: key).count().print())
    source = chain(spark, job, 0)
    assert source.advance(None) == ([], None)   # no record yet: no watermark
    out = source.process([(None, (index, f"key-{index % 3}")) for index in range(6)])
    assert out == [(0.0, "key-0"), (0.2, "key-2"), (0.4, "key-1")]
    # the watermark follows every record the assigner saw, the filtered ones too
    assert source.advance(None) == ([], pytest.approx(0.5 - 0.5 - 0.001))
    assert source.advance(math.inf) == ([], math.inf)


def test_a_running_reduce_emits_each_keys_value_after_every_batch_that_updated_it(spark):
    job = job_of(lambda env: env.rate_source(10).key_by(1).reduce(
        lambda a, b: (max(a[0], b[0]), a[1], a[2] + b[2])).map(
        lambda record: f"{record[1]}:{record[2]}").print())
    running = chain(spark, job)
    assert running.process([(None, (1, "a", 1)), (2.0, (2, "b", 10)), (None, (3, "a", 5))]) \
        == [(None, "a:6"), (2.0, "b:10")]
    assert running.process([(None, (4, "a", 1))]) == [(None, "a:7")]
    assert running.advance(None) == ([], None)


def test_running_sum_and_count_emit_key_and_value(spark):
    summed = chain(spark, job_of(lambda env: env.rate_source(10).key_by(1).sum(0).print()))
    assert summed.process(elements((1, "a"), (2, "b"), (3, "a"))) == [
        (3.0, ("a", 4)), (2.0, ("b", 2))]
    counted = chain(spark, job_of(lambda env: env.rate_source(10).key_by(1).count().print()))
    counted.process(elements((1, "a")))
    assert counted.process(elements((2, "a"))) == [(2.0, ("a", 2))]


def test_a_chain_restored_from_its_json_snapshot_goes_on_exactly_as_an_unbroken_one(spark):
    def declare(env):
        (env.rate_source(10).assign_timestamps(lambda record: record[0])
            .key_by(lambda record: [record[1], record[0] % 2])   # a list key
            .window(4, 2).aggregate(lambda: (0, 0), lambda acc, r: (acc[0] + r[0], acc[1] + 1),
                                    lambda a, b: (a[0] + b[0], a[1] + b[1]),
                                    lambda acc: acc[0] / acc[1])
            .print())

    job = job_of(declare)
    batches = [elements((1, "a"), (2, "a"), (3, "b")),
               elements((5, "a"), (1, "b"), (6, "b"), (-1, "a")),    # -1: late
               elements((9, "a"), (10, "a"), (2, "b"), (0, "b"), (1, "a"))]   # 0, 1: late
    watermarks = [2.0, 5.0, 8.0]

    def run(chain_, batches_, watermarks_):
        out = []
        for batch, watermark in zip(batches_, watermarks_, strict=True):
            out.extend(chain_.process(batch))
            out.extend(chain_.advance(watermark)[0])
        return out

    unbroken = chain(spark, job)
    expected = run(unbroken, batches, watermarks) + unbroken.advance(math.inf)[0]
    assert unbroken.late_records == 3 and ("a", 0) in {record[0] for _, record in expected}
    unbroken.close()   # local[2]: a core for each live chain's Spark task

    first = chain(spark, job)
    head = run(first, batches[:2], watermarks[:2])
    state = through_json(first.snapshot())
    first.close()
    restored = chain(spark, job_of(declare))   # a new attempt loads the job again
    restored.restore(state)
    assert restored.late_records == 1
    tail = run(restored, batches[2:], watermarks[2:]) + restored.advance(math.inf)[0]
    assert head + tail == expected and restored.late_records == 3


def test_state_past_its_limit_fails_the_task_saying_so(spark):
    keyed = chain(spark, windowed(10), max_state_entries=2)
    keyed.process(elements((1, "a"), (2, "b")))
    with pytest.raises(StateLimitExceeded, match="more than its limit of 2"):
        keyed.process(elements((3, "c")))


def test_output_keys_are_the_consumers_key_strings_the_same_for_lists_tuples_and_reloads():
    def declare(as_list):
        def build(env):
            keyed = env.rate_source(10).key_by(
                (lambda r: [r[1], r[0]]) if as_list else (lambda r: (r[1], r[0])))
            keyed.count(parallelism=3).print()
        return build

    strings = []
    for as_list in (True, False, True):
        job = job_of(declare(as_list))
        key = output_key(job, job.graph, job.graph.vertices[0].id)
        assert key is not None and output_key(job, job.graph, job.graph.vertices[1].id) is None
        strings.append(key((7, "key-7")))
    assert strings == [f"key-7{KEY_SEPARATOR}7"] * 3
    job = job_of(lambda env: env.rate_source(10).key_by(1).sum(0).print())
    assert output_key(job, job.graph, job.graph.vertices[0].id)((1, None)) == "\x00"


def test_a_window_state_that_saw_the_end_of_its_input_restores_as_ended():
    keyed = chain(None, windowed(10))   # no batch runs: no Spark needed
    assert keyed.advance(math.inf) == ([], math.inf)
    restored = chain(None, windowed(10))
    restored.restore(through_json(keyed.snapshot()))
    assert restored.snapshot()["windows"]["ended"] is True
    assert restored.advance(5.0) == ([], 5.0)


def test_state_of_another_kind_of_chain_is_refused_on_restore():
    running = chain(None, job_of(lambda env: env.rate_source(10).key_by(1).count().print()))
    with pytest.raises(ValueError, match="not this chain's"):
        chain(None, windowed(10)).restore(through_json(running.snapshot()))


def deduplicated(env):
    """The first record of each id, and how many repeats came before the first of a key
    that is cleared on "done"."""
    def first_of_each(record, state):
        if record[1] == "done":
            state.clear()
            return [("done", record[0])]
        seen = state.value() or 0
        state.update(seen + 1)
        return [record] if seen == 0 else None

    env.rate_source(10).key_by(0).process(first_of_each).map(list).print()


def test_a_process_function_reads_and_writes_each_keys_value_in_order_of_arrival(spark):
    keyed = chain(spark, job_of(deduplicated))
    assert keyed.process([(1.0, ("a", 1)), (2.0, ("b", 2)), (3.0, ("a", 3))]) == [
        (1.0, ["a", 1]), (2.0, ["b", 2])]
    assert keyed.process([(4.0, ("a", 4)), (5.0, ("c", 5))]) == [(5.0, ["c", 5])]
    assert keyed.snapshot()["values"] == [["a", 3], ["b", 1], ["c", 1]]
    assert keyed.process([(6.0, ("a", "done")), (7.0, ("a", 7))]) == [
        (6.0, ["done", "a"]), (7.0, ["a", 7])]   # cleared, then seen afresh
    assert keyed.advance(math.inf) == ([], math.inf)


def test_process_state_is_restored_from_its_json_snapshot_and_bounded(spark):
    job = job_of(deduplicated)
    first = chain(spark, job)
    first.process([(1.0, ((1, 2), 1)), (2.0, ("b", 2))])
    restored = chain(spark, job_of(deduplicated))
    restored.restore(through_json(first.snapshot()))
    first.close()
    assert restored.process([(3.0, ((1, 2), 3)), (4.0, ("b", 4)), (5.0, ("d", 5))]) == [
        (5.0, ["d", 5])]   # a tuple key comes back as a tuple through JSON
    restored.close()
    small = chain(spark, job, max_state_entries=2)
    small.process([(1.0, ("a", 1)), (2.0, ("b", 2))])
    small.process([(3.0, ("a", "done"))])   # clearing frees a place
    small.process([(4.0, ("c", 4))])
    with pytest.raises(StateLimitExceeded, match="values of 3 keys, more than its limit of 2"):
        small.process([(5.0, ("e", 5))])


def test_a_process_function_that_returns_a_string_fails_naming_what_to_return(spark):
    keyed = chain(spark, job_of(
        lambda env: env.rate_source(10).key_by(0).process(lambda r, s: "text").print()))
    with pytest.raises(Exception, match="return or yield the records to emit"):
        keyed.process([(1.0, ("a", 1))])


def test_user_counters_count_each_attempts_batches_on_its_own(spark):
    env = ExecutionEnvironment("s").set_parallelism(1)
    env.enable_checkpointing(1)
    seen = env.counter("seen")
    env.rate_source(10).map(lambda record: seen.add(2) or record).print()
    graph, code = build_graph(env)
    job = LoadedJob(Path("job.py"), (), graph, code, env.counter_names)
    first = chain(spark, job, 0)
    assert first.counters == {"seen": 0}
    first.process([(None, 1), (None, 2)])
    first.process([(None, 3)])
    assert first.counters == {"seen": 6}
    first.close()
    again = chain(spark, job, 0)   # the next attempt counts afresh
    again.process([(None, 4)])
    assert again.counters == {"seen": 2} and seen.value == 0


def test_a_slow_operators_batches_hold_about_a_tenth_of_a_second_of_its_work(spark):
    def slow(record):
        time.sleep(0.004)
        return record

    chain_ = chain(spark, job_of(lambda env: env.rate_source(10).map(slow).print()), 0)
    assert chain_.batch_limit(2000) == 2000   # nothing measured yet
    assert chain_.batch_limit(20_000) == 2000   # nor for a column batch
    chain_.process([(None, index) for index in range(50)])
    assert 10 <= chain_.batch_limit(2000) <= 25   # 0.1 s at 4 ms a record, and more
    fast = chain(spark, job_of(lambda env: env.rate_source(10).map(str).print()), 0)
    fast.process([(None, index) for index in range(2000)])
    assert fast.batch_limit(2000) > 500   # 2,000 on a quiet machine
    # a consumer that took 500 records a second: the wait counts as the batch's work
    fast.output_waited(4.0, 2000)
    assert 10 <= fast.batch_limit(20_000) <= 50
    # one batch that found room halves the wait counted, no more: the consumer may only
    # have drained its queue, and the next batch must not hold all the source owes
    fast.output_waited(0.0, 50)
    assert 10 <= fast.batch_limit(20_000) <= 100
    for _ in range(8):
        fast.output_waited(0.0, 2000)
    assert fast.batch_limit(2000) > 500


def test_a_window_keyed_by_a_field_folds_its_batches_vectorised_and_as_a_lambda_key_does(spark):
    by_field = chain(spark, windowed(10))
    by_function = chain(spark, job_of(
        lambda env: env.rate_source(10).assign_timestamps(lambda record: record[0])
        .key_by(lambda record: record[1]).window(10).count().print()))
    assert isinstance(by_field._window_partials(), ColumnarWindowPartials)
    assert not isinstance(by_function._window_partials(), ColumnarWindowPartials)
    batch = elements((1, "b"), (2, "a"), (9, "a"), (12, "a"), (3, 7))
    for keyed in (by_field, by_function):
        keyed.process(batch)
    assert by_field.advance(math.inf) == by_function.advance(math.inf)
