"""Declaring ``map_batches``: its operator in the graph, its function by operator id, a
streaming job's chain holding it before and after a keyed operator, and what is refused
when declared (docs/job-api.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.engine.batchfunctions import BatchFunction
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.loader import load_job
from clusterdeck.core.protocol.jobgraph import JobKind, ShipStrategy


def per_batch(records):
    return records


def test_a_batch_function_chains_like_a_map_and_keeps_its_format_and_schema():
    env = ExecutionEnvironment().set_parallelism(2)
    env.from_range(10).map_batches(per_batch, format="arrow", name="columns",
                                   schema="a BIGINT").collect()
    graph, code = build_graph(env)
    assert graph.kind is JobKind.DATAFLOW and len(graph.vertices) == 1
    batches = graph.vertices[0].operators[1]
    assert (batches.kind, batches.name) == (plan.MAP_BATCHES, "columns")
    assert batches.params == {"format": "arrow", "schema": "a BIGINT"}
    assert code[batches.id].fn is per_batch


def test_records_is_the_default_format():
    env = ExecutionEnvironment()
    env.from_range(3).map_batches(per_batch).collect()
    batches = build_graph(env)[0].vertices[0].operators[1]
    assert (batches.name, batches.params) == ("map_batches", {"format": "records",
                                                              "schema": None})


def test_a_streaming_job_runs_batch_functions_before_and_after_its_keyed_operator():
    env = ExecutionEnvironment("s").set_parallelism(2)
    env.enable_checkpointing(0.5)
    (env.rate_source(100, 1000).map_batches(per_batch)
        .assign_timestamps(lambda record: record[0] / 100)
        .key_by(1).window(1.0).count()
        .map_batches(per_batch, format="arrow").write_text("/tmp/out"))
    graph, _ = build_graph(env)
    assert graph.kind is JobKind.STREAMING
    assert [[op.kind for op in vertex.operators] for vertex in graph.vertices] == [
        ["source.rate", "map_batches", "assign_timestamps"],
        ["window", "map_batches", "sink.text"]]
    assert [edge.ship_strategy for edge in graph.edges] == [ShipStrategy.HASH]


@pytest.mark.parametrize("call, error, complaint", [
    (lambda s: s.map_batches(42), TypeError, "map_batches\\(\\): expected a function"),
    (lambda s: s.map_batches(per_batch, format="pandas"), ValueError,
     "format is one of 'records', 'arrow'; got 'pandas'"),
    (lambda s: s.map_batches(per_batch, "arrow"), TypeError, "map_batches\\(\\)"),
    (lambda s: s.map_batches(per_batch, fromat="arrow"), TypeError,
     "unknown argument 'fromat' \\(did you mean 'format'\\?\\)"),
    (lambda s: s.map_batches(per_batch, parallelism=0), ValueError,
     "parallelism must be a whole number"),
])
def test_nonsense_arguments_are_refused_when_declared(call, error, complaint):
    with pytest.raises(error, match=complaint):
        call(ExecutionEnvironment().from_range(3))


def test_the_example_keys_its_records_by_columns_and_writes_its_windows_by_batch(tmp_path):
    example = Path(__file__).resolve().parents[4] / "examples" / "streaming_batches.py"
    job = load_job(example, (str(tmp_path / "out"),))
    source, keyed = job.graph.vertices
    assert [op.kind for op in source.operators] == [
        "source.rate", "map_batches", "assign_timestamps"]
    assert [op.kind for op in keyed.operators] == ["window", "map_batches", "sink.text"]
    key, lines = (BatchFunction(job.code[op.id].fn, op.params["format"])
                  for op in (source.operators[1], keyed.operators[1]))
    assert key([(3, "key-3"), (17, "key-7")]) == [(3, "key-3"), (17, "key-7")]
    assert lines([("key-1", 2.0, 3.0, 10)]) == ["key-1,2,3,10"]
